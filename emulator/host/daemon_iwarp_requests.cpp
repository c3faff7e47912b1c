// The iWARP connection manager of softrdmad's srdmaiw0, shared by its clients as a host's
// rdma_cm is shared by its processes: each listener and connection belongs to the client that
// opened it (or whose listener a peer's MPA Request reached, RFC 5044 s7.1), a request naming
// another's is EINVAL, and its events go to the owner alone. A client that goes closes its
// connections and stops its listeners, as a process exit does. srdma0 has no iWARP CM: there
// every request is EOPNOTSUPP.
#include <cerrno>
#include <mutex>
#include <vector>

#include "emulator/host/daemon_iwarp_codec.hpp"
#include "emulator/host/daemon_reply.hpp"
#include "emulator/host/daemon_server.hpp"

namespace softrdma::host {

using core::IwarpConnectionManager;
using daemon::put_created;
using daemon::put_status;

namespace {

core::Expected<std::uint32_t> no_iwarp_cm() { return core::Expected<std::uint32_t>::error(EOPNOTSUPP); }

}  // namespace

template <class Step>
bool DaemonServer::on_iwarp_connection(Client& c, std::uint32_t id, daemon::Writer& out, Step step) {
  IwarpHost* host = iwarp();
  const int err = host == nullptr ? EOPNOTSUPP
                  : owns(c, &Client::cm_ids, id)
                      ? host->call([&](core::Device&, IwarpConnectionManager& cm) { return step(cm); })
                      : EINVAL;
  put_status(out, err);
  return true;
}

// Adopted under the host's lock, before an event about the new listener can be delivered.
bool DaemonServer::handle_iw_listen(Client& c, daemon::Reader& in, daemon::Writer& out, int&) {
  const auto local = in.get<core::TcpEndpoint>();
  if (!in.done()) return false;
  IwarpHost* host = iwarp();
  put_created(out, host == nullptr ? no_iwarp_cm() : host->listen(local, [&](std::uint32_t listener) {
    adopt(c, &Client::cm_listeners, listener);
  }));
  return true;
}

bool DaemonServer::handle_iw_stop_listening(Client& c, daemon::Reader& in, daemon::Writer& out, int&) {
  const auto listener = in.get<std::uint32_t>();
  if (!in.done()) return false;
  IwarpHost* host = iwarp();
  int err = host == nullptr ? EOPNOTSUPP : EINVAL;
  if (host != nullptr && owns(c, &Client::cm_listeners, listener)) {
    err = host->call([&](core::Device&, IwarpConnectionManager& cm) { return cm.stop_listening(listener); });
    forget(c, &Client::cm_listeners, listener);
  }
  put_status(out, err);
  return true;
}

// The connection is adopted under the host's lock, as a listener is.
bool DaemonServer::handle_iw_connect(Client& c, daemon::Reader& in, daemon::Writer& out, int&) {
  const auto remote = in.get<core::TcpEndpoint>();
  const auto qpn = in.get<std::uint32_t>();
  core::MpaOffer offer;
  daemon::get(in, offer);
  if (!in.done()) return false;
  IwarpHost* host = iwarp();
  if (host == nullptr || !owns(c, &Client::qps, qpn)) {
    put_created(out, host == nullptr ? no_iwarp_cm() : core::Expected<std::uint32_t>::error(EINVAL));
    return true;
  }
  put_created(out, host->call([&](core::Device&, IwarpConnectionManager& cm) {
    core::Expected<std::uint32_t> id = cm.connect(remote, qpn, offer);
    if (id) adopt(c, &Client::cm_ids, *id);
    return id;
  }));
  return true;
}

bool DaemonServer::handle_iw_accept(Client& c, daemon::Reader& in, daemon::Writer& out, int&) {
  const auto id = in.get<std::uint32_t>();
  const auto qpn = in.get<std::uint32_t>();
  core::MpaOffer offer;
  daemon::get(in, offer);
  if (!in.done()) return false;
  if (iwarp() != nullptr && !owns(c, &Client::qps, qpn)) {
    put_status(out, EINVAL);
    return true;
  }
  return on_iwarp_connection(c, id, out, [&](IwarpConnectionManager& cm) { return cm.accept(id, qpn, offer); });
}

bool DaemonServer::handle_iw_reject(Client& c, daemon::Reader& in, daemon::Writer& out, int&) {
  const auto id = in.get<std::uint32_t>();
  std::vector<std::uint8_t> data;
  in.get_vector(data, core::MpaOffer::max_private_data);
  if (!in.done()) return false;
  return on_iwarp_connection(c, id, out, [&](IwarpConnectionManager& cm) { return cm.reject(id, data); });
}

bool DaemonServer::handle_iw_disconnect(Client& c, daemon::Reader& in, daemon::Writer& out, int&) {
  const auto id = in.get<std::uint32_t>();
  if (!in.done()) return false;
  return on_iwarp_connection(c, id, out, [&](IwarpConnectionManager& cm) { return cm.disconnect(id); });
}

bool DaemonServer::handle_iw_destroy(Client& c, daemon::Reader& in, daemon::Writer& out, int&) {
  const auto id = in.get<std::uint32_t>();
  if (!in.done()) return false;
  return on_iwarp_connection(c, id, out, [&](IwarpConnectionManager& cm) {
    cm.destroy(id);
    forget(c, &Client::cm_ids, id);
    return 0;
  });
}

void DaemonServer::release_iwarp(Client& c) {
  IwarpHost* host = iwarp();
  if (host == nullptr) return;
  const CmHandles taken = take_cm_handles(c);
  host->call([&](core::Device&, IwarpConnectionManager& cm) {
    for (std::uint32_t listener : taken.listeners) cm.stop_listening(listener);
    for (std::uint32_t id : taken.ids) cm.destroy(id);
  });
}

void DaemonServer::send_event(const core::IwarpEvent& event) {
  thread_local std::vector<std::uint8_t> message;
  daemon::Writer out(message);
  out.put(daemon::Event{daemon::EventKind::iwarp, 0, 0});
  daemon::put(out, event);
  const bool request = event.type == core::IwarpEventType::connect_request;
  if (deliver_cm(message, event.listener, event.id, request) || !request) return;
  // Its listener's client went meanwhile: the peer is refused, as at a process's exit.
  iwarp()->call([&](core::Device&, IwarpConnectionManager& cm) {
    cm.reject(event.id, {});
    cm.destroy(event.id);
  });
}

}  // namespace softrdma::host
