// Connections: the QP an ID carries, REQ/REP/RTU through the engine's connection manager, and
// its events turned into rdma_cm's. As rdma-core's librdmacm does over the kernel's CM, this
// library moves the QP through INIT, RTR and RTS with what the REQ and REP carry (IBTA vol. 1
// s12.7: the QP attributes each CM message provides) and puts the IP addressing header of
// annex A11 in front of a REQ's private data.
#include <arpa/inet.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <new>
#include <random>
#include <vector>

#include "emulator/core/qp_transition.hpp"
#include "emulator/host/device_link.hpp"
#include "verbs-shim/rdmacm/cm_objects.hpp"
#include "verbs-shim/rdmacm/system_cm.hpp"

namespace softrdma::rdmacm {
namespace {

constexpr std::uint8_t kDefaultAckTimeout = 0x11;  // 537 ms, as rdma_cm on RoCE sends
constexpr std::uint8_t kMinRnrTimer = 12;          // 0.64 ms (IBTA table 45)
// The largest READ/atomic depth of the engine (max_qp_rd_atom, the same as max_qp_init_rd_atom).
constexpr std::uint8_t kMaxRdAtomic = core::DeviceLimits{}.max_qp_rd_atom;
static_assert(kMaxRdAtomic == core::DeviceLimits{}.max_qp_init_rd_atom);
constexpr std::size_t kReqUserData = sizeof(wire::CmReq::private_data) - wire::kIpCmHeaderLength;
constexpr std::size_t kSidrReqUserData = sizeof(wire::CmSidrReq::private_data) - wire::kIpCmHeaderLength;

// A random 24-bit starting PSN for a QP's send queue: a QPN reused by a later connection must
// not take its predecessor's late packets for its own (IBTA s9.7.1 leaves the choice open).
std::uint32_t starting_psn() {
  static std::mutex mutex;
  static std::mt19937 generator{std::random_device{}()};
  std::lock_guard lock(mutex);
  return generator() & 0xFFFFFF;
}

std::span<const std::uint8_t> bytes_of(const void* data, std::size_t length) {
  return {static_cast<const std::uint8_t*>(data), data == nullptr ? 0 : length};
}

wire::Gid16 ip_bytes(const sockaddr* a) {
  if (a->sa_family == AF_INET) {
    std::array<std::uint8_t, 4> v4{};
    std::memcpy(v4.data(), &reinterpret_cast<const sockaddr_in*>(a)->sin_addr, 4);
    return wire::ip_cm_address(v4);
  }
  wire::Gid16 v6{};
  std::memcpy(v6.data(), &reinterpret_cast<const sockaddr_in6*>(a)->sin6_addr, 16);
  return v6;
}

void set_address(sockaddr_storage& out, std::uint8_t ip_version, const wire::Gid16& ip, std::uint16_t port) {
  out = {};
  if (ip_version == 4) {
    auto* v4 = reinterpret_cast<sockaddr_in*>(&out);
    v4->sin_family = AF_INET;
    v4->sin_port = htons(port);
    const auto a = wire::ip_cm_ipv4(ip);
    std::memcpy(&v4->sin_addr, a.data(), 4);
  } else {
    auto* v6 = reinterpret_cast<sockaddr_in6*>(&out);
    v6->sin6_family = AF_INET6;
    v6->sin6_port = htons(port);
    std::memcpy(&v6->sin6_addr, ip.data(), 16);
  }
}

// The annex A11 header and the consumer's bytes after it.
template <std::size_t N>
bool with_ip_header(const Id& id, const rdma_conn_param* param, std::vector<std::uint8_t>& out) {
  const std::size_t user = param != nullptr && param->private_data != nullptr ? param->private_data_len : 0;
  if (user > N) return false;
  wire::IpCmHeader h;
  const sockaddr* src = &id.id.route.addr.src_addr;
  const sockaddr* dst = &id.id.route.addr.dst_addr;
  h.ip_version = src->sa_family == AF_INET ? 4 : 6;
  h.source_port = id.port;
  h.source_ip = ip_bytes(src);
  h.destination_ip = ip_bytes(dst);
  out.assign(wire::kIpCmHeaderLength + user, 0);
  wire::emit_ip_cm_header(h, out);
  if (user != 0) std::memcpy(out.data() + wire::kIpCmHeaderLength, param->private_data, user);
  return true;
}

ibv_ah_attr ah_to(const Id& id) {
  ibv_ah_attr ah{};
  ah.is_global = 1;
  ah.grh.dgid = id.id.route.addr.addr.ibaddr.dgid;
  ah.grh.sgid_index = 0;
  ah.grh.hop_limit = 64;
  ah.grh.traffic_class = id.tos;
  ah.port_num = 1;
  return ah;
}

int to_init(ibv_qp* qp) {
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_INIT;
  a.pkey_index = 0;
  a.port_num = 1;
  int mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT;
  if (qp->qp_type == IBV_QPT_UD) {
    a.qkey = kUdpQkey;
    mask |= IBV_QP_QKEY;
  } else {
    a.qp_access_flags =
        IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
    mask |= IBV_QP_ACCESS_FLAGS;
  }
  return ibv_modify_qp(qp, &a, mask);
}

// A UD QP is ready once INIT; rdma_cm takes it on to RTS at once (rdma_create_qp's contract).
int ud_ready(ibv_qp* qp) {
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_RTR;
  if (const int err = ibv_modify_qp(qp, &a, IBV_QP_STATE)) return err;
  a.qp_state = IBV_QPS_RTS;
  a.sq_psn = starting_psn();
  return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN);
}

// What a connected QP's RTR and RTS take from the CM's messages.
struct Peer {
  std::uint32_t qpn = 0;
  std::uint8_t path_mtu = IBV_MTU_1024;
  std::uint8_t ack_timeout = kDefaultAckTimeout;
  std::uint8_t retry_count = 7;
  std::uint8_t rnr_retry = 7;
};

ibv_qp_attr rtr_attr(const Id& id, const Peer& p, int& mask) {
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_RTR;
  a.ah_attr = ah_to(id);
  a.path_mtu = static_cast<ibv_mtu>(std::min<std::uint8_t>(p.path_mtu, id.path.mtu));
  a.dest_qp_num = p.qpn;
  a.rq_psn = id.rq_psn;
  a.max_dest_rd_atomic = id.responder_resources;
  a.min_rnr_timer = kMinRnrTimer;
  mask = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN;
  if (id.id.qp_type == IBV_QPT_RC) mask |= IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
  return a;
}

ibv_qp_attr rts_attr(const Id& id, const Peer& p, int& mask) {
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_RTS;
  a.sq_psn = id.sq_psn;
  a.timeout = p.ack_timeout;
  a.retry_cnt = p.retry_count;
  a.rnr_retry = p.rnr_retry;
  a.max_rd_atomic = id.initiator_depth;
  mask = IBV_QP_STATE | IBV_QP_SQ_PSN;
  if (id.id.qp_type == IBV_QPT_RC)
    mask |= IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC;
  return a;
}

int ready_qp(Id& id, const Peer& p) {
  int mask = 0;
  ibv_qp_attr a = rtr_attr(id, p, mask);
  if (const int err = ibv_modify_qp(id.id.qp, &a, mask)) return err;
  a = rts_attr(id, p, mask);
  return ibv_modify_qp(id.id.qp, &a, mask);
}

// The active side's view of its connection, once the REP is in.
Peer active_peer(const Id& id) {
  return {id.rep->local_qpn, id.req->path_mtu, id.req->primary.local_ack_timeout, id.req->retry_count,
          id.rep->rnr_retry_count};
}

// The passive side's, from the REQ.
Peer passive_peer(const Id& id) {
  return {id.req->local_qpn, id.req->path_mtu, id.req->primary.local_ack_timeout, id.req->retry_count,
          id.req->rnr_retry_count};
}

std::uint8_t depth(std::uint8_t asked) { return asked == RDMA_MAX_INIT_DEPTH ? kMaxRdAtomic : asked; }

void set_conn_param(Event& out, std::span<const std::uint8_t> private_data, const wire::CmRep* rep,
                    const wire::CmReq* req) {
  std::copy(private_data.begin(), private_data.end(), out.private_data.begin());
  rdma_conn_param& c = out.event.param.conn;
  c.private_data = out.private_data.data();
  c.private_data_len = static_cast<std::uint8_t>(private_data.size());
  if (rep != nullptr) {
    c.responder_resources = rep->responder_resources;
    c.initiator_depth = rep->initiator_depth;
    c.flow_control = rep->end_to_end_flow_control;
    c.rnr_retry_count = rep->rnr_retry_count;
    c.srq = rep->srq;
    c.qp_num = rep->local_qpn;
  }
  if (req != nullptr) {
    c.responder_resources = req->responder_resources;
    c.initiator_depth = req->initiator_depth;
    c.flow_control = req->end_to_end_flow_control;
    c.retry_count = req->retry_count;
    c.rnr_retry_count = req->rnr_retry_count;
    c.srq = req->srq;
    c.qp_num = req->local_qpn;
  }
}

// A listener's request becomes a new ID on the listener's channel, addressed by the REQ's
// annex A11 header (its source becomes the new ID's peer).
Id* child_for(Id& listener, const core::CmEvent& e, std::span<const std::uint8_t> private_data) {
  const auto header = wire::parse_ip_cm_header(private_data);
  if (!header) return nullptr;
  sockaddr_storage local, remote;
  set_address(local, header->ip_version, header->destination_ip, listener.port);
  set_address(remote, header->ip_version, header->source_ip, header->source_port);
  return new_passive_id(listener, local, remote, e.remote_gid);
}

bool on_request(Id& listener, const core::CmEvent& e, Event& out) {
  const auto& req = std::get<wire::CmReq>(e.mad->message);
  Id* child = child_for(listener, e, req.private_data);
  if (child == nullptr) {
    dev().link->cm_reject(e.id, {});  // not an IP CM request (annex A11): nobody here can serve it
    return false;
  }
  child->req = req;
  // Known from now on, so that a QP the application readies itself with rdma_init_qp_attr
  // before rdma_accept (rping -q) has the PSNs and depths the REP will carry. A REQ's or REP's
  // starting PSN is the one its sender's QP expects to receive first, and so the one the
  // other side's QP sends from (as Linux's CM and rxe use it).
  child->sq_psn = req.starting_psn;
  child->rq_psn = starting_psn();
  child->responder_resources = std::min(kMaxRdAtomic, req.initiator_depth);
  child->initiator_depth = std::min(kMaxRdAtomic, req.responder_resources);
  route_connection(*child, e.id);
  out.event.id = &child->id;
  out.event.listen_id = &listener.id;
  out.event.event = RDMA_CM_EVENT_CONNECT_REQUEST;
  set_conn_param(out, std::span(req.private_data).subspan(wire::kIpCmHeaderLength), nullptr, &req);
  return true;
}

bool on_service_request(Id& listener, const core::CmEvent& e, Event& out) {
  const auto& sidr = std::get<wire::CmSidrReq>(e.mad->message);
  Id* child = child_for(listener, e, sidr.private_data);
  if (child == nullptr) {
    dev().link->cm_answer_service(e.id, {core::sidr_status::rejected, 0, 0, {}});
    return false;
  }
  route_connection(*child, e.id);
  out.event.id = &child->id;
  out.event.listen_id = &listener.id;
  out.event.event = RDMA_CM_EVENT_CONNECT_REQUEST;
  const auto user = std::span(sidr.private_data).subspan(wire::kIpCmHeaderLength);
  std::copy(user.begin(), user.end(), out.private_data.begin());
  out.event.param.ud.private_data = out.private_data.data();
  out.event.param.ud.private_data_len = static_cast<std::uint8_t>(user.size());
  out.event.param.ud.ah_attr = ah_to(*child);
  return true;
}

// The REP is in: ready the QP and send the RTU (rdma_cm's CONNECT_RESPONSE, seen by the
// application as ESTABLISHED); without a QP the application does it with rdma_establish.
void on_reply(Id& id, const core::CmEvent& e, Event& out) {
  id.rep = std::get<wire::CmRep>(e.mad->message);
  id.sq_psn = id.rep->starting_psn;
  id.responder_resources = std::min(id.req->responder_resources, id.rep->initiator_depth);
  id.initiator_depth = std::min(id.req->initiator_depth, id.rep->responder_resources);
  set_conn_param(out, id.rep->private_data, &*id.rep, nullptr);
  if (id.id.qp == nullptr) {
    id.state = IdState::replied;
    out.event.event = RDMA_CM_EVENT_CONNECT_RESPONSE;
    return;
  }
  if (const int err = ready_qp(id, active_peer(id))) {
    dev().link->cm_reject(e.id, {});
    id.state = IdState::disconnected;
    out.event.event = RDMA_CM_EVENT_CONNECT_ERROR;
    out.event.status = -err;
    return;
  }
  const int err = dev().link->cm_ready(e.id, {});
  id.state = err == 0 ? IdState::connected : IdState::disconnected;
  out.event.event = err == 0 ? RDMA_CM_EVENT_ESTABLISHED : RDMA_CM_EVENT_CONNECT_ERROR;
  out.event.status = -err;
}

void on_service_reply(Id& id, const core::CmEvent& e, Event& out) {
  if (!e.mad) {
    id.state = IdState::disconnected;
    out.event.event = RDMA_CM_EVENT_UNREACHABLE;
    out.event.status = -ETIMEDOUT;
    return;
  }
  const auto& rep = std::get<wire::CmSidrRep>(e.mad->message);
  if (rep.status != core::sidr_status::valid) {
    id.state = IdState::disconnected;
    out.event.event = RDMA_CM_EVENT_UNREACHABLE;
    out.event.status = rep.status;
    return;
  }
  id.state = IdState::connected;
  out.event.event = RDMA_CM_EVENT_ESTABLISHED;
  std::copy(rep.private_data.begin(), rep.private_data.end(), out.private_data.begin());
  out.event.param.ud.private_data = out.private_data.data();
  out.event.param.ud.private_data_len = static_cast<std::uint8_t>(rep.private_data.size());
  out.event.param.ud.ah_attr = ah_to(id);
  out.event.param.ud.qp_num = rep.qpn;
  out.event.param.ud.qkey = rep.qkey;
}

}  // namespace

