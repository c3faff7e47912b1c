// The connection manager of softrdmad's device, shared by its clients as a host's CM is shared
// by its processes: each listener and connection belongs to the client that opened it (or whose
// listener a peer's REQ reached), a request naming another's is EINVAL, and its events go to
// the owner alone. A client that goes ends its connections as a process exit does: each
// connection closes with a DREQ or REJ (IBTA vol. 1 s12.9) and its listeners stop.
#include <cerrno>
#include <mutex>

#include "emulator/host/daemon_cm_codec.hpp"
#include "emulator/host/daemon_server.hpp"

namespace softrdma::host {

using daemon::Op;

namespace {

bool is_cm(Op op) { return op >= Op::cm_listen && op <= Op::cm_destroy; }

}  // namespace

bool DaemonServer::handle_cm(Client& c, Op op, daemon::Reader& in, daemon::Writer& out) {
  if (!is_cm(op)) return false;
  using Set = std::unordered_set<std::uint32_t> Client::*;
  auto owns = [&](Set set, std::uint32_t key) {
    std::lock_guard lock(mutex_);
    return (c.*set).contains(key);
  };
  // Adopted under the host's lock, before the engine can raise an event about the new handle.
  auto opened = [&](Set set, auto open) {
    const core::Expected<std::uint32_t> r = host_.call([&](core::Device& d, core::Time now) {
      core::Expected<std::uint32_t> handle = open(d, now);
      if (handle) {
        std::lock_guard lock(mutex_);
        (c.*set).insert(*handle);
      }
      return handle;
    });
    out.put(static_cast<std::int32_t>(r.error()));
    if (r) out.put(*r);
    return true;
  };
  // A request on one of the client's connections: its errno, EINVAL for another's.
  auto on_id = [&](std::uint32_t id, auto run) {
    const int err = owns(&Client::cm_ids, id) ? host_.call([&](core::Device& d, core::Time now) { return run(d.cm(), now); })
                                               : EINVAL;
    out.put(static_cast<std::int32_t>(err));
    return true;
  };
  std::vector<std::uint8_t> data;
  switch (op) {
    case Op::cm_listen: {
      const auto service_id = in.get<std::uint64_t>();
      if (!in.done()) return false;
      return opened(&Client::cm_listeners, [&](core::Device& d, core::Time) { return d.cm().listen(service_id); });
    }
    case Op::cm_stop_listening: {
      const auto listener = in.get<std::uint32_t>();
      if (!in.done()) return false;
      int err = EINVAL;
      if (owns(&Client::cm_listeners, listener)) {
        err = host_.call([&](core::Device& d, core::Time now) { return d.cm().stop_listening(now, listener); });
        std::lock_guard lock(mutex_);
        c.cm_listeners.erase(listener);
      }
      out.put(static_cast<std::int32_t>(err));
      return true;
    }
    case Op::cm_connect: {
      core::CmConnect request;
      daemon::get(in, request);
      if (!in.done()) return false;
      return opened(&Client::cm_ids, [&](core::Device& d, core::Time now) { return d.cm().connect(now, request); });
    }
    case Op::cm_resolve_service: {
      core::CmServiceQuery query;
      daemon::get(in, query);
      if (!in.done()) return false;
      return opened(&Client::cm_ids, [&](core::Device& d, core::Time now) { return d.cm().resolve_service(now, query); });
    }
    case Op::cm_accept: {
      const auto id = in.get<std::uint32_t>();
      core::CmAccept reply;
      daemon::get(in, reply);
      if (!in.done()) return false;
      return on_id(id, [&](core::ConnectionManager& cm, core::Time now) { return cm.accept(now, id, reply); });
    }
    case Op::cm_answer_service: {
      const auto id = in.get<std::uint32_t>();
      core::CmServiceAnswer answer;
      daemon::get(in, answer);
      if (!in.done()) return false;
      return on_id(id, [&](core::ConnectionManager& cm, core::Time now) { return cm.answer_service(now, id, answer); });
    }
    case Op::cm_ready:
    case Op::cm_reject:
    case Op::cm_disconnect: {
      const auto id = in.get<std::uint32_t>();
      in.get_vector(data, daemon::kMaxPrivateData);
      if (!in.done()) return false;
      return on_id(id, [&](core::ConnectionManager& cm, core::Time now) {
        if (op == Op::cm_ready) return cm.ready(now, id, data);
        if (op == Op::cm_reject) return cm.reject(now, id, data);
        return cm.disconnect(now, id, data);
      });
    }
    case Op::cm_destroy: {
      const auto id = in.get<std::uint32_t>();
      if (!in.done()) return false;
      return on_id(id, [&](core::ConnectionManager& cm, core::Time now) {
        cm.destroy(now, id);
        std::lock_guard lock(mutex_);
        c.cm_ids.erase(id);
        return 0;
      });
    }
    default:
      return false;
  }
}

void DaemonServer::release_cm(Client& c) {
  std::unordered_set<std::uint32_t> listeners, ids;
  {
    std::lock_guard lock(mutex_);
    listeners.swap(c.cm_listeners);
    ids.swap(c.cm_ids);
  }
  host_.call([&](core::Device& d, core::Time now) {
    for (std::uint32_t listener : listeners) d.cm().stop_listening(now, listener);
    for (std::uint32_t id : ids) d.cm().destroy(now, id);
  });
}

void DaemonServer::send_event(const core::CmEvent& event) {
  thread_local std::vector<std::uint8_t> message;
  daemon::Writer out(message);
  out.put(daemon::Event{daemon::EventKind::cm, 0, 0});
  daemon::put(out, event);
  const bool request = event.type == core::CmEventType::request || event.type == core::CmEventType::service_request;
  if (deliver_cm(message, event, request) || !request) return;
  // Its listener's client went meanwhile: the connection is refused, as at a process's exit.
  host_.call([&](core::Device& d, core::Time now) { d.cm().destroy(now, event.id); });
}

bool DaemonServer::deliver_cm(std::span<const std::uint8_t> message, const core::CmEvent& event, bool request) {
  std::lock_guard lock(mutex_);
  for (Client& c : clients_) {
    const bool owner = request ? c.cm_listeners.contains(event.listener) : c.cm_ids.contains(event.id);
    if (!owner) continue;
    if (request) c.cm_ids.insert(event.id);
    if (c.events_fd >= 0) outbox_.send(c.events_fd, message);
    return true;
  }
  return false;
}

}  // namespace softrdma::host
