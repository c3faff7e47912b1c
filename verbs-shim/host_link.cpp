#include "verbs-shim/host_link.hpp"

#include <sys/prctl.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <unordered_map>
#include <unordered_set>

#include "emulator/host/crc_setting.hpp"
#include "emulator/host/daemon_client.hpp"
#include "emulator/host/daemon_socket.hpp"
#include "emulator/host/embedded_link.hpp"
#include "emulator/host/iwarp_link.hpp"
#include "verbs-shim/context.hpp"
#include "verbs-shim/process_stats.hpp"

namespace softrdma::shim {

// The engine names objects by handle; events are routed to the ibv_* objects that wrap them.
struct Routes {
  std::mutex mutex;
  std::unordered_set<ibv_context*> contexts;
  std::unordered_map<std::uint32_t, ibv_cq*> cqs;
  std::unordered_map<std::uint32_t, ibv_qp*> qps;
  std::unordered_map<std::uint32_t, ibv_srq*> srqs;
  std::unordered_map<const void*, unsigned> events_read;  // by object: async events read so far
};

namespace {

Routes& routes_of(ibv_context* ctx) { return *context_of(ctx).bound->routes; }

void on_cq_event(Routes& r, std::uint32_t cq_handle) {
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

void on_async_event(Routes& r, const core::AsyncEvent& e) {
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
bool identify(BoundDevice& bound, Transport transport) {
  const std::optional<IpAddress> address = parse_address(bound.link->address());
  if (!address) {
    bound.error = "the device bound " + bound.link->address() + ", which is not an IP address";
    return false;
  }
  const std::optional<Interface> iface = find_interface(*address);
  bound.identity =
      transport == Transport::iwarp ? make_iwarp_identity(*address, iface) : make_identity(*address, iface);
  return true;
}

// Events go to the device's own routes, which live as long as the device.
void route_events(BoundDevice& bound) {
  Routes* r = bound.routes = new Routes;
  bound.link->set_event_handlers([r](std::uint32_t cq) { on_cq_event(*r, cq); },
                                 [r](const core::AsyncEvent& e) { on_async_event(*r, e); });
}

// Daemon mode: the engine is softrdmad's. The daemon reaches this process's registered memory
// with process_vm_readv/writev, which Yama's ptrace_scope=1 allows only to a declared tracer.
BoundDevice attach_daemon(const std::string& socket, Transport transport) {
  BoundDevice bound;
  host::DaemonConnect connected = host::DaemonClient::connect(socket);
  if (!connected.client) {
    bound.error = connected.error;
    return bound;
  }
  ::prctl(PR_SET_PTRACER, static_cast<unsigned long>(connected.client->daemon_pid()), 0, 0, 0);  // EINVAL without Yama
  bound.link = connected.client.release();  // never freed: see host_link.hpp
  if (!identify(bound, transport)) {
    bound.link = nullptr;
    return bound;
  }
  route_events(bound);
  return bound;
}

// SOFTRDMA_DAEMON=SOCKET: daemon mode (emulator/host/daemon_client.hpp); none: embedded.
const char* daemon_socket() {
  const char* daemon = std::getenv(host::kDaemonVariable);
  return daemon != nullptr && *daemon != '\0' ? daemon : nullptr;
}

struct Preference {
  std::mutex mutex;
  std::optional<std::string> ip;
};

Preference* the_preference = new Preference;

Preference& preference() { return *the_preference; }

// The process's devices, started on first use under `mutex`; every verb reads them.
struct Started {
  std::mutex mutex;
  std::atomic<const BoundDevice*> device{nullptr};
  std::atomic<const BoundDevice*> iwarp{nullptr};  // tried once: null link when it failed
};
Started* the_started = new Started;

BoundDevice start() {
  host::apply_crc_variable();  // SOFTRDMA_CRC: the CRC tier (emulator/host/crc_setting.hpp)
  if (const char* daemon = daemon_socket()) return attach_daemon(daemon, Transport::roce);
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
  if (!identify(bound, Transport::roce)) {
    bound.link = nullptr;
    return bound;
  }
  route_events(bound);
  set_exit_snapshot_host(bound.host);
  serve_stats(*bound.host);
  return bound;
}

// SOFTRDMA_IWARP=1: srdmaiw0 beside srdma0, on its address: softrdmad's, on the socket beside
// srdma0's, or embedded.
BoundDevice start_iwarp(const BoundDevice& roce) {
  BoundDevice bound;
  const char* wanted = std::getenv("SOFTRDMA_IWARP");
  if (wanted == nullptr || std::strcmp(wanted, "1") != 0) return bound;
  if (const char* daemon = daemon_socket()) {
    bound = attach_daemon(std::string(daemon) + host::daemon::kIwarpSocketSuffix, Transport::iwarp);
    if (!bound.error.empty()) bound.error = "softrdmad serves no iWARP device (softrdmad --iwarp): " + bound.error;
    return bound;
  }
  host::IwarpHostConfig config;
  config.ip = roce.link->address();
  config.shared_capture = roce.host->capture();  // SOFTRDMA_CAPTURE: one file for both devices
  // SOFTRDMA_MPA_CRC=1: ask every peer for MPA CRCs; 0 or unset: when the peer asks.
  if (const char* crc = std::getenv("SOFTRDMA_MPA_CRC"); crc != nullptr && *crc != '\0') {
    if (std::strcmp(crc, "0") != 0 && std::strcmp(crc, "1") != 0) {
      bound.error = std::string("SOFTRDMA_MPA_CRC='") + crc + "': expected 0 or 1";
      return bound;
    }
    config.mpa_crc = *crc == '1';
  }
  // SOFTRDMA_FAULTS (start() has refused a plan that does not parse): what applies to FPDUs.
  if (const char* faults = std::getenv("SOFTRDMA_FAULTS"); faults != nullptr && *faults != '\0') {
    config.faults = net::parse_faults(faults).plan;
    const std::string ignored = config.faults ? host::IwarpFaults::ignored(*config.faults) : "";
    if (!ignored.empty()) std::fprintf(stderr, "softrdma: srdmaiw0 ignores SOFTRDMA_FAULTS' %s\n", ignored.c_str());
  }
  host::IwarpHostStart started = host::IwarpHost::start(std::move(config));
  if (!started.host) {
    bound.error = started.error;
    return bound;
  }
  host::IwarpHost& iwarp = *started.host.release();  // never freed: see host_link.hpp
  bound.link = new host::IwarpLink(iwarp);
  if (!identify(bound, Transport::iwarp)) {
    bound.link = nullptr;
    return bound;
  }
  route_events(bound);
  report_iwarp_host(&iwarp);
  return bound;
}

template <class Map, class T>
void add(Map map, T* object, std::uint32_t key) {
  Routes& r = routes_of(object->context);
  std::lock_guard lock(r.mutex);
  (r.*map)[key] = object;
}

template <class Map, class T>
unsigned remove(Map map, T* object, std::uint32_t key) {
  Routes& r = routes_of(object->context);
  std::lock_guard lock(r.mutex);
  // Only its own entry: an XRC target opened again (ibv_open_qp) shares its number, untracked.
  const auto entry = (r.*map).find(key);
  if (entry != (r.*map).end() && entry->second == object) (r.*map).erase(entry);
  const auto read = r.events_read.find(object);
  if (read == r.events_read.end()) return 0;
  const unsigned n = read->second;
  r.events_read.erase(read);
  return n;
}

// Whether `object` is still in `map`, found by address: a departed object must not be read.
template <class Object>
bool holds(const std::unordered_map<std::uint32_t, Object*>& map, const Object* object) {
  for (const auto& entry : map)
    if (entry.second == object) return true;
  return false;
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

const BoundDevice* iwarp_device() {
  const BoundDevice& roce = bound_device();
  Started& s = *the_started;
  const BoundDevice* started = s.iwarp.load(std::memory_order_acquire);
  if (started == nullptr) {
    std::lock_guard lock(s.mutex);
    started = s.iwarp.load(std::memory_order_relaxed);
    if (started == nullptr) {
      started = new BoundDevice(roce.link != nullptr ? start_iwarp(roce) : BoundDevice{});
      if (!started->error.empty()) std::fprintf(stderr, "softrdma: no iWARP device: %s\n", started->error.c_str());
      s.iwarp.store(started, std::memory_order_release);  // never freed: see host_link.hpp
    }
  }
  return started->link != nullptr ? started : nullptr;
}

void forget_device_after_fork() noexcept {
  the_preference = new Preference;
  the_started = new Started;
}

const DeviceIdentity* device_identity() {
  const BoundDevice& b = bound_device();
  return b.link != nullptr ? &b.identity : nullptr;
}

host::DeviceLink& link(ibv_context* ctx) { return *context_of(ctx).bound->link; }

void prefer_address(const std::string& ip) {
  std::lock_guard lock(preference().mutex);
  if (!preference().ip) preference().ip = ip;
}

void track(ibv_context* ctx) {
  Routes& r = routes_of(ctx);
  std::lock_guard lock(r.mutex);
  r.contexts.insert(ctx);
}
void untrack(ibv_context* ctx) {
  Routes& r = routes_of(ctx);
  std::lock_guard lock(r.mutex);
  r.contexts.erase(ctx);
}

void track(ibv_cq* cq) { add(&Routes::cqs, cq, cq->handle); }
void track(ibv_qp* qp) { add(&Routes::qps, qp, qp->qp_num); }
void track(ibv_srq* srq) { add(&Routes::srqs, srq, srq->handle); }
unsigned untrack(ibv_cq* cq) { return remove(&Routes::cqs, cq, cq->handle); }
unsigned untrack(ibv_qp* qp) { return remove(&Routes::qps, qp, qp->qp_num); }
unsigned untrack(ibv_srq* srq) { return remove(&Routes::srqs, srq, srq->handle); }

bool claim_async_event(ibv_context* ctx, const ibv_async_event& event) {
  Routes& r = routes_of(ctx);
  std::lock_guard lock(r.mutex);
  const auto& e = event.element;
  const void* object = nullptr;
  bool present = false;
  switch (event_object(event.event_type)) {
    case EventObject::cq:
      object = e.cq;
      present = holds(r.cqs, e.cq);
      break;
    case EventObject::qp:
      object = e.qp;
      present = holds(r.qps, e.qp);
      break;
    case EventObject::srq:
      object = e.srq;
      present = holds(r.srqs, e.srq);
      break;
    case EventObject::wq:  // the shim offers no WQs
    case EventObject::none:
      return true;  // the device's or a port's: nothing to hold
  }
  if (present) ++r.events_read[object];
  return present;
}

}  // namespace softrdma::shim