Id* new_passive_id(Id& listener, const sockaddr_storage& local, const sockaddr_storage& remote,
                   const core::Gid& remote_gid) {
  auto* child = new (std::nothrow) Id;
  if (child == nullptr) return nullptr;
  child->channel = listener.channel;
  {
    std::lock_guard lock(child->channel->mutex);
    ++child->channel->ids;
  }
  child->id.channel = listener.id.channel;
  child->id.context = listener.id.context;
  child->id.ps = listener.id.ps;
  child->id.qp_type = listener.id.qp_type;
  child->id.verbs = dev().context;
  child->id.pd = listener.id.pd != nullptr ? listener.id.pd : dev().pd;
  child->id.port_num = 1;
  child->tos = listener.tos;
  child->id.route.addr.src_storage = local;
  child->id.route.addr.dst_storage = remote;
  std::memcpy(child->id.route.addr.addr.ibaddr.sgid.raw, dev().gid.data(), 16);
  std::memcpy(child->id.route.addr.addr.ibaddr.dgid.raw, remote_gid.data(), 16);
  child->id.route.addr.addr.ibaddr.pkey = htons(0xFFFF);
  fill_path(*child);
  child->state = IdState::requested;
  return child;
}

namespace {

void to_error(Id& id) {
  if (id.id.qp == nullptr) return;
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_ERR;
  ibv_modify_qp(id.id.qp, &a, IBV_QP_STATE);  // flushes what is posted (IBTA s10.3.1)
}

}  // namespace

