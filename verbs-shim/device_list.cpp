// Device discovery: ibv_get_device_list and the per-device getters.
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "verbs-shim/context.hpp"
#include "verbs-shim/host_link.hpp"
#include "verbs-shim/shim_marker.hpp"

namespace softrdma::shim {

namespace {

[[gnu::used]] const char kMarker[] = SOFTRDMA_SHIM_MARKER;  // what `softrdma run` checks for

// ibdev_path is what ibv_devinfo hands to ibv_read_sysfs_file (verbs-abi.md §8.12); sysfs.cpp
// serves that directory from memory, so no real /sys/class/infiniband is needed.
ibv_device make_device() {
  ibv_device dev{};
  dev.node_type = IBV_NODE_CA;
  dev.transport_type = IBV_TRANSPORT_IB;  // RoCE reports the IB transport
  std::snprintf(dev.name, sizeof dev.name, "%s", kDeviceName);
  std::snprintf(dev.dev_name, sizeof dev.dev_name, "uverbs_%s", kDeviceName);
  std::snprintf(dev.dev_path, sizeof dev.dev_path, "/sys/class/infiniband_verbs/%s", dev.dev_name);
  std::snprintf(dev.ibdev_path, sizeof dev.ibdev_path, "/sys/class/infiniband/%s", kDeviceName);
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
  static ibv_device device = make_device();
  return &device;
}

}  // namespace softrdma::shim

using namespace softrdma::shim;

SRDMA_DEFAULT_VERSION(ibv_get_device_list, "IBVERBS_1.1")
ibv_device** srdma_default_ibv_get_device_list(int* num_devices) {
  // Callers read the count even when NULL comes back (perftest does): rdma-core sets it first.
  if (num_devices != nullptr) *num_devices = 0;
  // A device that cannot start (the reason is on stderr) is absent, as an RNIC whose driver
  // failed would be: an empty list, not an error.
  ibv_device* dev = the_device();
  // A fresh NULL-terminated array per call, freed by ibv_free_device_list.
  auto** list = static_cast<ibv_device**>(std::calloc(2, sizeof(ibv_device*)));
  if (list == nullptr) {
    errno = ENOMEM;
    return nullptr;
  }
  list[0] = dev;
  if (num_devices != nullptr) *num_devices = dev != nullptr ? 1 : 0;
  return list;
}

SRDMA_DEFAULT_VERSION(ibv_free_device_list, "IBVERBS_1.1")
void srdma_default_ibv_free_device_list(ibv_device** list) { std::free(list); }

SRDMA_DEFAULT_VERSION(ibv_get_device_name, "IBVERBS_1.1")
const char* srdma_default_ibv_get_device_name(ibv_device* device) { return device != nullptr ? device->name : nullptr; }

SRDMA_DEFAULT_VERSION(ibv_get_device_guid, "IBVERBS_1.1")
__be64 srdma_default_ibv_get_device_guid(ibv_device* device) {
  const DeviceIdentity* id = device == the_device() ? device_identity() : nullptr;
  if (id == nullptr) return 0;
  __be64 guid;
  std::memcpy(&guid, id->guid.data(), sizeof guid);  // already big-endian bytes
  return guid;
}

// The kernel's ibdev index in rdma-core; librdmacm and pyverbs record it. -1 means unknown.
SRDMA_EXPORT int ibv_get_device_index(ibv_device* device) {
  return device != nullptr && device == the_device() ? kDeviceIndex : -1;
}
