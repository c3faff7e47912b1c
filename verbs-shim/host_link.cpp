#include "verbs-shim/host_link.hpp"

#include <sys/prctl.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <unordered_map>
#include <unordered_set>

#include "emulator/host/crc_setting.hpp"
#include "emulator/host/daemon_client.hpp"
#include "emulator/host/daemon_socket.hpp"
#include "emulator/host/embedded_link.hpp"
#include "verbs-shim/context.hpp"
#include "verbs-shim/process_stats.hpp"

namespace softrdma::shim {

namespace {

// The engine names objects by handle; events are routed to the ibv_* objects that wrap them.
struct Routes {
  std::mutex mutex;
  std::unordered_set<ibv_context*> contexts;
  std::unordered_map<std::uint32_t, ibv_cq*> cqs;
  std::unordered_map<std::uint32_t, ibv_qp*> qps;
  std::unordered_map<std::uint32_t, ibv_srq*> srqs;
};

Routes* the_routes = new Routes;  // outlives static destructors, like the host

Routes& routes() { return *the_routes; }

void on_cq_event(std::uint32_t cq_handle) {
  Routes& r = routes();
  std::lock_guard lock(r.mutex);
  auto it = r.cqs.find(cq_handle);
  if (it != r.cqs.end() && it->second->channel != nullptr) notify_channel(it->second->channel, it->second);
}

// The object `handle` names in `map`, and its context; false when it is gone.
template <class Object>
bool name(const std::unordered_map<std::uint32_t, Object*>& map, std::uint32_t handle, Object*& element,
          ibv_context*& ctx) {
  auto it = map.find(handle);
  if (it == map.end()) return false;
  element = it->second;
  ctx = it->second->context;
  return true;
}

// The ibv_async_event for an engine event, or false when its object is gone.
bool to_ibv(Routes& r, const core::AsyncEvent& e, ibv_async_event& out, ibv_context*& ctx) {
  out.event_type = static_cast<ibv_event_type>(e.type);
  switch (e.type) {
    case core::AsyncEventType::cq_err:
      return name(r.cqs, e.element, out.element.cq, ctx);
    case core::AsyncEventType::srq_err:
    case core::AsyncEventType::srq_limit_reached:
      return name(r.srqs, e.element, out.element.srq, ctx);
    case core::AsyncEventType::device_fatal:
    case core::AsyncEventType::port_active:
    case core::AsyncEventType::port_err:
      return false;  // no context to name yet: the port never changes state
    default:
      return name(r.qps, e.element, out.element.qp, ctx);
  }
}

void on_async_event(const core::AsyncEvent& e) {
  Routes& r = routes();
  std::lock_guard lock(r.mutex);
  if (e.type == core::AsyncEventType::device_fatal) {
    // The daemon is going or gone: every context hears it, and every completion channel wakes,
    // so that a thread asleep in ibv_get_cq_event polls, gets what was flushed and then EIO,
    // instead of sleeping forever.
    ibv_async_event event{};
    event.event_type = IBV_EVENT_DEVICE_FATAL;
    event.element.port_num = 1;
    for (ibv_context* ctx : r.contexts) post_async_event(ctx, event);
    for (const auto& [handle, cq] : r.cqs) {
      if (cq->channel != nullptr) notify_channel(cq->channel, cq);
    }
    return;
  }
  ibv_async_event event{};
  ibv_context* ctx = nullptr;
  if (to_ibv(r, e, event, ctx)) post_async_event(ctx, event);
}

// The device's identity is that of the address it holds, which the host reports as text.
bool identify(BoundDevice& bound) {
  const std::optional<IpAddress> address = parse_address(bound.link->address());
  if (!address) {
    bound.error = "the device bound " + bound.link->address() + ", which is not an IP address";
    return false;
  }
  bound.identity = make_identity(*address, find_interface(*address));
  return true;
}

// Daemon mode: the engine is softrdmad's. The daemon reaches this process's registered memory
// with process_vm_readv/writev, which Yama's ptrace_scope=1 allows only to a declared tracer.
BoundDevice attach_daemon(const std::string& socket) {
  BoundDevice bound;
  host::DaemonConnect connected = host::DaemonClient::connect(socket);
  if (!connected.client) {
    bound.error = connected.error;
    return bound;
  }
  ::prctl(PR_SET_PTRACER, static_cast<unsigned long>(connected.client->daemon_pid()), 0, 0, 0);  // EINVAL without Yama
  bound.link = connected.client.release();  // never freed: see host_link.hpp
  if (!identify(bound)) {
    bound.link = nullptr;
    return bound;
  }
  bound.link->set_event_handlers(on_cq_event, on_async_event);
  return bound;
}

struct Preference {
  std::mutex mutex;
  std::optional<std::string> ip;
};

Preference* the_preference = new Preference;

Preference& preference() { return *the_preference; }

// The process's device, started on first use under `mutex`; every verb reads `device`.
struct Started {
  std::mutex mutex;
  std::atomic<const BoundDevice*> device{nullptr};
};
Started* the_started = new Started;

BoundDevice start() {
  host::apply_crc_variable();  // SOFTRDMA_CRC: the CRC tier (emulator/host/crc_setting.hpp)
  // SOFTRDMA_DAEMON=SOCKET: daemon mode (emulator/host/daemon_client.hpp); empty or unset: embedded.
  if (const char* daemon = std::getenv(host::kDaemonVariable); daemon != nullptr && *daemon != '\0') {
    return attach_daemon(daemon);
  }
  BoundDevice bound;
  const AddressChoice choice = choose_address(environment_request());
  if (!choice.ok()) {
    bound.error = choice.error;
    return bound;
  }
  host::HostConfig config;
  if (choice.address) {
    config.ip = to_string(*choice.address);
  } else {
    std::lock_guard lock(preference().mutex);
    config.ip = preference().ip;
  }
  // SOFTRDMA_CAPTURE=FILE: a pcap of every packet (emulator/net/capture_stage.hpp); empty: off.
  if (const char* capture = std::getenv("SOFTRDMA_CAPTURE"); capture != nullptr && *capture != '\0')
    config.capture_path = capture;
  // SOFTRDMA_FAULTS="loss=1%,...,seed=N": seeded fault injection (emulator/net/fault_plan.hpp).
  if (const char* faults = std::getenv("SOFTRDMA_FAULTS"); faults != nullptr && *faults != '\0') {
    net::FaultParse parsed = net::parse_faults(faults);
    if (!parsed.plan) {
      bound.error = std::string("SOFTRDMA_FAULTS='") + faults + "': " + parsed.error;
      return bound;
    }
    config.faults = parsed.plan;
  }
  // SOFTRDMA_UDP_GSO=0: one datagram per packet on the wire (net/udp_backend.hpp); 1 or unset: GSO.
  if (const char* gso = std::getenv("SOFTRDMA_UDP_GSO"); gso != nullptr && *gso != '\0') {
    if (std::strcmp(gso, "0") != 0 && std::strcmp(gso, "1") != 0) {
      bound.error = std::string("SOFTRDMA_UDP_GSO='") + gso + "': expected 0 or 1";
      return bound;
    }
    config.udp_gso = *gso == '1';
  }
  arm_exit_snapshot();  // before the host, so that it runs after the capture's exit flush
  host::HostStart started = host::EmbeddedHost::start(std::move(config));
  if (!started.host) {
    bound.error = started.error;
    return bound;
  }
  bound.host = started.host.release();  // never freed: see host_link.hpp
  bound.link = new host::EmbeddedLink(*bound.host);
  if (!identify(bound)) {
    bound.link = nullptr;
    return bound;
  }
  bound.link->set_event_handlers(on_cq_event, on_async_event);
  set_exit_snapshot_host(bound.host);
  serve_stats(*bound.host);
  return bound;
}

template <class Map, class T>
void add(Map map, std::uint32_t key, T* object) {
  Routes& r = routes();
  std::lock_guard lock(r.mutex);
  (r.*map)[key] = object;
}

template <class Map>
void remove(Map map, std::uint32_t key) {
  Routes& r = routes();
  std::lock_guard lock(r.mutex);
  (r.*map).erase(key);
}

}  // namespace

const BoundDevice& bound_device() {
  Started& s = *the_started;
  if (const BoundDevice* started = s.device.load(std::memory_order_acquire)) return *started;
  std::lock_guard lock(s.mutex);
  if (s.device.load(std::memory_order_relaxed) == nullptr) {
    s.device.store(new BoundDevice(start()), std::memory_order_release);  // never freed: see host_link.hpp
  }
  return *s.device.load(std::memory_order_relaxed);
}

void forget_device_after_fork() noexcept {
  the_routes = new Routes;
  the_preference = new Preference;
  the_started = new Started;
}

const DeviceIdentity* device_identity() {
  const BoundDevice& b = bound_device();
  return b.link != nullptr ? &b.identity : nullptr;
}

host::DeviceLink& link() { return *bound_device().link; }

void prefer_address(const std::string& ip) {
  std::lock_guard lock(preference().mutex);
  if (!preference().ip) preference().ip = ip;
}

void track(ibv_context* ctx) {
  Routes& r = routes();
  std::lock_guard lock(r.mutex);
  r.contexts.insert(ctx);
}
void untrack(ibv_context* ctx) {
  Routes& r = routes();
  std::lock_guard lock(r.mutex);
  r.contexts.erase(ctx);
}

void track(ibv_cq* cq) { add(&Routes::cqs, cq->handle, cq); }
void track(ibv_qp* qp) { add(&Routes::qps, qp->qp_num, qp); }
void track(ibv_srq* srq) { add(&Routes::srqs, srq->handle, srq); }
void untrack(ibv_cq* cq) { remove(&Routes::cqs, cq->handle); }
void untrack(ibv_qp* qp) { remove(&Routes::qps, qp->qp_num); }
void untrack(ibv_srq* srq) { remove(&Routes::srqs, srq->handle); }

}  // namespace softrdma::shim