bool translate(Id& id, const core::CmEvent& e, Event& out) {
  out.event.id = &id.id;
  switch (e.type) {
    case core::CmEventType::request:
      return on_request(id, e, out);
    case core::CmEventType::service_request:
      return on_service_request(id, e, out);
    case core::CmEventType::reply:
      on_reply(id, e, out);
      return true;
    case core::CmEventType::established:
      id.state = IdState::connected;
      out.event.event = RDMA_CM_EVENT_ESTABLISHED;
      set_conn_param(out, std::get<wire::CmRtu>(e.mad->message).private_data, nullptr, nullptr);
      return true;
    case core::CmEventType::rejected: {
      const auto& rej = std::get<wire::CmRej>(e.mad->message);
      id.state = IdState::disconnected;
      out.event.event = RDMA_CM_EVENT_REJECTED;
      out.event.status = rej.reason;
      set_conn_param(out, rej.private_data, nullptr, nullptr);
      return true;
    }
    case core::CmEventType::disconnect_request:
      id.peer_disconnected = true;
      [[fallthrough]];
    case core::CmEventType::disconnected:
      // The QP is left alone, as rdma-core's librdmacm leaves it: the application may have
      // destroyed it already (rping has), and rdma_disconnect moves it to ERR.
      id.state = IdState::disconnected;
      out.event.event = RDMA_CM_EVENT_DISCONNECTED;
      return true;
    case core::CmEventType::unreachable:
      id.state = IdState::disconnected;
      out.event.event = RDMA_CM_EVENT_UNREACHABLE;
      out.event.status = -ETIMEDOUT;
      return true;
    case core::CmEventType::service_reply:
      on_service_reply(id, e, out);
      return true;
  }
  return false;
}

