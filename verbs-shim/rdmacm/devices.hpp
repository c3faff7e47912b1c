// The RDMA devices librdmacm works with, as rdma-core's cma.c keeps them: each device of
// ibv_get_device_list is opened once, on first use, and stays open while the library is
// loaded ("Devices remain opened while the librdmacm is loaded", rdma_get_devices(3)). The
// contexts rdma_get_devices hands out are these same contexts, so a program's PD or CQ
// created on one of them serves an rdma_cm_id on that device (id->verbs), and the PD an
// rdma_cm_id gets without one of its own (id->pd) is the device's shared one.
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>

namespace softrdma::rdmacm {

struct CmDevice {
  ibv_device* device = nullptr;
  __be64 guid = 0;               // ibv_get_device_guid: how a device is matched
  ibv_context* verbs = nullptr;  // opened on first use, never closed
  ibv_pd* pd = nullptr;          // id->pd of the ids on this device; while refcnt > 0
  int port_cnt = 0;              // the device's limits, read when it is opened
  int max_qpsize = 0;
  std::uint8_t max_initiator_depth = 0;
  std::uint8_t max_responder_resources = 0;
  int refcnt = 0;  // rdma_get_devices lists not freed + ids holding it
};

// rdma-core's ucma_init: lists the process's devices (ibv_get_device_list), once. 0, or -1
// with errno ENODEV when there is none. ibv_get_device_list is what starts softrdma's device.
int init_devices() noexcept;

// In a forked child: the parent's contexts are of the parent's device, so the child lists and
// opens its own (the parent's objects are left, never freed: their locks may be held).
void forget_devices_after_fork() noexcept;

// rdma-core's ucma_get_device: the device whose node GUID is `guid`, opened, its shared PD
// allocated, with one more reference. Null with errno set (ENODEV: no such device).
CmDevice* acquire_device(__be64 guid) noexcept;

// rdma-core's ucma_put_device: drops a reference acquire_device took; the last one frees the
// shared PD. The context stays open.
void release_device(CmDevice* device) noexcept;

}  // namespace softrdma::rdmacm
