// The process's devices, and how their events reach the application's objects.
//
// Two modes. Embedded (the default): the host (emulator/host/) runs the transport engine in
// this process. Daemon (SOFTRDMA_DAEMON=SOCKET): softrdmad runs it, and every verb is a request
// on its socket (host/daemon_client.hpp); the device's address is the daemon's.
//
// The embedded host starts on first use (the first ibv_get_device_list), binding SOFTRDMA_IP
// or SOFTRDMA_NETDEV's address (address.hpp) or, neither set, the first free 127.0.0.N:4791
// (emulator/host/loopback_address.hpp), so the GIDs and GUIDs the device reports are those of
// the address it really holds. Every context opened in the process shares it, as contexts
// opened on one NIC share the NIC. It lives until the process exits: tearing it down from a
// static destructor would race with application threads still in verbs calls.
#pragma once

#include <cstdint>
#include <string>

#include "emulator/host/device_link.hpp"
#include "emulator/host/embedded_host.hpp"
#include "verbs-shim/identity.hpp"
#include "verbs-shim/verbs_api.hpp"

namespace softrdma::shim {

struct Routes;  // host_link.cpp's: which ibv_* object each of the engine's handles names

struct BoundDevice {
  host::DeviceLink* link = nullptr;    // null when the device could not start
  host::EmbeddedHost* host = nullptr;  // in embedded mode: the host behind `link`
  DeviceIdentity identity;
  std::string error;         // then: one line saying why
  Routes* routes = nullptr;  // each engine has its own handles, so each device its own routes
};

// srdma0, the RoCE device: started once (thread-safe), and once more in a forked child.
const BoundDevice& bound_device();
// srdmaiw0, the iWARP device, on srdma0's address: started (or attached, in daemon mode) once,
// after srdma0, when SOFTRDMA_IWARP=1 (softrdma run --iwarp) asks for it; rdma_cm then connects through it
// (private_device.hpp). Null otherwise, or when it could not start (said once on stderr).
const BoundDevice* iwarp_device();
// In a forked child: the parent's device runs in the parent (its threads are not the
// child's), or is the parent's daemon connection, so the child starts or attaches its own on
// first use. The parent's objects are left, never freed: their locks may have been held.
void forget_device_after_fork() noexcept;
// The address an embedded device binds if it starts after this call and the environment
// chooses none (rdma_bind_addr in embedded mode: the address decides which device serves).
void prefer_address(const std::string& ip);

// The device behind every object of a context (never null once a context exists, because
// ibv_open_device needs the device).
host::DeviceLink& link(ibv_context* ctx);

// Where the engine's events go: completion-channel notifications to the CQ's channel, async
// events to the async fd of the object's context. Objects register when created and leave
// before they are freed, so an event never reaches freed memory.
//
// An async event the application has read names its object until it is acknowledged, so the
// object's destroy waits for that, as rdma-core's does: untrack returns how many of its events
// were read, which the destroy then waits to see acknowledged. An event still unread when its
// object leaves is dropped when read, as the kernel drops it (claim_async_event).
void track(ibv_context* ctx);  // for events of the whole device (IBV_EVENT_DEVICE_FATAL)
void track(ibv_cq* cq);
void track(ibv_qp* qp);
void track(ibv_srq* srq);
void untrack(ibv_context* ctx);
unsigned untrack(ibv_cq* cq);
unsigned untrack(ibv_qp* qp);
unsigned untrack(ibv_srq* srq);
// Whether a just-read event may go to the application: false when its object has left.
bool claim_async_event(ibv_context* ctx, const ibv_async_event& event);

}  // namespace softrdma::shim
