// The verbs side of the engine: objects, queues and the QP state machine's effects. The
// transport itself is in requester.cpp, responder.cpp and completer.cpp.
#include "emulator/core/device.hpp"

#include <algorithm>
#include <cerrno>
#include <limits>

#include "emulator/core/iwarp_transport.hpp"
#include "emulator/core/node_guid.hpp"
#include "emulator/core/psn.hpp"
#include "emulator/core/transport.hpp"
#include "emulator/core/wr_checks.hpp"

namespace softrdma::core {
namespace {

constexpr std::uint32_t kLocalAccess = access::local_write | access::remote_write | access::remote_read |
                                       access::remote_atomic | access::mw_bind | access::on_demand;

Gid local_gid(const DeviceConfig& c) { return c.gids.empty() ? Gid{} : c.gids.front(); }

// Without a seed from the host, communication IDs vary with the address, so two devices'
// connections are told apart in a capture; the engine stays deterministic (FNV-1a of the GID).
std::uint32_t comm_id_seed(const Gid& gid) {
  std::uint32_t h = 2166136261u;
  for (const std::uint8_t b : gid) h = (h ^ b) * 16777619u;
  return h;
}

}  // namespace

Device::Device(DeviceConfig config, Memory& memory)
    : config_(std::move(config)),
      memory_(memory),
      pds_(config_.max_pd),
      regions_(config_.max_mr),
      cqs_(config_.max_cq),
      srqs_(config_.max_srq),
      xrcds_(config_.max_xrcd),
      ahs_(config_.max_ah),
      qps_(config_.max_qp),
      cm_(local_gid(config_), node_guid(local_gid(config_)),
          config_.cm_id_seed.value_or(comm_id_seed(local_gid(config_)))),
      groups_(config_.mcast) {}

// --- protection domains -----------------------------------------------------------------

Expected<std::uint32_t> Device::alloc_pd() {
  const auto h = pds_.insert(Pd{});
  if (!h) return Expected<std::uint32_t>::error(ENOMEM);
  return *h;
}

int Device::dealloc_pd(std::uint32_t pd) {
  const Pd* p = pds_.find(pd);
  if (!p) return EINVAL;
  if (p->users) return EBUSY;
  pds_.erase(pd);
  return 0;
}

// --- memory regions and windows ---------------------------------------------------------

namespace {

// 0, or why an MR cannot have `acc`: unknown bits, or remote write or remote atomic without
// local write (IBTA vol. 1 s10.6.3.1, C10-43).
int check_mr_access(std::uint32_t acc) {
  if (acc & ~(kLocalAccess | access::zero_based)) return EINVAL;
  if ((acc & (access::remote_write | access::remote_atomic)) && !(acc & access::local_write)) return EINVAL;
  return 0;
}

void translate_to(Region& r, const MrTranslation& t, std::uint32_t acc, Memory& memory) {
  r.iova = (acc & access::zero_based) ? 0 : t.iova;
  r.length = t.length;
  r.host = (acc & access::on_demand) ? memory.on_demand(t.host) : t.host;
}

}  // namespace

Expected<MrKeys> Device::reg_mr(std::uint32_t pd, std::uint64_t host, std::uint64_t length, std::uint64_t iova,
                                std::uint32_t acc) {
  Pd* p = pds_.find(pd);
  if (!p) return Expected<MrKeys>::error(EINVAL);
  if (const int err = check_mr_access(acc)) return Expected<MrKeys>::error(err);
  if (config_.iwarp && (acc & access::on_demand)) return Expected<MrKeys>::error(EOPNOTSUPP);  // as siw: no ODP
  if (length > std::numeric_limits<std::uint64_t>::max() - iova) return Expected<MrKeys>::error(EINVAL);
  Region r;
  r.pd = pd;
  translate_to(r, {host, length, iova}, acc, memory_);
  r.access = acc & kLocalAccess;
  r.valid = true;
  const auto h = regions_.insert(r);
  if (!h) return Expected<MrKeys>::error(ENOMEM);
  Region& stored = *regions_.find(*h);
  stored.key = *h << 8 | next_key_++;
  ++p->users;
  return MrKeys{stored.key, stored.key};
}

int Device::rereg_mr(std::uint32_t lkey, const MrChange& change) {
  Region* r = find_region(lkey);
  if (!r || r->kind != Region::Kind::mr) return EINVAL;
  if (r->windows) return EBUSY;  // bound windows would outlive their translation (s10.6.7.1)
  const std::uint32_t acc = change.access.value_or(r->access);
  if (const int err = check_mr_access(acc)) return err;
  // The translation of a region that pages on demand is the memory's own: kept, not converted.
  if ((acc ^ r->access) & access::on_demand) return EOPNOTSUPP;
  if (change.translation &&
      change.translation->length > std::numeric_limits<std::uint64_t>::max() - change.translation->iova)
    return EINVAL;
  Pd* to = change.pd ? pds_.find(*change.pd) : nullptr;
  if (change.pd && !to) return EINVAL;
  if (to) {
    --pds_.find(r->pd)->users;
    ++to->users;
    r->pd = *change.pd;
  }
  if (change.translation) translate_to(*r, *change.translation, acc, memory_);
  r->access = acc & kLocalAccess;
  return 0;
}

void Device::forget_completions(std::uint32_t cq, std::uint32_t qpn) {
  Cq* c = cqs_.find(cq);
  if (!c) return;
  std::erase_if(c->entries, [qpn](const Wc& wc) { return wc.qp_num == qpn; });
}

int Device::dereg_mr(std::uint32_t lkey) {
  Region* r = find_region(lkey);
  if (!r || r->kind != Region::Kind::mr) return EINVAL;
  if (r->windows) return EBUSY;  // MWs are bound to it (s10.6.7.1)
  --pds_.find(r->pd)->users;
  regions_.erase(lkey >> 8);
  return 0;
}

Expected<std::uint32_t> Device::alloc_mw(std::uint32_t pd, int type) {
  if (config_.iwarp) return Expected<std::uint32_t>::error(EOPNOTSUPP);  // as siw: no windows
  Pd* p = pds_.find(pd);
  if (!p || (type != 1 && type != 2)) return Expected<std::uint32_t>::error(EINVAL);
  Region r;
  r.kind = type == 1 ? Region::Kind::mw_type1 : Region::Kind::mw_type2;
  r.pd = pd;
  const auto h = regions_.insert(r);
  if (!h) return Expected<std::uint32_t>::error(ENOMEM);
  Region& stored = *regions_.find(*h);
  stored.key = *h << 8 | next_key_++;
  ++p->users;
  return stored.key;
}

int Device::dealloc_mw(std::uint32_t rkey) {
  // The window is named by its index: binds change the key byte, and the consumer's copy of
  // the rkey is the one it allocated unless it followed every bind (s10.6.7.2.2: the
  // consumer chooses the new key byte, the verbs do not report it back).
  Region* r = regions_.find(rkey >> 8);
  if (!r || r->kind == Region::Kind::mr) return EINVAL;
  if (r->valid) --regions_.find(r->parent)->windows;
  --pds_.find(r->pd)->users;
  regions_.erase(rkey >> 8);
  return 0;
}

Region* Device::find_region(std::uint32_t key) {
  Region* r = regions_.find(key >> 8);
  return r && r->key == key ? r : nullptr;
}

std::optional<std::uint64_t> Device::translate(std::uint32_t key, std::uint32_t pd, std::uint64_t iova,
                                               std::uint64_t length, std::uint32_t acc, std::uint32_t qpn) {
  const Region* r = find_region(key);
  if (!r || !r->valid || r->pd != pd) return std::nullopt;
  if ((r->access & acc) != acc) return std::nullopt;
  if (r->kind == Region::Kind::mw_type2 && r->bound_qp != qpn) return std::nullopt;
  if (iova < r->iova || iova - r->iova > r->length || length > r->length - (iova - r->iova)) return std::nullopt;
  return r->host + (iova - r->iova);
}

bool Device::invalidate(std::uint32_t pd, std::uint32_t key) {
  Region* r = find_region(key);
  if (!r || r->pd != pd || r->kind == Region::Kind::mw_type1) return false;
  if (r->kind != Region::Kind::mr && r->valid) --region_at(r->parent)->windows;
  r->valid = false;
  return true;
}

bool Device::gather(const std::vector<Sge>& sges, std::uint32_t pd, std::uint64_t offset, std::span<std::uint8_t> out) {
  for (const Sge& s : sges) {
    if (out.empty()) return true;
    if (offset >= s.length) {
      offset -= s.length;
      continue;
    }
    const std::uint64_t n = std::min<std::uint64_t>(s.length - offset, out.size());
    const auto host = translate(s.lkey, pd, s.addr + offset, n, 0, 0);
    if (!host || !memory_.read(*host, out.first(n))) return false;
    out = out.subspan(n);
    offset = 0;
  }
  return out.empty();
}

bool Device::scatter(const std::vector<Sge>& sges, std::uint32_t pd, std::uint64_t offset,
                     std::span<const std::uint8_t> in, Pinning pinning) {
  for (const Sge& s : sges) {
    if (in.empty()) return true;
    if (offset >= s.length) {
      offset -= s.length;
      continue;
    }
    const std::uint64_t n = std::min<std::uint64_t>(s.length - offset, in.size());
    const auto host = translate(s.lkey, pd, s.addr + offset, n, access::local_write, 0);
    if (!host || !memory_.write(pinning == Pinning::pinned ? *host : memory_.on_demand(*host), in.first(n)))
      return false;
    in = in.subspan(n);
    offset = 0;
  }
  return in.empty();
}

// --- completion queues and events -------------------------------------------------------

Expected<std::uint32_t> Device::create_cq(std::uint32_t cqe) {
  if (cqe == 0 || cqe > config_.max_cqe) return Expected<std::uint32_t>::error(EINVAL);
  Cq cq;
  cq.capacity = cqe;
  const auto h = cqs_.insert(std::move(cq));
  if (!h) return Expected<std::uint32_t>::error(ENOMEM);
  return *h;
}

int Device::destroy_cq(std::uint32_t cq) {
  const Cq* c = cqs_.find(cq);
  if (!c) return EINVAL;
  if (c->users) return EBUSY;
  cqs_.erase(cq);
  return 0;
}

int Device::resize_cq(std::uint32_t cq, std::uint32_t cqe) {
  Cq* c = cqs_.find(cq);
  if (!c || cqe == 0 || cqe > config_.max_cqe || cqe < c->entries.size()) return EINVAL;
  c->capacity = cqe;
  return 0;
}

int Device::poll_cq(std::uint32_t cq, std::span<Wc> out) {
  Cq* c = cqs_.find(cq);
  if (!c) return -EINVAL;
  memory_.flush();  // a completion says its data has landed
  std::size_t n = 0;
  for (; n < out.size() && !c->entries.empty(); ++n) {
    out[n] = c->entries.front();
    c->entries.pop_front();
  }
  return static_cast<int>(n);
}

void Device::take_completed_cqs(std::vector<std::uint32_t>& out) {
  out.clear();
  out.swap(completed_cqs_);
  for (std::uint32_t cq : out) {
    if (Cq* c = cqs_.find(cq)) c->listed = false;
  }
}

int Device::req_notify_cq(std::uint32_t cq, bool solicited_only) {
  Cq* c = cqs_.find(cq);
  if (!c) return EINVAL;
  // A later request for all completions widens an earlier solicited-only one (s11.4.2.2).
  c->solicited_only = c->armed ? (c->solicited_only && solicited_only) : solicited_only;
  c->armed = true;
  return 0;
}

std::optional<std::uint32_t> Device::next_cq_event() {
  if (cq_events_.empty()) return std::nullopt;
  const std::uint32_t cq = cq_events_.front();
  cq_events_.pop_front();
  return cq;
}

std::optional<AsyncEvent> Device::next_async_event() {
  if (async_events_.empty()) return std::nullopt;
  const AsyncEvent e = async_events_.front();
  async_events_.pop_front();
  return e;
}

void Device::complete(std::uint32_t cq, const Wc& wc, bool solicited) {
  Cq* c = cqs_.find(cq);
  if (!c) return;
  if (c->entries.size() >= c->capacity) {
    // An overrun loses the completion and is a CQ error (s11.4.2.1), reported once.
    if (!c->overflowed) raise(AsyncEventType::cq_err, cq);
    c->overflowed = true;
    return;
  }
  c->entries.push_back(wc);
  c->entries.back().timestamp = clock_;
  if (!c->listed) {
    c->listed = true;
    completed_cqs_.push_back(cq);
  }
  if (c->armed && (!c->solicited_only || solicited || wc.status != WcStatus::success)) {
    c->armed = false;
    cq_events_.push_back(cq);
  }
}

void Device::raise(AsyncEventType type, std::uint32_t element) { async_events_.push_back({type, element}); }

// --- shared receive queues ---------------------------------------------------------------

Expected<std::uint32_t> Device::create_srq(std::uint32_t pd, std::uint32_t max_wr, std::uint32_t max_sge,
                                           std::uint32_t limit, std::optional<XrcSrq> xrc, std::optional<TmSrq> tm) {
  Pd* p = pds_.find(pd);
  if (!p || max_wr == 0 || max_wr > config_.limits.max_qp_wr || max_sge == 0 || max_sge > config_.limits.max_sge ||
      limit > max_wr || (xrc && tm))
    return Expected<std::uint32_t>::error(EINVAL);
  if (xrc && (config_.iwarp || !xrcds_.find(xrc->xrcd) || !cqs_.find(xrc->cq)))
    return Expected<std::uint32_t>::error(config_.iwarp ? EOPNOTSUPP : EINVAL);
  const TmCaps caps = tm_caps();
  if (tm && caps.max_num_tags == 0) return Expected<std::uint32_t>::error(EOPNOTSUPP);
  if (tm && (!cqs_.find(tm->cq) || tm->max_num_tags == 0 || tm->max_num_tags > caps.max_num_tags ||
             tm->max_ops > caps.max_ops))
    return Expected<std::uint32_t>::error(EINVAL);
  Srq s;
  s.pd = pd;
  s.max_wr = max_wr;
  s.max_sge = max_sge;
  s.limit = limit;
  if (xrc) {
    s.xrcd = xrc->xrcd;
    s.cq = xrc->cq;
  }
  if (tm) {
    s.cq = tm->cq;
    s.tm.emplace();
    s.tm->entries.resize(tm->max_num_tags);
  }
  const auto h = srqs_.insert(std::move(s));
  if (!h) return Expected<std::uint32_t>::error(ENOMEM);
  ++p->users;
  if (xrc) ++xrcds_.find(xrc->xrcd)->users;
  if (xrc || tm) ++cqs_.find(xrc ? xrc->cq : tm->cq)->users;
  return *h;
}

int Device::modify_srq(std::uint32_t srq, std::uint32_t max_wr, std::uint32_t limit, bool set_max_wr, bool set_limit) {
  Srq* s = srqs_.find(srq);
  if (!s) return EINVAL;
  const std::uint32_t new_max = set_max_wr ? max_wr : s->max_wr;
  if (set_max_wr && (max_wr == 0 || max_wr > config_.limits.max_qp_wr || max_wr < s->queue.size())) return EINVAL;
  if (set_limit && limit > new_max) return EINVAL;
  s->max_wr = new_max;
  if (set_limit) s->limit = limit;
  return 0;
}

int Device::query_srq(std::uint32_t srq, std::uint32_t& max_wr, std::uint32_t& max_sge, std::uint32_t& limit) const {
  const Srq* s = srqs_.find(srq);
  if (!s) return EINVAL;
  max_wr = s->max_wr;
  max_sge = s->max_sge;
  limit = s->limit;
  return 0;
}

int Device::destroy_srq(std::uint32_t srq) {
  const Srq* s = srqs_.find(srq);
  if (!s) return EINVAL;
  if (s->users) return EBUSY;
  --pds_.find(s->pd)->users;
  if (s->xrcd) --xrcds_.find(s->xrcd)->users;
  if (s->cq) --cqs_.find(s->cq)->users;
  srqs_.erase(srq);
  return 0;
}

int Device::post_srq_recv(std::uint32_t srq, const RecvWr& wr) {
  Srq* s = srqs_.find(srq);
  if (!s || wr.sg_list.size() > s->max_sge) return EINVAL;
  if (s->queue.size() >= s->max_wr) return ENOMEM;
  s->queue.push_back({wr, sge_total(wr.sg_list)});
  return 0;
}

// --- address handles ---------------------------------------------------------------------

Expected<std::uint32_t> Device::create_ah(std::uint32_t pd, const AddressVector& av) {
  if (config_.iwarp) return Expected<std::uint32_t>::error(EOPNOTSUPP);
  Pd* p = pds_.find(pd);
  if (!p || av.sgid_index >= config_.gids.size() || av.port_num != 1) return Expected<std::uint32_t>::error(EINVAL);
  const auto h = ahs_.insert(Ah{pd, av});
  if (!h) return Expected<std::uint32_t>::error(ENOMEM);
  ++p->users;
  return *h;
}

int Device::destroy_ah(std::uint32_t ah) {
  const Ah* a = ahs_.find(ah);
  if (!a) return EINVAL;
  --pds_.find(a->pd)->users;
  ahs_.erase(ah);
  return 0;
}

// --- queue pairs -------------------------------------------------------------------------

Qp* Device::find_qp(std::uint32_t qpn) {
  if (qpn < config_.first_qpn) return nullptr;
  std::unique_ptr<Qp>* q = qps_.find(qpn - config_.first_qpn + 1);
  return q ? q->get() : nullptr;
}

const Qp* Device::qp(std::uint32_t qpn) const { return const_cast<Device*>(this)->find_qp(qpn); }

// Whether the objects `a` names exist and suit its type. An XRC target has no PD, CQ or queue
// of its own (the XRC SRQs of its domain provide them) and an initiator no receive side
// (IBTA vol. 1 annex A14); only RC, UC and UD QPs take a basic SRQ.
bool Device::objects_exist(const QpInitAttr& a) {
  if (a.qp_type == QpType::xrc_recv) return xrcds_.find(a.xrcd) != nullptr;
  if (!pds_.find(a.pd) || !cqs_.find(a.send_cq)) return false;
  if (a.qp_type == QpType::xrc_send) return true;
  const Srq* srq = a.srq ? srqs_.find(a.srq) : nullptr;
  // Tag matching is for RC QPs (tag_matching.md).
  return cqs_.find(a.recv_cq) && (!a.srq || (srq && !srq->xrcd && (!srq->tm || a.qp_type == QpType::rc)));
}

ReceiveTarget Device::target_of(const QpInitAttr& init) {
  ReceiveTarget t = own_target(init);
  // A tag-matching SRQ's receives complete into its own CQ (tag_matching.md).
  if (const Srq* s = init.srq ? srqs_.find(init.srq) : nullptr; s && s->tm) t.cq = s->cq;
  return t;
}

// What `a` leaves the QP: no fields its type does not use, and at least one WR on each queue
// it has.
QpInitAttr Device::normalised(const QpInitAttr& a) {
  QpInitAttr init = a;
  const bool own_rq = has_own_receive_queue(a);
  if (a.qp_type != QpType::xrc_recv) init.xrcd = 0;
  if (a.qp_type == QpType::xrc_recv) init.pd = init.send_cq = 0;
  if (!has_responder(a.qp_type) || a.qp_type == QpType::xrc_recv) init.recv_cq = init.srq = 0;
  init.cap.max_send_wr = has_requester(a.qp_type) ? std::max<std::uint32_t>(a.cap.max_send_wr, 1) : 0;
  if (!has_requester(a.qp_type)) init.cap.max_send_sge = init.cap.max_inline_data = 0;
  init.cap.max_recv_wr = own_rq ? std::max<std::uint32_t>(a.cap.max_recv_wr, 1) : 0;
  if (!own_rq) init.cap.max_recv_sge = 0;
  return init;
}

// The objects a QP completes into or draws from cannot be destroyed while it exists.
void Device::count_users(const QpInitAttr& init, int delta) {
  const auto add = [delta](std::uint32_t& users) { users += static_cast<std::uint32_t>(delta); };
  if (Pd* p = pds_.find(init.pd)) add(p->users);
  if (Cq* c = cqs_.find(init.send_cq)) add(c->users);
  if (Cq* c = cqs_.find(init.recv_cq)) add(c->users);
  if (Srq* s = srqs_.find(init.srq)) add(s->users);
  if (Xrcd* x = xrcds_.find(init.xrcd)) add(x->users);
}

Expected<QpCreated> Device::create_qp(const QpInitAttr& a) {
  const DeviceLimits& lim = config_.limits;
  const bool type_ok = a.qp_type == QpType::rc || a.qp_type == QpType::uc || a.qp_type == QpType::ud ||
                       a.qp_type == QpType::xrc_send || a.qp_type == QpType::xrc_recv;
  if (!type_ok) return Expected<QpCreated>::error(EINVAL);
  if (config_.iwarp && a.qp_type != QpType::rc) return Expected<QpCreated>::error(EOPNOTSUPP);
  if (!objects_exist(a)) return Expected<QpCreated>::error(EINVAL);
  if (a.cap.max_send_wr > lim.max_qp_wr || a.cap.max_recv_wr > lim.max_qp_wr || a.cap.max_send_sge > lim.max_sge ||
      a.cap.max_recv_sge > lim.max_sge || a.cap.max_inline_data > lim.max_inline_data)
    return Expected<QpCreated>::error(EINVAL);

  auto q = std::make_unique<Qp>();
  q->init = normalised(a);
  q->target = target_of(q->init);
  q->attr.cap = q->init.cap;
  const auto h = qps_.insert(std::move(q));
  if (!h) return Expected<QpCreated>::error(ENOMEM);
  Qp& qp = **qps_.find(*h);
  qp.qpn = config_.first_qpn + *h - 1;
  // RoCEv2 source ports carry flow entropy (annex A17.5.1); keep them in 49152-65535 so no
  // well-known port's dissector claims the packets.
  qp.udp_src_port =
      config_.udp_source_port.value_or(static_cast<std::uint16_t>(0xC000 | ((qp.qpn * 2654435761u) >> 18 & 0x3FFF)));
  count_users(qp.init, +1);
  return QpCreated{qp.qpn, qp.init.cap};
}

int Device::modify_qp(Time now, std::uint32_t qpn, const QpAttr& attr, std::uint32_t mask) {
  observe(now);
  Qp* q = find_qp(qpn);
  if (!q) return EINVAL;
  const QpState from = q->state();
  if (const int err = check_modify_qp(q->init.qp_type, from, attr, mask, config_.limits)) return err;
  // A draining send queue may only be moved to ERR (s10.3.1; as Linux rxe).
  if (from == QpState::sqd && q->attr.sq_draining && !((mask & qp_attr::state) && attr.qp_state == QpState::err))
    return EINVAL;
  if ((mask & qp_attr::av) && attr.ah_attr.sgid_index >= config_.gids.size()) return EINVAL;
  if ((mask & qp_attr::path_mtu) && attr.path_mtu > config_.max_mtu) return EINVAL;
  // iWARP: RTS means a stream to send on, which only the CM's stream_attach brings.
  if (config_.iwarp && (mask & qp_attr::state) && attr.qp_state == QpState::rts && !q->stream) return EINVAL;
  apply_modify_qp(q->attr, attr, mask);
  const QpState to = q->state();

  if (to == QpState::reset && from != QpState::reset) {
    // Back to RESET: queues emptied without completions (s10.3.1), transport state cleared.
    const QpAttr kept = q->attr;
    const QpInitAttr init = q->init;
    const std::uint16_t port = q->udp_src_port;
    const std::uint32_t handles = q->handles;
    const QpCounters counters = q->counters;
    // Still in the queues; an iWARP QP's stream ends here.
    const bool answer_queued = q->answer_queued, request_queued = q->request_queued, stream_queued = q->stream_queued;
    *q = Qp{};
    q->answer_queued = answer_queued;
    q->request_queued = request_queued;
    q->stream_queued = stream_queued;
    q->qpn = qpn;
    q->init = init;
    q->target = target_of(init);
    q->handles = handles;
    q->attr = QpAttr{};
    q->attr.cap = kept.cap;
    q->udp_src_port = port;
    q->counters = counters;
    // Its completions still waiting in the CQs go too, as ConnectX and the kernel's
    // mlx5 driver do: a QP brought back from ERR through RESET must not hand the application
    // the flush completions of its previous life as if they were new.
    forget_completions(init.send_cq, qpn);
    forget_completions(init.recv_cq, qpn);
  }
  if (mask & qp_attr::rq_psn) q->epsn = attr.rq_psn & kPsnMask;
  if (mask & qp_attr::sq_psn) q->send_psn = q->una_psn = attr.sq_psn & kPsnMask;
  if (mask & qp_attr::retry_cnt) q->retry_left = attr.retry_cnt;
  if (mask & qp_attr::rnr_retry) q->rnr_left = attr.rnr_retry;
  if (to == QpState::err && from != QpState::err) enter_error(*q);
  if (to == QpState::sqd && from == QpState::rts) {
    q->attr.sq_draining = true;
    Completer::note_if_drained(*this, *q);
  }
  wake(*q);
  return 0;
}

int Device::query_qp(std::uint32_t qpn, QpAttr& attr, QpInitAttr& init) const {
  const Qp* q = qp(qpn);
  if (!q) return EINVAL;
  attr = q->attr;
  attr.cur_qp_state = q->attr.qp_state;
  attr.sq_psn = q->send_psn;
  attr.rq_psn = q->epsn;
  init = q->init;
  return 0;
}

int Device::destroy_qp(std::uint32_t qpn) {
  Qp* q = find_qp(qpn);
  if (!q) return EINVAL;
  if (q->handles > 1) {
    --q->handles;
    return 0;
  }
  counters_.qps += q->counters;
  count_users(q->init, -1);
  groups_.detach_all(qpn);
  std::erase(answer_ready_, qpn);  // a new QP may get the number
  std::erase(request_ready_, qpn);
  std::erase(stream_ready_, qpn);
  std::erase(stream_closes_, qpn);
  qps_.erase(qpn - config_.first_qpn + 1);
  return 0;
}

std::optional<std::uint32_t> Device::room(WorkQueue queue, std::uint32_t handle) const {
  if (queue == WorkQueue::srq) {
    const Srq* s = srqs_.find(handle);
    if (!s) return std::nullopt;
    return s->max_wr - static_cast<std::uint32_t>(std::min<std::size_t>(s->queue.size(), s->max_wr));
  }
  const Qp* q = qp(handle);
  if (!q || (queue == WorkQueue::recv && q->init.srq)) return std::nullopt;
  const std::size_t used = queue == WorkQueue::send ? q->sq.size() : q->rq.size();
  const std::uint32_t max = queue == WorkQueue::send ? q->init.cap.max_send_wr : q->init.cap.max_recv_wr;
  return max - static_cast<std::uint32_t>(std::min<std::size_t>(used, max));
}

int Device::post_recv(std::uint32_t qpn, const RecvWr& wr) {
  Qp* q = find_qp(qpn);
  if (!q || !has_own_receive_queue(q->init)) return EINVAL;
  if (const int err = check_recv_wr(q->state(), q->init.cap, wr)) return err;
  if (q->rq.size() >= q->init.cap.max_recv_wr) return ENOMEM;
  q->rq.push_back({wr, sge_total(wr.sg_list)});
  if (q->state() == QpState::err) flush(*q);
  wake(*q);
  return 0;
}

int Device::post_send(Time now, std::uint32_t qpn, const SendWr& wr) {
  observe(now);
  Qp* q = find_qp(qpn);
  if (!q) return EINVAL;
  const QpState s = q->state();
  if (const int err = check_send_wr(q->init.qp_type, s, q->init.cap, wr)) return err;
  const bool inline_data = (wr.flags & send_flags::inline_data) != 0;
  const Ah* ah = q->init.qp_type == QpType::ud ? ahs_.find(wr.ah) : nullptr;
  if (q->init.qp_type == QpType::ud && !ah) return EINVAL;
  if (q->stream && !iwarp_supports(wr.opcode)) return EINVAL;
  if (q->sq.size() >= q->init.cap.max_send_wr) return ENOMEM;
  SendWqe& w = q->sq.push_back_slot();
  // A new WQE in every field, but the slot's vectors keep their capacity for the WR's copy.
  SendWr kept = std::move(w.wr);
  w = SendWqe{};
  w.wr = std::move(kept);
  w.wr = wr;
  if (ah) w.ud_route = ah->av;
  if (!inline_data) w.wr.inline_data.clear();
  w.length = wr.opcode == WrOpcode::atomic_write ? sizeof wr.compare_add
             : inline_data                       ? wr.inline_data.size()
                                                 : sge_total(wr.sg_list);
  w.signaled = q->init.sq_sig_all || (wr.flags & send_flags::signaled);
  if (s == QpState::err || s == QpState::sqe) flush_send(*q);
  wake(*q);
  return 0;
}

// --- multicast ------------------------------------------------------------------------------

int Device::attach_mcast(std::uint32_t qpn, const Gid& mgid) {
  if (config_.mcast.max_groups == 0) return EOPNOTSUPP;
  const Qp* q = find_qp(qpn);
  // Only UD QPs join multicast groups, and only multicast GIDs name one (s10.5, s11.3.1).
  if (!q || q->init.qp_type != QpType::ud || !is_multicast_gid(mgid)) return EINVAL;
  return groups_.attach(qpn, mgid);
}

int Device::detach_mcast(std::uint32_t qpn, const Gid& mgid) {
  if (config_.mcast.max_groups == 0) return EOPNOTSUPP;
  if (!find_qp(qpn)) return EINVAL;
  return groups_.detach(qpn, mgid);
}

// --- error state ---------------------------------------------------------------------------

void Device::enter_error(Qp& q) {
  q.attr.qp_state = QpState::err;
  q.retransmit_at = 0;
  q.rnr_at = 0;
  q.ack_pending = false;
  q.resources.clear();
  q.resources_sent_before = 0;
  flush(q);
  // Once, on entering ERR; flush() runs again for every WR posted in ERR and raises nothing.
  if (q.init.srq) raise(AsyncEventType::qp_last_wqe_reached, q.qpn);
  // An iWARP stream ends with the QP; after a Terminate still to send (iwarp_sender.cpp).
  if (q.stream && !q.stream->terminate) close_stream(q);
  wake(q);
}

void Device::close_stream(Qp& q) {
  if (q.stream->closing) return;
  q.stream->closing = true;
  stream_closes_.push_back(q.qpn);
}

void Device::flush(Qp& q) {
  flush_send(q);
  const auto flush_recv = [&](const RecvWqe& r) {
    Wc wc;
    wc.wr_id = r.wr.wr_id;
    wc.status = WcStatus::wr_flush_err;
    wc.opcode = WcOpcode::recv;
    wc.qp_num = q.qpn;
    complete(q.target.cq, wc, false);
  };
  if (q.in_send) flush_recv(q.recv);
  q.in_send = false;
  for (const RecvWqe& r : q.rq) flush_recv(r);
  q.rq.clear();
}

void Device::flush_send(Qp& q) {
  // Every outstanding WR completes with a flush error, signaled or not: errors are always
  // reported (s10.3.1, s11.4.1.1.2). Completed WQEs still queued behind a failed one keep
  // their own status.
  for (SendWqe& w : q.sq) {
    if (w.internal) {
      // The device's own READ and FIN: only a rendezvous READ's receive has a completion to give.
      if (w.rendezvous)
        TagReceiver::finish_rendezvous(*this, q, *w.rendezvous, w.complete ? w.status : WcStatus::wr_flush_err, false);
      continue;
    }
    if (w.complete && !w.signaled && w.status == WcStatus::success) continue;
    Wc wc;
    wc.wr_id = w.wr.wr_id;
    wc.status = w.complete ? w.status : WcStatus::wr_flush_err;
    wc.opcode = wc_opcode(w.wr.opcode);
    wc.qp_num = q.qpn;
    complete(q.init.send_cq, wc, false);
  }
  q.sq.clear();
  q.next_wqe = 0;
  q.next_index = 0;
  q.rd_atomic_in_flight = 0;
}

void Device::enter_send_error(Qp& q) {
  if (is_reliable(q.init.qp_type)) return enter_error(q);
  // UC and UD: a send error stops only the send queue (SQE, s10.3.1); receives go on, and
  // modify_qp SQE->RTS resumes sending.
  q.attr.qp_state = QpState::sqe;
  flush_send(q);
}

}  // namespace softrdma::core
