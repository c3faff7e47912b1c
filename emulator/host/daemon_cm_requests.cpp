// The connection manager of softrdmad's device, shared by its clients as a host's CM is shared
// by its processes: each listener and connection belongs to the client that opened it (or whose
// listener a peer's REQ reached), a request naming another's is EINVAL, and its events go to
// the owner alone. A client that goes ends its connections as a process exit does: each
// connection closes with a DREQ or REJ (IBTA vol. 1 s12.9) and its listeners stop. srdmaiw0
// has no InfiniBand CM: there every request is EOPNOTSUPP, as on an iWARP RNIC.
#include <cerrno>
#include <mutex>
#include <vector>

#include "emulator/host/daemon_cm_codec.hpp"
#include "emulator/host/daemon_reply.hpp"
#include "emulator/host/daemon_server.hpp"

namespace softrdma::host {

using daemon::put_created;
using daemon::put_status;

// Adopted under the host's lock, before the engine can raise an event about the new handle.
template <class Open>
bool DaemonServer::open_cm(Client& c, Handles set, daemon::Writer& out, Open open) {
  if (roce() == nullptr) {
    put_created(out, core::Expected<std::uint32_t>::error(EOPNOTSUPP));
    return true;
  }
  const core::Expected<std::uint32_t> handle = on_engine([&](core::Device& d, core::Time now) {
    core::Expected<std::uint32_t> opened = open(d, now);
    if (opened) adopt(c, set, *opened);
    return opened;
  });
  put_created(out, handle);
  return true;
}

// A request on one of the client's connections: its errno, EINVAL for another's.
template <class Step>
bool DaemonServer::on_connection(Client& c, std::uint32_t id, daemon::Writer& out, Step step) {
  const int err = roce() == nullptr ? EOPNOTSUPP
                  : owns(c, &Client::cm_ids, id)
                      ? on_engine([&](core::Device& d, core::Time now) { return step(d.cm(), now); })
                      : EINVAL;
  put_status(out, err);
  return true;
}

// RTU, REJ and DREQ: a connection and the private data to send with it.
bool DaemonServer::private_data_step(Client& c, daemon::Reader& in, daemon::Writer& out, PrivateDataStep step) {
  const auto id = in.get<std::uint32_t>();
  std::vector<std::uint8_t> data;
  in.get_vector(data, daemon::kMaxPrivateData);
  if (!in.done()) return false;
  return on_connection(c, id, out,
                       [&](core::ConnectionManager& cm, core::Time now) { return (cm.*step)(now, id, data); });
}

bool DaemonServer::handle_cm_listen(Client& c, daemon::Reader& in, daemon::Writer& out, int&) {
  const auto service_id = in.get<std::uint64_t>();
  if (!in.done()) return false;
  return open_cm(c, &Client::cm_listeners, out, [&](core::Device& d, core::Time) { return d.cm().listen(service_id); });
}

bool DaemonServer::handle_cm_stop_listening(Client& c, daemon::Reader& in, daemon::Writer& out, int&) {
  const auto listener = in.get<std::uint32_t>();
  if (!in.done()) return false;
  int err = roce() == nullptr ? EOPNOTSUPP : EINVAL;
  if (roce() != nullptr && owns(c, &Client::cm_listeners, listener)) {
    err = on_engine([&](core::Device& d, core::Time now) { return d.cm().stop_listening(now, listener); });
    forget(c, &Client::cm_listeners, listener);
  }
  put_status(out, err);
  return true;
}

bool DaemonServer::handle_cm_connect(Client& c, daemon::Reader& in, daemon::Writer& out, int&) {
  core::CmConnect request;
  daemon::get(in, request);
  if (!in.done()) return false;
  return open_cm(c, &Client::cm_ids, out,
                 [&](core::Device& d, core::Time now) { return d.cm().connect(now, request); });
}

bool DaemonServer::handle_cm_resolve_service(Client& c, daemon::Reader& in, daemon::Writer& out, int&) {
  core::CmServiceQuery query;
  daemon::get(in, query);
  if (!in.done()) return false;
  return open_cm(c, &Client::cm_ids, out,
                 [&](core::Device& d, core::Time now) { return d.cm().resolve_service(now, query); });
}

bool DaemonServer::handle_cm_accept(Client& c, daemon::Reader& in, daemon::Writer& out, int&) {
  const auto id = in.get<std::uint32_t>();
  core::CmAccept reply;
  daemon::get(in, reply);
  if (!in.done()) return false;
  return on_connection(c, id, out,
                       [&](core::ConnectionManager& cm, core::Time now) { return cm.accept(now, id, reply); });
}

bool DaemonServer::handle_cm_answer_service(Client& c, daemon::Reader& in, daemon::Writer& out, int&) {
  const auto id = in.get<std::uint32_t>();
  core::CmServiceAnswer answer;
  daemon::get(in, answer);
  if (!in.done()) return false;
  return on_connection(c, id, out,
                       [&](core::ConnectionManager& cm, core::Time now) { return cm.answer_service(now, id, answer); });
}

bool DaemonServer::handle_cm_ready(Client& c, daemon::Reader& in, daemon::Writer& out, int&) {
  return private_data_step(c, in, out, &core::ConnectionManager::ready);
}

bool DaemonServer::handle_cm_reject(Client& c, daemon::Reader& in, daemon::Writer& out, int&) {
  return private_data_step(c, in, out, &core::ConnectionManager::reject);
}

bool DaemonServer::handle_cm_disconnect(Client& c, daemon::Reader& in, daemon::Writer& out, int&) {
  return private_data_step(c, in, out, &core::ConnectionManager::disconnect);
}

bool DaemonServer::handle_cm_destroy(Client& c, daemon::Reader& in, daemon::Writer& out, int&) {
  const auto id = in.get<std::uint32_t>();
  if (!in.done()) return false;
  return on_connection(c, id, out, [&](core::ConnectionManager& cm, core::Time now) {
    cm.destroy(now, id);
    forget(c, &Client::cm_ids, id);
    return 0;
  });
}

DaemonServer::CmHandles DaemonServer::take_cm_handles(Client& c) {
  CmHandles taken;
  std::lock_guard lock(mutex_);
  taken.listeners.swap(c.cm_listeners);
  taken.ids.swap(c.cm_ids);
  return taken;
}

void DaemonServer::release_cm(Client& c) {
  const CmHandles taken = take_cm_handles(c);
  on_engine([&](core::Device& d, core::Time now) {
    for (std::uint32_t listener : taken.listeners) d.cm().stop_listening(now, listener);
    for (std::uint32_t id : taken.ids) d.cm().destroy(now, id);
  });
}

void DaemonServer::send_event(const core::CmEvent& event) {
  thread_local std::vector<std::uint8_t> message;
  daemon::Writer out(message);
  out.put(daemon::Event{daemon::EventKind::cm, 0, 0});
  daemon::put(out, event);
  const bool request = event.type == core::CmEventType::request || event.type == core::CmEventType::service_request;
  if (deliver_cm(message, event.listener, event.id, request) || !request) return;
  // Its listener's client went meanwhile: the connection is refused, as at a process's exit.
  on_engine([&](core::Device& d, core::Time now) { d.cm().destroy(now, event.id); });
}

bool DaemonServer::deliver_cm(std::span<const std::uint8_t> message, std::uint32_t listener, std::uint32_t id,
                              bool request) {
  std::lock_guard lock(mutex_);
  for (Client& c : clients_) {
    const bool owner = request ? c.cm_listeners.contains(listener) : c.cm_ids.contains(id);
    if (!owner) continue;
    if (request) c.cm_ids.insert(id);
    if (c.events_fd >= 0) outbox_.send(c.events_fd, message);
    return true;
  }
  return false;
}

}  // namespace softrdma::host