int create_qp_on(Id& id, ibv_qp* qp) {
  int err = to_init(qp);
  if (err == 0 && qp->qp_type == IBV_QPT_UD) err = ud_ready(qp);
  if (err != 0) {
    ibv_destroy_qp(qp);
    return err;
  }
  id.id.qp = qp;
  return 0;
}

}  // namespace softrdma::rdmacm

using namespace softrdma::rdmacm;

SRDMA_RDMACM_VERSION(rdma_create_qp_ex, "RDMACM_1.0")
int srdma_rdmacm_rdma_create_qp_ex(rdma_cm_id* cm_id, ibv_qp_init_attr_ex* attr) {
  SRDMA_CM_FORWARD_IF_SYSTEM(cm_id, rdma_create_qp_ex, attr);
  if (cm_id == nullptr || attr == nullptr || cm_id->verbs == nullptr || cm_id->qp != nullptr) return fail(EINVAL);
  Id& id = id_of(cm_id);
  if (!(attr->comp_mask & IBV_QP_INIT_ATTR_PD) || attr->pd == nullptr) {
    attr->pd = cm_id->pd != nullptr ? cm_id->pd : dev().pd;
    attr->comp_mask |= IBV_QP_INIT_ATTR_PD;
  }
  if (attr->pd->context != cm_id->verbs) return fail(EINVAL);
  if (const int err = create_missing_cqs(id, *attr)) return fail(err);
  if (attr->srq == nullptr) attr->srq = cm_id->srq;
  ibv_qp* qp = ibv_create_qp_ex(cm_id->verbs, attr);
  if (qp == nullptr) return -1;
  if (const int err = create_qp_on(id, qp)) return fail(err);
  return 0;
}

