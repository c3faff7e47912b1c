#include "emulator/core/connection_manager.hpp"

#include <algorithm>
#include <cerrno>
#include <vector>

namespace softrdma::core {
namespace {

// The response timeout softrdma asks peers to answer within, as 4.096 us * 2^t (s12.6.5):
// about 1.07 s, long enough for a peer under emulation, short enough that a lost MAD costs a
// second rather than Linux's 4.3 s.
constexpr std::uint8_t kResponseTimeout = 18;
constexpr std::uint8_t kMaxCmRetries = 15;  // the most a REQ may ask for (4 bits)
// Requests a listener may have waiting for its consumer; beyond, REJ "no resources" (table 103),
// so that a flood of REQs costs a bounded amount of memory.
constexpr std::size_t kMaxPendingRequests = 1024;
// REQ's primary path packet rate: 25 Gb/s (IBTA table 227, encoding 15), the 1X EDR the port reports.
constexpr std::uint8_t kPacketRate = 15;

Time timeout_ns(std::uint8_t exponent) { return Time{4096} << std::min<std::uint8_t>(exponent, 31); }

template <std::size_t N>
bool copy_private(std::span<const std::uint8_t> from, std::array<std::uint8_t, N>& to) {
  if (from.size() > N) return false;
  std::copy(from.begin(), from.end(), to.begin());
  return true;
}

}  // namespace

ConnectionManager::ConnectionManager(const Gid& local_gid, std::uint64_t ca_guid, std::uint32_t id_seed)
    : local_gid_(local_gid), ca_guid_(ca_guid), next_id_(id_seed), next_tid_(std::uint64_t{id_seed} << 8) {}

Expected<std::uint32_t> ConnectionManager::listen(std::uint64_t service_id) {
  if (listener_for(service_id)) return Expected<std::uint32_t>::error(EADDRINUSE);
  const std::uint32_t handle = next_listener_++;
  listeners_[handle] = service_id;
  return handle;
}

int ConnectionManager::stop_listening(Time now, std::uint32_t listener) {
  const auto it = listeners_.find(listener);
  if (it == listeners_.end()) return EINVAL;
  reserved_until_[it->second] = now + timeout_ns(kResponseTimeout);
  listeners_.erase(it);
  return 0;
}

bool ConnectionManager::reserved(Time now, std::uint64_t service_id) {
  std::erase_if(reserved_until_, [now](const auto& r) { return r.second <= now; });
  if (reserved_until_.count(service_id)) return true;
  // An IP CM port is one port in every port space (annex A11.3.1): perftest -R's UD data
  // listener (RDMA_PS_UDP) follows its control listener (RDMA_PS_TCP) on the same port.
  const auto asked = wire::ip_cm_service(service_id);
  return asked && std::any_of(reserved_until_.begin(), reserved_until_.end(), [&](const auto& r) {
           const auto held = wire::ip_cm_service(r.first);
           return held && held->port == asked->port;
         });
}

Expected<std::uint32_t> ConnectionManager::connect(Time now, const CmConnect& r) {
  wire::CmReq q;
  if (!copy_private(r.private_data, q.private_data) || (r.qp_type != QpType::rc && r.qp_type != QpType::uc))
    return Expected<std::uint32_t>::error(EINVAL);
  Connection& c = open(State::req_sent, r.remote_gid);
  q.local_comm_id = c.local_id;
  q.service_id = r.service_id;
  q.local_ca_guid = ca_guid_;
  q.local_qpn = r.qpn;
  q.responder_resources = r.responder_resources;
  q.initiator_depth = r.initiator_depth;
  q.remote_cm_response_timeout = kResponseTimeout;
  q.transport_service_type = r.qp_type == QpType::rc ? 0 : 1;  // s12.6.5: 0 RC, 1 UC
  q.starting_psn = r.starting_psn & 0xFFFFFF;
  q.local_cm_response_timeout = kResponseTimeout;
  q.retry_count = r.retry_count & 7;
  q.path_mtu = static_cast<std::uint8_t>(r.path_mtu);
  q.rnr_retry_count = r.rnr_retry_count & 7;
  q.max_cm_retries = kMaxCmRetries;
  q.srq = r.srq;
  q.primary.local_gid = local_gid_;
  q.primary.remote_gid = r.remote_gid;
  q.primary.flow_label = r.flow_label & 0xFFFFF;
  q.primary.packet_rate = kPacketRate;
  q.primary.traffic_class = r.traffic_class;
  q.primary.hop_limit = r.hop_limit;
  q.primary.local_ack_timeout = r.local_ack_timeout & 0x1F;
  // No alternate path: its LIDs and GIDs stay zero (s12.6.5).
  q.alternate.local_lid = 0;
  q.alternate.remote_lid = 0;
  c.req = q;
  send(c, q, now + c.response_timeout);
  return c.local_id;
}

int ConnectionManager::accept(Time now, std::uint32_t id, const CmAccept& a) {
  Connection* c = find(id);
  wire::CmRep p;
  if (!c || c->state != State::req_rcvd || !copy_private(a.private_data, p.private_data)) return EINVAL;
  p.local_comm_id = c->local_id;
  p.remote_comm_id = c->remote_id;
  p.local_qpn = a.qpn;
  p.starting_psn = a.starting_psn & 0xFFFFFF;
  p.responder_resources = a.responder_resources;
  p.initiator_depth = a.initiator_depth;
  p.target_ack_delay = 0;
  p.failover_accepted = 1;  // s12.6.8: 1 = failover not supported (no alternate path)
  p.rnr_retry_count = a.rnr_retry_count & 7;
  p.srq = a.srq;
  p.local_ca_guid = ca_guid_;
  c->rep = p;
  c->state = State::rep_sent;
  // The active side said how long it takes to answer a REP, and how often to try (s12.6.5).
  c->response_timeout = timeout_ns(c->req->local_cm_response_timeout);
  c->retries_left = c->req->max_cm_retries;
  send(*c, p, now + c->response_timeout);
  return 0;
}

int ConnectionManager::ready(Time, std::uint32_t id, std::span<const std::uint8_t> private_data) {
  Connection* c = find(id);
  wire::CmRtu u;
  if (!c || c->state != State::rep_rcvd || !copy_private(private_data, u.private_data)) return EINVAL;
  u.local_comm_id = c->local_id;
  u.remote_comm_id = c->remote_id;
  c->state = State::established;
  send(*c, u);  // kept in last_sent: a duplicate REP is answered with it again
  return 0;
}

int ConnectionManager::reject(Time, std::uint32_t id, std::span<const std::uint8_t> private_data) {
  Connection* c = find(id);
  wire::CmRej j;
  if (!c || (c->state != State::req_rcvd && c->state != State::rep_rcvd) || !copy_private(private_data, j.private_data))
    return EINVAL;
  // s12.6.7: the REQ or the REP
  send_rej(*c, c->state == State::req_rcvd ? 0 : 1, rej_reason::consumer_reject, std::move(j));
  connections_.erase(id);
  return 0;
}

int ConnectionManager::disconnect(Time now, std::uint32_t id, std::span<const std::uint8_t> private_data) {
  Connection* c = find(id);
  if (!c) return EINVAL;
  if (c->state == State::dreq_rcvd) {
    wire::CmDrep d;
    if (!copy_private(private_data, d.private_data)) return EINVAL;
    d.local_comm_id = c->local_id;
    d.remote_comm_id = c->remote_id;
    c->state = State::timewait;
    send(*c, d);  // answers a duplicate DREQ again
    return 0;
  }
  wire::CmDreq d;
  if ((c->state != State::established && c->state != State::rep_sent) || !copy_private(private_data, d.private_data))
    return EINVAL;
  d.local_comm_id = c->local_id;
  d.remote_comm_id = c->remote_id;
  // The peer's QP: the REP's when we sent the REQ, the REQ's when we answered it.
  d.remote_qpn_eecn = c->rep && c->rep->local_comm_id == c->remote_id ? c->rep->local_qpn : c->req->local_qpn;
  c->state = State::dreq_sent;
  c->tid = new_tid();
  c->retries_left = c->req ? c->req->max_cm_retries : kMaxCmRetries;
  c->response_timeout = timeout_ns(kResponseTimeout);
  send(*c, d, now + c->response_timeout);
  return 0;
}

Expected<std::uint32_t> ConnectionManager::resolve_service(Time now, const CmServiceQuery& query) {
  wire::CmSidrReq s;
  if (!copy_private(query.private_data, s.private_data)) return Expected<std::uint32_t>::error(EINVAL);
  Connection& c = open(State::sidr_req_sent, query.remote_gid);
  s.request_id = c.local_id;
  s.service_id = query.service_id;
  send(c, s, now + c.response_timeout);
  return c.local_id;
}

int ConnectionManager::answer_service(Time, std::uint32_t id, const CmServiceAnswer& a) {
  Connection* c = find(id);
  wire::CmSidrRep r;
  if (!c || c->state != State::sidr_req_rcvd || !copy_private(a.private_data, r.private_data)) return EINVAL;
  r.request_id = c->remote_id;
  r.status = a.status;
  r.qpn = a.qpn & 0xFFFFFF;
  r.service_id = listeners_.count(c->listener) ? listeners_[c->listener] : 0;
  r.qkey = a.qkey;
  send(*c, r);
  connections_.erase(id);
  return 0;
}

void ConnectionManager::destroy(Time now, std::uint32_t id) {
  Connection* c = find(id);
  if (!c) return;
  switch (c->state) {
    case State::req_sent:
    case State::req_rcvd:
    case State::rep_sent:
    case State::rep_rcvd:
      send_rej(*c,
               c->state == State::req_rcvd   ? 0
               : c->state == State::rep_rcvd ? 1
                                             : 2,
               c->state == State::req_sent ? rej_reason::timeout : rej_reason::consumer_reject);
      break;
    case State::established:
    case State::dreq_rcvd:
      disconnect(now, id, {});  // one DREQ (its answer finds no connection), or the awaited DREP
      break;
    default:
      break;
  }
  connections_.erase(id);
}

void ConnectionManager::receive(Time now, const Gid& from, const wire::CmMad& mad) {
  ++counters_.mads_received;
  std::visit(
      [&](const auto& m) {
        using M = std::decay_t<decltype(m)>;
        if constexpr (std::is_same_v<M, wire::CmReq>)
          on_req(now, from, mad);
        else if constexpr (std::is_same_v<M, wire::CmRep>)
          on_rep(now, from, mad);
        else if constexpr (std::is_same_v<M, wire::CmRtu>)
          on_rtu(from, mad);
        else if constexpr (std::is_same_v<M, wire::CmRej>)
          on_rej(from, mad);
        else if constexpr (std::is_same_v<M, wire::CmMra>)
          on_mra(now, from, mad);
        else if constexpr (std::is_same_v<M, wire::CmDreq>)
          on_dreq(from, mad);
        else if constexpr (std::is_same_v<M, wire::CmDrep>)
          on_drep(from, mad);
        else if constexpr (std::is_same_v<M, wire::CmSidrReq>)
          on_sidr_req(now, from, mad);
        else if constexpr (std::is_same_v<M, wire::CmSidrRep>)
          on_sidr_rep(from, mad);
      },
      mad.message);
}

void ConnectionManager::on_req(Time now, const Gid& from, const wire::CmMad& mad) {
  const auto& req = std::get<wire::CmReq>(mad.message);
  if (Connection* dup = find_remote(from, req.local_comm_id)) {
    // A retry of a REQ we answered: the REP again (s12.9.6); one still with the consumer waits.
    if (dup->state == State::rep_sent && dup->last_sent) {
      ++counters_.mads_resent;
      outbox_.push_back({from, *dup->last_sent});
    }
    return;
  }
  for (const auto& [id, c] : connections_) {
    // A new REQ from a QP we still hold a connection with: the peer lost it (s12.9.8.3.3).
    if (c.state == State::established && c.remote_gid == from && c.req && c.rep &&
        (c.req->local_qpn == req.local_qpn) && c.req->local_ca_guid == req.local_ca_guid) {
      reject_unknown(from, mad.header.transaction_id, req.local_comm_id, 0, rej_reason::stale_connection);
      return;
    }
  }
  const auto listener = listener_for(req.service_id);
  if (!listener && reserved(now, req.service_id)) {
    ++counters_.unmatched;  // the active side resends it in a response timeout
    return;
  }
  if (!listener) {
    reject_unknown(from, mad.header.transaction_id, req.local_comm_id, 0, rej_reason::invalid_service_id);
    return;
  }
  if (req.transport_service_type > 1) {  // RD and XRC: the engine's QPs are RC, UC and UD
    reject_unknown(from, mad.header.transaction_id, req.local_comm_id, 0, rej_reason::invalid_transport_type);
    return;
  }
  const auto waiting = std::count_if(connections_.begin(), connections_.end(), [&](const auto& entry) {
    return entry.second.state == State::req_rcvd && entry.second.listener == *listener;
  });
  if (static_cast<std::size_t>(waiting) >= kMaxPendingRequests) {
    reject_unknown(from, mad.header.transaction_id, req.local_comm_id, 0, rej_reason::no_resources);
    return;
  }
  Connection& c = open_for(State::req_rcvd, from, req.local_comm_id, mad.header.transaction_id, *listener);
  c.req = req;
  emit(CmEventType::request, c, mad);
}

void ConnectionManager::on_rep(Time, const Gid& from, const wire::CmMad& mad) {
  const auto& rep = std::get<wire::CmRep>(mad.message);
  Connection* c = find(rep.remote_comm_id);
  if (!c || c->remote_gid != from) {
    reject_unknown(from, mad.header.transaction_id, rep.local_comm_id, 1, rej_reason::invalid_comm_id);
    return;
  }
  if (c->state == State::established && c->remote_id == rep.local_comm_id && c->last_sent) {
    ++counters_.mads_resent;  // our RTU was lost: the REP came again (s12.9.6)
    outbox_.push_back({from, *c->last_sent});
    return;
  }
  if (c->state != State::req_sent) {
    ++counters_.unmatched;
    return;
  }
  c->remote_id = rep.local_comm_id;
  c->rep = rep;
  c->state = State::rep_rcvd;
  c->resend_at = 0;
  emit(CmEventType::reply, *c, mad);
}

void ConnectionManager::on_rtu(const Gid& from, const wire::CmMad& mad) {
  const auto& rtu = std::get<wire::CmRtu>(mad.message);
  Connection* c = find(rtu.remote_comm_id);
  if (!c || c->remote_gid != from || c->remote_id != rtu.local_comm_id || c->state != State::rep_sent) {
    ++counters_.unmatched;
    return;
  }
  c->state = State::established;
  c->resend_at = 0;
  emit(CmEventType::established, *c, mad);
}

void ConnectionManager::on_rej(const Gid& from, const wire::CmMad& mad) {
  const auto& rej = std::get<wire::CmRej>(mad.message);
  Connection* c = find(rej.remote_comm_id);
  // A REJ of our REQ may come from a peer that never made a connection: its local ID is 0.
  if (!c || c->remote_gid != from ||
      (rej.local_comm_id != 0 && c->remote_id != 0 && c->remote_id != rej.local_comm_id)) {
    ++counters_.unmatched;
    return;
  }
  emit(CmEventType::rejected, *c, mad);
  connections_.erase(c->local_id);
}

void ConnectionManager::on_mra(Time now, const Gid& from, const wire::CmMad& mad) {
  const auto& mra = std::get<wire::CmMra>(mad.message);
  Connection* c = find(mra.remote_comm_id);
  const bool awaited = c && c->remote_gid == from &&
                       ((c->state == State::req_sent && mra.message_mraed == 0) ||
                        (c->state == State::rep_sent && mra.message_mraed == 1));
  if (!awaited) {
    ++counters_.unmatched;
    return;
  }
  // The peer needs longer: wait its service timeout on top of ours before resending (s12.6.6).
  c->resend_at = now + timeout_ns(mra.service_timeout) + c->response_timeout;
}

void ConnectionManager::on_dreq(const Gid& from, const wire::CmMad& mad) {
  const auto& dreq = std::get<wire::CmDreq>(mad.message);
  Connection* c = find(dreq.remote_comm_id);
  if (!c || c->remote_gid != from || c->remote_id != dreq.local_comm_id) {
    // The connection is gone here: a DREP still lets the peer finish (s12.9.7).
    ++counters_.unmatched;
    wire::CmDrep d;
    d.local_comm_id = dreq.remote_comm_id;
    d.remote_comm_id = dreq.local_comm_id;
    send_to(from, mad.header.transaction_id, d);
    return;
  }
  switch (c->state) {
    case State::established:
    case State::rep_sent:  // the RTU was lost, the peer has moved on
      c->state = State::dreq_rcvd;
      c->tid = mad.header.transaction_id;
      c->resend_at = 0;
      emit(CmEventType::disconnect_request, *c, mad);
      break;
    case State::timewait:
      if (c->last_sent) {
        ++counters_.mads_resent;
        outbox_.push_back({from, *c->last_sent});
      }
      break;
    case State::dreq_sent: {
      // Both ends disconnected at once: their DREQ ends the connection as a DREP to ours would,
      // and the peer, gone or not, need not answer ours any more (s12.9.7).
      wire::CmDrep d;
      d.local_comm_id = c->local_id;
      d.remote_comm_id = c->remote_id;
      c->state = State::timewait;
      c->tid = mad.header.transaction_id;
      send(*c, d);
      emit(CmEventType::disconnected, *c, mad);
      break;
    }
    default:
      ++counters_.unmatched;
  }
}

void ConnectionManager::on_drep(const Gid& from, const wire::CmMad& mad) {
  const auto& drep = std::get<wire::CmDrep>(mad.message);
  Connection* c = find(drep.remote_comm_id);
  if (!c || c->remote_gid != from || c->state != State::dreq_sent) {
    ++counters_.unmatched;
    return;
  }
  c->state = State::timewait;
  c->resend_at = 0;
  emit(CmEventType::disconnected, *c, mad);
}

void ConnectionManager::on_sidr_req(Time now, const Gid& from, const wire::CmMad& mad) {
  const auto& sidr = std::get<wire::CmSidrReq>(mad.message);
  if (find_remote(from, sidr.request_id)) return;  // a retry of one the consumer is answering
  const auto listener = listener_for(sidr.service_id);
  if (!listener && reserved(now, sidr.service_id)) {
    ++counters_.unmatched;
    return;
  }
  if (!listener) {
    wire::CmSidrRep r;
    r.request_id = sidr.request_id;
    r.status = sidr_status::service_id_not_supported;
    r.service_id = sidr.service_id;
    send_to(from, mad.header.transaction_id, r);
    return;
  }
  const Connection& c = open_for(State::sidr_req_rcvd, from, sidr.request_id, mad.header.transaction_id, *listener);
  emit(CmEventType::service_request, c, mad);
}

void ConnectionManager::on_sidr_rep(const Gid& from, const wire::CmMad& mad) {
  const auto& rep = std::get<wire::CmSidrRep>(mad.message);
  Connection* c = find(rep.request_id);
  if (!c || c->remote_gid != from || c->state != State::sidr_req_sent) {
    ++counters_.unmatched;
    return;
  }
  emit(CmEventType::service_reply, *c, mad);
  connections_.erase(c->local_id);
}

void ConnectionManager::advance(Time now) {
  std::vector<std::uint32_t> due;
  for (const auto& [id, c] : connections_)
    if (c.resend_at != 0 && now >= c.resend_at) due.push_back(id);
  for (const std::uint32_t id : due) on_timeout(now, connections_.at(id));
}

void ConnectionManager::on_timeout(Time now, Connection& c) {
  if (c.retries_left > 0 && c.last_sent) {
    --c.retries_left;
    ++counters_.mads_resent;
    outbox_.push_back({c.remote_gid, *c.last_sent});
    c.resend_at = now + c.response_timeout;
    return;
  }
  c.resend_at = 0;
  switch (c.state) {
    case State::req_sent:
    case State::rep_sent:
      // Out of retries: the peer hears a REJ for timeout, the consumer that it is unreachable (s12.9.6).
      send_rej(c, c.state == State::req_sent ? 0 : 1, rej_reason::timeout);
      emit(CmEventType::unreachable, c, std::nullopt);
      connections_.erase(c.local_id);
      break;
    case State::dreq_sent:
      c.state = State::timewait;  // a lost DREP: the connection is down all the same (s12.9.7)
      emit(CmEventType::disconnected, c, std::nullopt);
      break;
    case State::sidr_req_sent:
      emit(CmEventType::service_reply, c, std::nullopt);
      connections_.erase(c.local_id);
      break;
    default:
      break;
  }
}

std::optional<Time> ConnectionManager::next_deadline() const {
  std::optional<Time> soonest;
  for (const auto& [id, c] : connections_)
    if (c.resend_at != 0 && (!soonest || c.resend_at < *soonest)) soonest = c.resend_at;
  return soonest;
}

std::optional<OutgoingMad> ConnectionManager::next_mad() {
  if (outbox_.empty()) return std::nullopt;
  OutgoingMad m = std::move(outbox_.front());
  outbox_.pop_front();
  return m;
}

std::optional<CmEvent> ConnectionManager::next_event() {
  if (events_.empty()) return std::nullopt;
  CmEvent e = std::move(events_.front());
  events_.pop_front();
  return e;
}

const wire::CmReq* ConnectionManager::request_of(std::uint32_t id) const {
  const Connection* c = find(id);
  return c && c->req ? &*c->req : nullptr;
}

const wire::CmRep* ConnectionManager::reply_of(std::uint32_t id) const {
  const Connection* c = find(id);
  return c && c->rep ? &*c->rep : nullptr;
}

ConnectionManager::Connection* ConnectionManager::find(std::uint32_t id) {
  const auto it = connections_.find(id);
  return it == connections_.end() ? nullptr : &it->second;
}

const ConnectionManager::Connection* ConnectionManager::find(std::uint32_t id) const {
  const auto it = connections_.find(id);
  return it == connections_.end() ? nullptr : &it->second;
}

ConnectionManager::Connection* ConnectionManager::find_remote(const Gid& from, std::uint32_t remote_id) {
  for (auto& [id, c] : connections_)
    if (c.remote_id == remote_id && c.remote_gid == from) return &c;
  return nullptr;
}

std::optional<std::uint32_t> ConnectionManager::listener_for(std::uint64_t service_id) const {
  for (const auto& [handle, service] : listeners_)
    if (service == service_id) return handle;
  return std::nullopt;
}

ConnectionManager::Connection& ConnectionManager::open(State state, const Gid& remote) {
  const std::uint32_t id = new_id();
  Connection& c = connections_[id];
  c.state = state;
  c.local_id = id;
  c.remote_gid = remote;
  c.tid = new_tid();
  c.response_timeout = timeout_ns(kResponseTimeout);
  c.retries_left = kMaxCmRetries;
  return c;
}

ConnectionManager::Connection& ConnectionManager::open_for(State state, const Gid& from, std::uint32_t remote_id,
                                                           std::uint64_t tid, std::uint32_t listener) {
  const std::uint32_t id = new_id();
  Connection& c = connections_[id];
  c.state = state;
  c.local_id = id;
  c.remote_id = remote_id;
  c.remote_gid = from;
  c.tid = tid;
  c.listener = listener;
  return c;
}

std::uint32_t ConnectionManager::new_id() {
  // Never 0 (a REJ's "no connection") and never one in use.
  do {
    next_id_ = next_id_ * 1664525u + 1013904223u;
  } while (next_id_ == 0 || connections_.count(next_id_));
  return next_id_;
}

std::uint64_t ConnectionManager::new_tid() { return ++next_tid_; }

void ConnectionManager::send(Connection& c, wire::CmMessage message, std::optional<Time> await_until) {
  send_to(c.remote_gid, c.tid, std::move(message));
  c.last_sent = outbox_.back().mad;
  c.resend_at = await_until.value_or(0);
}

void ConnectionManager::send_rej(Connection& c, std::uint8_t message_rejected, std::uint16_t reason, wire::CmRej j) {
  j.local_comm_id = c.local_id;
  j.remote_comm_id = c.remote_id;
  j.message_rejected = message_rejected;
  j.reason = reason;
  ++counters_.rejects_sent;
  send(c, j);
}

void ConnectionManager::send_to(const Gid& to, std::uint64_t tid, wire::CmMessage message) {
  wire::CmMad mad;
  mad.header.method = static_cast<std::uint8_t>(wire::MadMethod::send);
  mad.header.transaction_id = tid;
  mad.header.attribute_id = static_cast<std::uint16_t>(wire::attribute_of(message));
  mad.message = std::move(message);
  ++counters_.mads_sent;
  outbox_.push_back({to, std::move(mad)});
}

void ConnectionManager::reject_unknown(const Gid& from, std::uint64_t tid, std::uint32_t remote_id,
                                       std::uint8_t message_rejected, std::uint16_t reason) {
  wire::CmRej j;
  j.local_comm_id = 0;
  j.remote_comm_id = remote_id;
  j.message_rejected = message_rejected;
  j.reason = reason;
  ++counters_.rejects_sent;
  send_to(from, tid, j);
}

void ConnectionManager::emit(CmEventType type, const Connection& c, std::optional<wire::CmMad> mad) {
  events_.push_back({type, c.local_id, c.listener, c.remote_gid, std::move(mad)});
}

}  // namespace softrdma::core
