// Device discovery: ibv_get_device_list and the per-device getters. softrdma's devices and
// the machine's own (system_rdma_core.hpp) share one list, in the order SOFTRDMA_REAL_DEVICES says.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <span>

#include "verbs-shim/context.hpp"
#include "verbs-shim/host_link.hpp"
#include "verbs-shim/shim_marker.hpp"
#include "verbs-shim/system_rdma_core.hpp"

namespace softrdma::shim {

namespace {

[[gnu::used]] const char kMarker[] = SOFTRDMA_SHIM_MARKER;  // what `softrdma run` checks for

// ibdev_path is what ibv_devinfo hands to ibv_read_sysfs_file (verbs-abi.md §8.12); sysfs.cpp
// serves that directory from memory, so no real /sys/class/infiniband is needed.
ibv_device make_device(Transport transport) {
  ibv_device dev{};
  const bool iwarp = transport == Transport::iwarp;
  dev.node_type = iwarp ? IBV_NODE_RNIC : IBV_NODE_CA;
  dev.transport_type = iwarp ? IBV_TRANSPORT_IWARP : IBV_TRANSPORT_IB;  // RoCE reports the IB transport
  const char* name = iwarp ? kIwarpDeviceName : kDeviceName;
  std::snprintf(dev.name, sizeof dev.name, "%s", name);
  std::snprintf(dev.dev_name, sizeof dev.dev_name, "%s%s", kDevNamePrefix, name);
  std::snprintf(dev.dev_path, sizeof dev.dev_path, "/sys/class/infiniband_verbs/%s", dev.dev_name);
  std::snprintf(dev.ibdev_path, sizeof dev.ibdev_path, "/sys/class/infiniband/%s", name);
  return dev;
}

bool report_unusable_address() {
  std::fprintf(stderr, "softrdma: %s; no RDMA device\n", bound_device().error.c_str());
  return true;
}

}  // namespace

ibv_device* the_device() {
  if (device_identity() == nullptr) {
    // Said once per process (a static's initialiser runs once, thread-safely).
    [[maybe_unused]] static const bool told = report_unusable_address();
    return nullptr;
  }
  static ibv_device device = make_device(Transport::roce);
  return &device;
}

ibv_device* the_iwarp_device() {
  if (iwarp_device() == nullptr) return nullptr;
  static ibv_device device = make_device(Transport::iwarp);
  return &device;
}

const BoundDevice* bound_of(ibv_device* device) {
  if (device == nullptr) return nullptr;
  if (device == the_device()) return &bound_device();
  if (device == the_iwarp_device()) return iwarp_device();
  return nullptr;
}

}  // namespace softrdma::shim

using namespace softrdma::shim;

SRDMA_DEFAULT_VERSION(ibv_get_device_list, "IBVERBS_1.1")
ibv_device** srdma_default_ibv_get_device_list(int* num_devices) {
  // Callers read the count even when NULL comes back (perftest does): rdma-core sets it first.
  if (num_devices != nullptr) *num_devices = 0;
  // A device that cannot start (the reason is on stderr) is absent, as an RNIC whose driver
  // failed would be: an empty list, not an error.
  ibv_device* const ours[] = {the_device(), the_device() != nullptr ? the_iwarp_device() : nullptr};
  const std::span<ibv_device* const> machine = system::devices();
  // A fresh NULL-terminated array per call, freed by ibv_free_device_list.
  auto** list = static_cast<ibv_device**>(std::calloc(std::size(ours) + machine.size() + 1, sizeof(ibv_device*)));
  if (list == nullptr) {
    errno = ENOMEM;
    return nullptr;
  }
  int n = 0;
  const bool machine_first = system::placement() == system::Placement::first;
  if (machine_first) {
    for (ibv_device* dev : machine) list[n++] = dev;
  }
  for (ibv_device* dev : ours) {
    if (dev != nullptr) list[n++] = dev;
  }
  if (!machine_first) {
    for (ibv_device* dev : machine) list[n++] = dev;
  }
  if (num_devices != nullptr) *num_devices = n;
  return list;
}

SRDMA_DEFAULT_VERSION(ibv_free_device_list, "IBVERBS_1.1")
void srdma_default_ibv_free_device_list(ibv_device** list) { std::free(list); }

SRDMA_DEFAULT_VERSION(ibv_get_device_name, "IBVERBS_1.1")
const char* srdma_default_ibv_get_device_name(ibv_device* device) { return device != nullptr ? device->name : nullptr; }

SRDMA_DEFAULT_VERSION(ibv_get_device_guid, "IBVERBS_1.1")
__be64 srdma_default_ibv_get_device_guid(ibv_device* device) {
  SRDMA_FORWARD_IF_SYSTEM(device, ibv_get_device_guid, device);
  const BoundDevice* bound = bound_of(device);
  if (bound == nullptr) return 0;
  __be64 guid;
  std::memcpy(&guid, bound->identity.guid.data(), sizeof guid);  // already big-endian bytes
  return guid;
}

// The kernel's ibdev index in rdma-core; librdmacm and pyverbs record it. -1 means unknown.
SRDMA_EXPORT int ibv_get_device_index(ibv_device* device) {
  SRDMA_FORWARD_IF_SYSTEM(device, ibv_get_device_index, device);
  const BoundDevice* bound = bound_of(device);
  if (bound == nullptr) return -1;
  return bound->identity.transport == Transport::iwarp ? kIwarpDeviceIndex : kDeviceIndex;
}