SRDMA_RDMACM_VERSION(rdma_create_qp, "RDMACM_1.0")
int srdma_rdmacm_rdma_create_qp(rdma_cm_id* cm_id, ibv_pd* pd, ibv_qp_init_attr* attr) {
  SRDMA_CM_FORWARD_IF_SYSTEM(cm_id, rdma_create_qp, pd, attr);
  if (attr == nullptr) return fail(EINVAL);
  ibv_qp_init_attr_ex ex{};
  std::memcpy(&ex, attr, sizeof *attr);
  ex.comp_mask = IBV_QP_INIT_ATTR_PD;
  ex.pd = pd;
  if (rdma_create_qp_ex(cm_id, &ex) != 0) return -1;
  attr->cap = ex.cap;
  attr->send_cq = ex.send_cq;
  attr->recv_cq = ex.recv_cq;
  return 0;
}

SRDMA_RDMACM_VERSION(rdma_destroy_qp, "RDMACM_1.0")
void srdma_rdmacm_rdma_destroy_qp(rdma_cm_id* cm_id) {
  SRDMA_CM_FORWARD_IF_SYSTEM(cm_id, rdma_destroy_qp);
  if (cm_id == nullptr || cm_id->qp == nullptr) return;
  ibv_destroy_qp(cm_id->qp);
  cm_id->qp = nullptr;
  destroy_own_cqs(id_of(cm_id));
}

