// rdma_get_devices / rdma_free_devices, and the table of devices behind them (devices.hpp),
// with the semantics of rdma-core 44's cma.c: a NULL-terminated array of the opened contexts,
// malloc'd per call and freed by rdma_free_devices, each entry counted as a reference on its
// device; NULL with errno set, and *num_devices 0, when there is no device or one cannot be
// opened. The verbs are called through libibverbs' public API, as rdma-core's library does.
#include "verbs-shim/rdmacm/devices.hpp"

#include <cerrno>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <new>
#include <vector>

#include "verbs-shim/rdmacm/rdmacm_api.hpp"

namespace softrdma::rdmacm {

namespace {

struct Registry {
  std::mutex mutex;
  ibv_device** list = nullptr;                     // the last ibv_get_device_list: it keeps our ibv_devices valid
  std::vector<std::unique_ptr<CmDevice>> devices;  // stable addresses: ids point at them
};

// Never destroyed: an rdma_cm_id or a device list may outlive static destruction (a thread
// still running at exit), and rdma-core never closes the contexts either. A forked child
// starts a registry of its own (forget_devices_after_fork).
Registry* the_registry = new Registry;

Registry& registry() { return *the_registry; }

// rdma-core's sync_devices_list, under the registry's lock: adds the devices that appeared
// since the last call. softrdma's devices never go away, so none is removed.
int sync_devices(Registry& r) {
  int count = 0;
  ibv_device** list = ibv_get_device_list(&count);
  if (list == nullptr || count == 0) {
    if (list != nullptr) ibv_free_device_list(list);
    errno = ENODEV;
    return -1;
  }
  for (int i = 0; i < count; ++i) {
    bool known = false;
    for (const auto& d : r.devices) known = known || d->device == list[i];
    if (known) continue;
    try {
      auto d = std::make_unique<CmDevice>();
      d->device = list[i];
      d->guid = ibv_get_device_guid(list[i]);
      r.devices.push_back(std::move(d));
    } catch (const std::bad_alloc&) {
      ibv_free_device_list(list);
      errno = ENOMEM;
      return -1;
    }
  }
  if (r.list != nullptr) ibv_free_device_list(r.list);
  r.list = list;
  return 0;
}

// rdma-core's ucma_init_device: opens the device once and reads its limits.
int open_device(CmDevice& d) {
  if (d.verbs != nullptr) return 0;
  d.verbs = ibv_open_device(d.device);
  if (d.verbs == nullptr) {
    errno = ENODEV;
    return -1;
  }
  ibv_device_attr attr{};
  if (int ret = ibv_query_device(d.verbs, &attr); ret != 0) {
    ibv_close_device(d.verbs);
    d.verbs = nullptr;
    errno = ret;
    return -1;
  }
  d.port_cnt = attr.phys_port_cnt;
  d.max_qpsize = attr.max_qp_wr;
  d.max_initiator_depth = static_cast<std::uint8_t>(attr.max_qp_init_rd_atom);
  d.max_responder_resources = static_cast<std::uint8_t>(attr.max_qp_rd_atom);
  return 0;
}

CmDevice* find(Registry& r, __be64 guid) {
  for (const auto& d : r.devices) {
    if (d->guid == guid) return d.get();
  }
  return nullptr;
}

}  // namespace

void forget_devices_after_fork() noexcept { the_registry = new Registry; }

int init_devices() noexcept {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  return r.devices.empty() ? sync_devices(r) : 0;
}

CmDevice* acquire_device(__be64 guid) noexcept {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  CmDevice* d = find(r, guid);
  if (d == nullptr && sync_devices(r) == 0) d = find(r, guid);
  if (d == nullptr) {
    errno = ENODEV;
    return nullptr;
  }
  if (open_device(*d) != 0) return nullptr;
  if (d->pd == nullptr) d->pd = ibv_alloc_pd(d->verbs);
  if (d->pd == nullptr) return nullptr;  // errno from ibv_alloc_pd
  ++d->refcnt;
  return d;
}

void release_device(CmDevice* device) noexcept {
  if (device == nullptr) return;
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  if (--device->refcnt == 0 && device->pd != nullptr) {
    ibv_dealloc_pd(device->pd);
    device->pd = nullptr;
  }
}

}  // namespace softrdma::rdmacm

using namespace softrdma::rdmacm;

SRDMA_RDMACM_VERSION(rdma_get_devices, "RDMACM_1.0")
ibv_context** srdma_rdmacm_rdma_get_devices(int* num_devices) {
  ibv_context** contexts = nullptr;
  std::size_t count = 0;
  if (init_devices() == 0) {
    Registry& r = registry();
    std::lock_guard lock(r.mutex);
    bool opened = sync_devices(r) == 0;
    for (const auto& d : r.devices) opened = opened && open_device(*d) == 0;
    if (opened) {
      count = r.devices.size();
      contexts = static_cast<ibv_context**>(std::malloc(sizeof(ibv_context*) * (count + 1)));
    }
    if (contexts != nullptr) {
      for (std::size_t i = 0; i < count; ++i) {
        contexts[i] = r.devices[i]->verbs;
        ++r.devices[i]->refcnt;
      }
      contexts[count] = nullptr;
    }
  }
  if (num_devices != nullptr) *num_devices = contexts != nullptr ? static_cast<int>(count) : 0;
  return contexts;
}

SRDMA_RDMACM_VERSION(rdma_free_devices, "RDMACM_1.0")
void srdma_rdmacm_rdma_free_devices(ibv_context** list) {
  if (list == nullptr) return;  // rdma-core would crash; nothing to release
  Registry& r = registry();
  {
    std::lock_guard lock(r.mutex);
    for (std::size_t i = 0; list[i] != nullptr; ++i) {
      for (const auto& d : r.devices) {
        if (d->verbs == list[i]) --d->refcnt;
      }
    }
  }
  std::free(list);
}
