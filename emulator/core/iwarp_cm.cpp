#include "emulator/core/iwarp_cm.hpp"

#include <algorithm>
#include <cerrno>

namespace softrdma::core {
namespace {

bool any_address(const Gid& g) {
  const Gid ipv4_any{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF, 0, 0, 0, 0};
  return g == Gid{} || g == ipv4_any;
}

bool overlaps(const TcpEndpoint& a, const TcpEndpoint& b) {
  return a.port == b.port && (a.address == b.address || any_address(a.address) || any_address(b.address));
}

// A QP the exchange can put on a stream (Device::stream_attach's conditions).
bool attachable(const Device& d, std::uint32_t qpn) {
  const Qp* q = d.qp(qpn);
  return q && q->init.qp_type == QpType::rc && !q->stream &&
         (q->state() == QpState::init || q->state() == QpState::rtr);
}

}  // namespace

// --- consumer calls ---------------------------------------------------------------------------

Expected<std::uint32_t> IwarpConnectionManager::listen(const TcpEndpoint& local) {
  for (const auto& [handle, endpoint] : listeners_)
    if (overlaps(endpoint, local)) return Expected<std::uint32_t>::error(EADDRINUSE);
  const std::uint32_t handle = next_handle_++;
  listeners_[handle] = local;
  actions_.push_back({TcpAction::Kind::listen, handle, local});
  return handle;
}

int IwarpConnectionManager::stop_listening(std::uint32_t listener) {
  const auto it = listeners_.find(listener);
  if (it == listeners_.end()) return EINVAL;
  actions_.push_back({TcpAction::Kind::stop_listening, listener, it->second});
  listeners_.erase(it);
  return 0;
}

Expected<std::uint32_t> IwarpConnectionManager::connect(const TcpEndpoint& remote, std::uint32_t qpn,
                                                        const MpaOffer& offer) {
  if (!attachable(device_, qpn) || offer.private_data.size() > MpaOffer::max_private_data)
    return Expected<std::uint32_t>::error(EINVAL);
  Connection c;
  c.qpn = qpn;
  c.remote = remote;
  c.offer = offer;
  c.offer.crc |= require_crc_;
  const std::uint32_t id = open(std::move(c));
  actions_.push_back({TcpAction::Kind::connect, id, remote});
  return id;
}

int IwarpConnectionManager::accept(std::uint32_t id, std::uint32_t qpn, const MpaOffer& offer) {
  Connection* c = find(id);
  if (!c || c->phase != Phase::awaiting_consumer || !attachable(device_, qpn) ||
      offer.private_data.size() > MpaOffer::max_private_data)
    return EINVAL;
  MpaOffer ours = offer;
  ours.crc |= require_crc_;
  c->mpa->accept(ours);
  c->qpn = qpn;
  attach(id, *c, {});
  return 0;
}

int IwarpConnectionManager::reject(std::uint32_t id, std::span<const std::uint8_t> private_data) {
  Connection* c = find(id);
  if (!c || c->phase != Phase::awaiting_consumer || private_data.size() > MpaOffer::max_private_data) return EINVAL;
  c->mpa->reject(private_data);
  ++device_.iwarp_counters().rejects_sent;
  mark_ready(id);
  close(id, *c);
  return 0;
}

int IwarpConnectionManager::disconnect(std::uint32_t id) {
  Connection* c = find(id);
  if (!c || c->phase != Phase::established) return EINVAL;
  end_qp(c->qpn);  // its stream then asks to be closed (take_stream_events)
  take_stream_events();
  return 0;
}

void IwarpConnectionManager::destroy(std::uint32_t id) {
  Connection* c = find(id);
  if (!c) return;
  // Nothing of this connection reaches a consumer any more; its QP and socket end.
  std::erase_if(connection_of_qp_, [id](const auto& entry) { return entry.second == id; });
  std::erase_if(events_, [id](const IwarpEvent& e) { return e.id == id; });
  if (c->phase == Phase::established) end_qp(c->qpn);
  if (c->phase != Phase::closed) close(id, *c);
  connections_.erase(id);
}

std::optional<IwarpEvent> IwarpConnectionManager::next_event() {
  take_stream_events();
  if (events_.empty()) return std::nullopt;
  IwarpEvent e = std::move(events_.front());
  events_.pop_front();
  return e;
}

// --- the host's sockets -----------------------------------------------------------------------

void IwarpConnectionManager::tcp_connected(std::uint32_t id, const TcpEndpoint& local, std::uint32_t mss) {
  Connection* c = find(id);
  if (!c || c->phase != Phase::connecting) return;
  c->local = local;
  c->mss = mss;
  c->mpa = MpaHandshake::initiate(c->offer);
  c->phase = Phase::exchanging;
  mark_ready(id);
}

void IwarpConnectionManager::tcp_failed(std::uint32_t id, int error) {
  Connection* c = find(id);
  if (!c || c->phase != Phase::connecting) return;
  // As rdma_cm reports an iWARP connect that TCP could not make: refused or reset is a
  // rejection, a timeout unreachable.
  emit(error == ETIMEDOUT ? IwarpEventType::unreachable : IwarpEventType::rejected, id, *c, error);
  close(id, *c);
}

std::uint32_t IwarpConnectionManager::tcp_accepted(std::uint32_t listener, const TcpEndpoint& local,
                                                   const TcpEndpoint& remote, std::uint32_t mss) {
  Connection c;
  c.phase = Phase::exchanging;
  c.listener = listener;
  c.local = local;
  c.remote = remote;
  c.mss = mss;
  c.mpa = MpaHandshake::respond();
  return open(std::move(c));
}

void IwarpConnectionManager::tcp_received(std::uint32_t id, std::span<const std::uint8_t> bytes) {
  Connection* c = find(id);
  if (!c) return;
  device_.iwarp_counters().tcp_bytes_received += bytes.size();
  switch (c->phase) {
    case Phase::exchanging: {
      const std::size_t used = c->mpa->receive(bytes);
      return after_exchange(id, *c, bytes.subspan(used));
    }
    case Phase::established:
      device_.stream_receive(c->qpn, bytes);
      return take_stream_events();
    case Phase::awaiting_consumer:
      // RFC 5044 s7.1.2: the initiator sends no FPDU before the Reply.
      return close(id, *c);
    case Phase::connecting:
    case Phase::closed:
      return;
  }
}

void IwarpConnectionManager::tcp_closed(std::uint32_t id) {
  Connection* c = find(id);
  if (!c) return;
  if (c->phase == Phase::established) {
    device_.stream_lost(c->qpn);
    return take_stream_events();
  }
  if (c->phase == Phase::exchanging && !c->listener) emit(IwarpEventType::rejected, id, *c, ECONNRESET);
  if (c->phase != Phase::closed) close(id, *c);
}

std::optional<TcpAction> IwarpConnectionManager::next_action() {
  take_stream_events();
  if (actions_.empty()) return std::nullopt;
  const TcpAction a = actions_.front();
  actions_.pop_front();
  return a;
}

std::size_t IwarpConnectionManager::bytes_to_boundary(std::uint32_t id) const {
  const auto it = connections_.find(id);
  if (it == connections_.end() || it->second.phase != Phase::established) return 0;
  return device_.stream_bytes_to_boundary(it->second.qpn);
}

std::optional<std::uint32_t> IwarpConnectionManager::next_ready() {
  take_stream_events();
  while (!ready_.empty()) {
    const std::uint32_t id = ready_.front();
    ready_.pop_front();
    if (Connection* c = find(id)) {
      c->queued = false;
      return id;
    }
  }
  return std::nullopt;
}

bool IwarpConnectionManager::tcp_transmit(std::uint32_t id, UninitialisedBytes& out) {
  const std::size_t before = out.size();
  const bool any = next_bytes(id, out);
  device_.iwarp_counters().tcp_bytes_sent += out.size() - before;
  return any;
}

bool IwarpConnectionManager::carries_fpdus(std::uint32_t id) const {
  const auto it = connections_.find(id);
  if (it == connections_.end()) return false;
  const Connection& c = it->second;
  return c.phase == Phase::established && !(c.mpa && c.mpa->has_output());
}

bool IwarpConnectionManager::next_bytes(std::uint32_t id, UninitialisedBytes& out) {
  Connection* c = find(id);
  if (!c) return false;
  if (c->mpa) {
    const std::vector<std::uint8_t> frame = c->mpa->take_output();
    if (!frame.empty()) {
      out.append(frame.data(), frame.data() + frame.size());
      return true;
    }
  }
  return c->phase == Phase::established && device_.stream_transmit(c->qpn, out);
}

// --- internals --------------------------------------------------------------------------------

IwarpConnectionManager::Connection* IwarpConnectionManager::find(std::uint32_t id) {
  const auto it = connections_.find(id);
  return it == connections_.end() ? nullptr : &it->second;
}

std::uint32_t IwarpConnectionManager::open(Connection c) {
  const std::uint32_t id = next_handle_++;
  connections_.emplace(id, std::move(c));
  return id;
}

void IwarpConnectionManager::emit(IwarpEventType type, std::uint32_t id, const Connection& c, int status) {
  IwarpEvent e;
  e.type = type;
  e.id = id;
  e.listener = c.listener;
  e.local = c.local;
  e.remote = c.remote;
  e.status = status;
  const bool from_peer_frame = type == IwarpEventType::connect_request || type == IwarpEventType::established ||
                               type == IwarpEventType::rejected;
  if (from_peer_frame && c.mpa && c.mpa->state() != MpaHandshake::State::failed) {
    e.private_data = c.mpa->peer_frame().private_data;
    if (const auto& words = c.mpa->peer_frame().enhanced) {
      e.ird = words->ird;
      e.ord = words->ord;
    }
  }
  if (type == IwarpEventType::established) {
    const StreamParams settled = c.mpa->settled(c.mss);
    e.ird = settled.ird;
    e.ord = settled.ord;
  }
  count(type, c);
  events_.push_back(std::move(e));
}

void IwarpConnectionManager::count(IwarpEventType type, const Connection& c) {
  IwarpCounters& n = device_.iwarp_counters();
  switch (type) {
    case IwarpEventType::established:
      ++(c.listener ? n.connections_accepted : n.connections_initiated);
      break;
    case IwarpEventType::rejected:
      ++n.connects_refused;
      break;
    case IwarpEventType::unreachable:
      ++n.connects_unreachable;
      break;
    case IwarpEventType::connect_error:
      ++n.connect_errors;
      break;
    case IwarpEventType::disconnected:
      ++n.disconnects;
      break;
    case IwarpEventType::connect_request:
      break;
  }
}

void IwarpConnectionManager::after_exchange(std::uint32_t id, Connection& c, std::span<const std::uint8_t> rest) {
  using State = MpaHandshake::State;
  mark_ready(id);  // a Reply that refuses markers may be waiting
  switch (c.mpa->state()) {
    case State::request_received:
      c.phase = Phase::awaiting_consumer;
      return emit(IwarpEventType::connect_request, id, c);
    case State::established:
      return attach(id, c, rest);
    case State::rejected:
      emit(IwarpEventType::rejected, id, c, ECONNREFUSED);
      return close(id, c);
    case State::failed:
      // A listener's consumer has not heard of the connection: it is only counted.
      if (c.listener)
        count(IwarpEventType::connect_error, c);
      else
        emit(IwarpEventType::connect_error, id, c, EPROTO);
      return close(id, c);
    case State::awaiting_request:
    case State::awaiting_reply:
      return;
  }
}

void IwarpConnectionManager::attach(std::uint32_t id, Connection& c, std::span<const std::uint8_t> rest) {
  const int err = device_.stream_attach(c.qpn, c.mpa->settled(std::max<std::uint32_t>(c.mss, 64)));
  if (err) {
    emit(IwarpEventType::connect_error, id, c, err);
    return close(id, c);
  }
  connection_of_qp_[c.qpn] = id;
  c.phase = Phase::established;
  emit(IwarpEventType::established, id, c);
  if (!rest.empty()) device_.stream_receive(c.qpn, rest);  // FPDUs that came with the Reply
  mark_ready(id);
}

void IwarpConnectionManager::close(std::uint32_t id, Connection& c) {
  c.phase = Phase::closed;
  actions_.push_back({TcpAction::Kind::close, id, c.remote});
}

void IwarpConnectionManager::mark_ready(std::uint32_t id) {
  Connection* c = find(id);
  if (!c || c->queued) return;
  c->queued = true;
  ready_.push_back(id);
}

void IwarpConnectionManager::end_qp(std::uint32_t qpn) {
  QpAttr err;
  err.qp_state = QpState::err;
  device_.modify_qp(0, qpn, err, qp_attr::state);
}

// The Device's news about the streams: QPs with FPDUs to send, and streams to close (after a
// Terminate, or when the QP entered ERR).
void IwarpConnectionManager::take_stream_events() {
  while (const auto qpn = device_.next_stream_ready()) {
    const auto it = connection_of_qp_.find(*qpn);
    if (it != connection_of_qp_.end()) mark_ready(it->second);
  }
  while (const auto qpn = device_.next_stream_close()) {
    const auto it = connection_of_qp_.find(*qpn);
    if (it == connection_of_qp_.end()) continue;
    Connection* c = find(it->second);
    if (!c || c->phase != Phase::established) continue;
    emit(IwarpEventType::disconnected, it->second, *c);
    close(it->second, *c);
  }
}

}  // namespace softrdma::core