SRDMA_RDMACM_VERSION(rdma_connect, "RDMACM_1.0")
int srdma_rdmacm_rdma_connect(rdma_cm_id* cm_id, rdma_conn_param* param) {
  SRDMA_CM_FORWARD_SETTLE(cm_id, RDMA_CM_EVENT_ESTABLISHED, rdma_connect, param);
  if (cm_id == nullptr) return fail(EINVAL);
  Id& id = id_of(cm_id);
  if (id.state != IdState::route_resolved) return fail(EINVAL);
  if (dev().iwarp) return iwarp_connect(id, param);
  const std::uint16_t dst_port = port_of(&cm_id->route.addr.dst_addr);
  const std::uint64_t service = service_id(cm_id->ps, dst_port);
  core::Gid remote{};
  std::memcpy(remote.data(), cm_id->route.addr.addr.ibaddr.dgid.raw, 16);
  if (cm_id->qp_type == IBV_QPT_UD) {
    core::CmServiceQuery q{service, remote, {}};
    if (!with_ip_header<kSidrReqUserData>(id, param, q.private_data)) return fail(EINVAL);
    const auto started = dev().link->cm_resolve_service(q);
    if (!started) return fail(started.error());
    id.state = IdState::connecting;
    route_connection(id, *started);
    return id.own_channel ? wait_for(id, RDMA_CM_EVENT_ESTABLISHED) : 0;
  }
  core::CmConnect c;
  if (!with_ip_header<kReqUserData>(id, param, c.private_data)) return fail(EINVAL);
  if (param != nullptr &&
      ((param->responder_resources > kMaxRdAtomic && param->responder_resources != RDMA_MAX_RESP_RES) ||
       (param->initiator_depth > kMaxRdAtomic && param->initiator_depth != RDMA_MAX_INIT_DEPTH)))
    return fail(EINVAL);
  c.service_id = service;
  c.remote_gid = remote;
  c.qpn = cm_id->qp != nullptr ? cm_id->qp->qp_num : (param != nullptr ? param->qp_num : 0);
  c.qp_type = cm_id->qp != nullptr && cm_id->qp->qp_type == IBV_QPT_UC ? core::QpType::uc : core::QpType::rc;
  id.rq_psn = starting_psn();
  c.starting_psn = id.rq_psn;
  c.responder_resources = param != nullptr ? depth(param->responder_resources) : kMaxRdAtomic;
  c.initiator_depth = param != nullptr ? depth(param->initiator_depth) : kMaxRdAtomic;
  c.retry_count = param != nullptr ? std::min<std::uint8_t>(param->retry_count, 7) : 7;
  c.rnr_retry_count = param != nullptr ? std::min<std::uint8_t>(param->rnr_retry_count, 7) : 7;
  c.path_mtu = static_cast<core::Mtu>(id.path.mtu);
  c.srq = cm_id->qp != nullptr ? cm_id->qp->srq != nullptr : (param != nullptr && param->srq);
  c.local_ack_timeout = id.ack_timeout.value_or(kDefaultAckTimeout);
  c.traffic_class = id.tos;
  const auto started = dev().link->cm_connect(c);
  if (!started) return fail(started.error());
  // What the QP's RTR and RTS will need from our side of the REQ.
  wire::CmReq sent;
  sent.local_qpn = c.qpn;
  sent.starting_psn = c.starting_psn;
  sent.responder_resources = c.responder_resources;
  sent.initiator_depth = c.initiator_depth;
  sent.retry_count = c.retry_count;
  sent.rnr_retry_count = c.rnr_retry_count;
  sent.path_mtu = static_cast<std::uint8_t>(c.path_mtu);
  sent.primary.local_ack_timeout = c.local_ack_timeout;
  id.req = sent;
  id.state = IdState::connecting;
  route_connection(id, *started);
  return id.own_channel ? wait_for(id, RDMA_CM_EVENT_ESTABLISHED) : 0;
}

SRDMA_RDMACM_VERSION(rdma_accept, "RDMACM_1.0")
int srdma_rdmacm_rdma_accept(rdma_cm_id* cm_id, rdma_conn_param* param) {
  SRDMA_CM_FORWARD_SETTLE(cm_id, RDMA_CM_EVENT_ESTABLISHED, rdma_accept, param);
  if (cm_id == nullptr) return fail(EINVAL);
  Id& id = id_of(cm_id);
  if (id.state != IdState::requested) return fail(EINVAL);
  release_request_event(id);
  if (dev().iwarp) return iwarp_accept(id, param);
  const auto user =
      param != nullptr ? bytes_of(param->private_data, param->private_data_len) : std::span<const std::uint8_t>{};
  if (cm_id->qp_type == IBV_QPT_UD) {
    if (cm_id->qp == nullptr) return fail(EINVAL);
    core::CmServiceAnswer a{core::sidr_status::valid, cm_id->qp->qp_num, kUdpQkey, {user.begin(), user.end()}};
    if (const int err = dev().link->cm_answer_service(id.connection, a)) return fail(err);
    id.state = IdState::connected;
    return 0;
  }
  // Each side's READ/atomic depth is at most what the other can answer (s12.7.29, s12.7.30).
  id.responder_resources = std::min<std::uint8_t>(param != nullptr ? depth(param->responder_resources) : kMaxRdAtomic,
                                                  id.req->initiator_depth);
  id.initiator_depth = std::min<std::uint8_t>(param != nullptr ? depth(param->initiator_depth) : kMaxRdAtomic,
                                              id.req->responder_resources);
  core::CmAccept a;
  a.private_data.assign(user.begin(), user.end());
  a.responder_resources = id.responder_resources;
  a.initiator_depth = id.initiator_depth;
  a.rnr_retry_count = param != nullptr ? std::min<std::uint8_t>(param->rnr_retry_count, 7) : 7;
  if (cm_id->qp != nullptr) {
    if (const int err = ready_qp(id, passive_peer(id))) return fail(err);
    a.qpn = cm_id->qp->qp_num;
    a.srq = cm_id->qp->srq != nullptr;
  } else {
    a.qpn = param != nullptr ? param->qp_num : 0;
    a.srq = param != nullptr && param->srq;
  }
  a.starting_psn = id.rq_psn;
  if (const int err = dev().link->cm_accept(id.connection, a)) return fail(err);
  id.state = IdState::accepted;
  return id.own_channel ? wait_for(id, RDMA_CM_EVENT_ESTABLISHED) : 0;
}

SRDMA_RDMACM_VERSION(rdma_reject, "RDMACM_1.0")
int srdma_rdmacm_rdma_reject(rdma_cm_id* cm_id, const void* private_data, std::uint8_t private_data_len) {
  SRDMA_CM_FORWARD_IF_SYSTEM(cm_id, rdma_reject, private_data, private_data_len);
  if (cm_id == nullptr) return fail(EINVAL);
  Id& id = id_of(cm_id);
  if (id.state != IdState::requested) return fail(EINVAL);
  release_request_event(id);
  const auto user = bytes_of(private_data, private_data_len);
  if (dev().iwarp) return iwarp_reject(id, user);
  const int err = cm_id->qp_type == IBV_QPT_UD
                      ? dev().link->cm_answer_service(id.connection,
                                                      {core::sidr_status::rejected, 0, 0, {user.begin(), user.end()}})
                      : dev().link->cm_reject(id.connection, user);
  if (err != 0) return fail(err);
  id.state = IdState::disconnected;
  return 0;
}

SRDMA_RDMACM_VERSION(rdma_reject_ece, "RDMACM_1.3")
int srdma_rdmacm_rdma_reject_ece(rdma_cm_id* cm_id, const void* private_data, std::uint8_t private_data_len) {
  SRDMA_CM_FORWARD_IF_SYSTEM(cm_id, rdma_reject_ece, private_data, private_data_len);
  return rdma_reject(cm_id, private_data, private_data_len);
}

SRDMA_RDMACM_VERSION(rdma_disconnect, "RDMACM_1.0")
int srdma_rdmacm_rdma_disconnect(rdma_cm_id* cm_id) {
  SRDMA_CM_FORWARD_IF_SYSTEM(cm_id, rdma_disconnect);
  if (cm_id == nullptr) return fail(EINVAL);
  Id& id = id_of(cm_id);
  if (dev().iwarp) return iwarp_disconnect(id);
  const bool answering = id.peer_disconnected;
  if (!answering && id.state != IdState::connected && id.state != IdState::accepted) return fail(EINVAL);
  to_error(id);
  if (const int err = dev().link->cm_disconnect(id.connection, {})) {
    if (!answering) return fail(err);
  }
  id.peer_disconnected = false;
  id.state = answering ? IdState::disconnected : IdState::disconnecting;
  return 0;
}

SRDMA_RDMACM_VERSION(rdma_establish, "RDMACM_1.2")
int srdma_rdmacm_rdma_establish(rdma_cm_id* cm_id) {
  SRDMA_CM_FORWARD_IF_SYSTEM(cm_id, rdma_establish);
  if (cm_id == nullptr || cm_id->qp != nullptr) return fail(EINVAL);
  Id& id = id_of(cm_id);
  if (id.state != IdState::replied) return fail(EINVAL);
  if (const int err = dev().link->cm_ready(id.connection, {})) return fail(err);
  id.state = IdState::connected;
  return 0;
}

SRDMA_RDMACM_VERSION(rdma_init_qp_attr, "RDMACM_1.2")
int srdma_rdmacm_rdma_init_qp_attr(rdma_cm_id* cm_id, ibv_qp_attr* attr, int* mask) {
  SRDMA_CM_FORWARD_IF_SYSTEM(cm_id, rdma_init_qp_attr, attr, mask);
  if (cm_id == nullptr || attr == nullptr || mask == nullptr) return fail(EINVAL);
  Id& id = id_of(cm_id);
  const bool active = id.rep.has_value();
  switch (attr->qp_state) {
    case IBV_QPS_INIT:
      *attr = {};
      attr->qp_state = IBV_QPS_INIT;
      attr->port_num = 1;
      *mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT;
      if (cm_id->qp_type == IBV_QPT_UD) {
        attr->qkey = kUdpQkey;
        *mask |= IBV_QP_QKEY;
      } else {
        attr->qp_access_flags =
            IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
        *mask |= IBV_QP_ACCESS_FLAGS;
      }
      return 0;
    case IBV_QPS_RTR:
    case IBV_QPS_RTS: {
      // Known once the REQ (passive side) or the REP (active side) is in.
      if (!id.req || (!active && id.state != IdState::requested && id.state != IdState::accepted &&
                      id.state != IdState::connected))
        return fail(EINVAL);
      const Peer p = active ? active_peer(id) : passive_peer(id);
      *attr = attr->qp_state == IBV_QPS_RTR ? rtr_attr(id, p, *mask) : rts_attr(id, p, *mask);
      return 0;
    }
    default:
      return fail(EINVAL);
  }
}

SRDMA_RDMACM_VERSION(rdma_notify, "RDMACM_1.0")
int srdma_rdmacm_rdma_notify(rdma_cm_id* cm_id, ibv_event_type event) {
  SRDMA_CM_FORWARD_IF_SYSTEM(cm_id, rdma_notify, event);
  if (cm_id == nullptr) return fail(EINVAL);
  // COMM_EST: data reached the QP before the RTU; the RTU (or the REP's retry) still comes.
  return event == IBV_EVENT_COMM_EST ? 0 : fail(EINVAL);
}
