#include "emulator/core/qp_transition.hpp"

#include <cerrno>
#include <optional>

namespace softrdma::core {
namespace {

using namespace qp_attr;  // the mask bits, which the tables below are made of
using S = QpState;

// What one transition requires and allows for one QP type. qp_attr::state is allowed
// everywhere and listed nowhere.
struct Masks {
  std::uint32_t required = 0;
  std::uint32_t optional = 0;
};

struct Transition {
  QpState from;
  QpState to;
  Masks rc, uc, ud;
};

// Attribute groups that several transitions share, so each is written once.
// Where the QP lives and who may reach it: RESET->INIT sets these, INIT->INIT may change them.
constexpr std::uint32_t kConnectedInit = pkey_index | port | access_flags;
constexpr std::uint32_t kUdInit = pkey_index | port | qkey;
// The peer of a connected QP, which INIT->RTR sets.
constexpr std::uint32_t kConnectedPeer = av | path_mtu | dest_qpn | rq_psn;
constexpr std::uint32_t kConnectedRtrOptional = alt_path | access_flags | pkey_index;
// RC's own attributes (IBTA vol. 1 s9.7, reliable service): a requester's ACK timeout, retries
// and outstanding READs/atomics; a responder's READ/atomic resources and RNR NAK timer.
constexpr std::uint32_t kRcRequester = timeout | retry_cnt | rnr_retry | max_qp_rd_atomic;
constexpr std::uint32_t kRcResponder = max_dest_rd_atomic | min_rnr_timer;
// What a modify into RTS (from RTR, RTS or SQD) may change besides what it requires.
constexpr std::uint32_t kUdToRts = cur_state | qkey;
constexpr std::uint32_t kUcToRts = cur_state | access_flags | alt_path | path_mig_state;
constexpr std::uint32_t kRcToRts = kUcToRts | min_rnr_timer;
// What a drained QP may change in SQD (IBTA vol. 1 s10.3.1: the SQD state exists for this).
constexpr std::uint32_t kUcSqd = av | alt_path | access_flags | pkey_index | path_mig_state;

// The transitions of IBTA vol. 1 s10.3.1 figure 124 with the attributes of s11.2.4.2, as
// Linux's qp_state_table has them for RC, UC and UD; every pair not listed is illegal. Note
// RTR and SQE have no modify to themselves, and RESET->ERR is not one (Linux's table omits it).
constexpr Transition kTransitions[] = {
    // {from, to, RC {required, optional}, UC {...}, UD {...}}
    {S::reset, S::init, {kConnectedInit, 0}, {kConnectedInit, 0}, {kUdInit, 0}},
    {S::init, S::init, {0, kConnectedInit}, {0, kConnectedInit}, {0, kUdInit}},
    {S::init,
     S::rtr,
     {kConnectedPeer | kRcResponder, kConnectedRtrOptional},
     {kConnectedPeer, kConnectedRtrOptional},
     {0, pkey_index | qkey}},
    {S::rtr, S::rts, {sq_psn | kRcRequester, kRcToRts}, {sq_psn, kUcToRts}, {sq_psn, kUdToRts}},
    {S::rts, S::rts, {0, kRcToRts}, {0, kUcToRts}, {0, kUdToRts}},
    {S::rts, S::sqd, {0, en_sqd_async_notify}, {0, en_sqd_async_notify}, {0, en_sqd_async_notify}},
    {S::sqd, S::rts, {0, kRcToRts}, {0, kUcToRts}, {0, kUdToRts}},
    {S::sqd, S::sqd, {0, kUcSqd | port | kRcRequester | kRcResponder}, {0, kUcSqd}, {0, pkey_index | qkey}},
    {S::sqe, S::rts, {}, {0, cur_state | access_flags}, {0, kUdToRts}},  // RC: see check_modify_qp
    // Back to RESET, or into ERR, with no attributes.
    {S::reset, S::reset, {}, {}, {}},
    {S::init, S::reset, {}, {}, {}},
    {S::init, S::err, {}, {}, {}},
    {S::rtr, S::reset, {}, {}, {}},
    {S::rtr, S::err, {}, {}, {}},
    {S::rts, S::reset, {}, {}, {}},
    {S::rts, S::err, {}, {}, {}},
    {S::sqd, S::reset, {}, {}, {}},
    {S::sqd, S::err, {}, {}, {}},
    {S::sqe, S::reset, {}, {}, {}},
    {S::sqe, S::err, {}, {}, {}},
    {S::err, S::reset, {}, {}, {}},
    {S::err, S::err, {}, {}, {}},
};

// XRC's halves take RC's attributes less those of the half they lack (IBTA vol. 1 annex A14,
// as Linux's table has them): an initiator has no responder, a target no requester but its
// ACK timeout.
constexpr Masks without(const Masks& m, std::uint32_t bits) { return {m.required & ~bits, m.optional & ~bits}; }
constexpr std::uint32_t kNotInitiator = kRcResponder;
constexpr std::uint32_t kNotTarget = retry_cnt | rnr_retry | max_qp_rd_atomic;

std::optional<Masks> find_masks(QpType type, QpState from, QpState to) {
  for (const Transition& t : kTransitions) {
    if (t.from != from || t.to != to) continue;
    switch (type) {
      case QpType::rc:
        return t.rc;
      case QpType::uc:
        return t.uc;
      case QpType::ud:
        return t.ud;
      case QpType::xrc_send:
        return without(t.rc, kNotInitiator);
      case QpType::xrc_recv:
        return without(t.rc, kNotTarget);
    }
    return std::nullopt;  // a type the engine does not have
  }
  return std::nullopt;
}

// A range check of the attributes `when` names, made when all of them are in the mask.
struct ValueRule {
  std::uint32_t when;
  bool (*ok)(const QpAttr& a, const DeviceLimits& d);
};

constexpr bool valid_port(std::uint8_t p, const DeviceLimits& d) { return p >= 1 && p <= d.phys_port_cnt; }
constexpr std::uint32_t k24Bits = 1u << 24;  // PSNs and QPNs (IBTA vol. 1 s9.2 BTH)
// The QP access flags the engine takes: those it implements, and the ODP bit, an MR's property
// that rdma-core's ODP tests pass here too and rxe accepts (rxe also takes its FLUSH bits).
constexpr std::uint32_t kQpAccess = access::local_write | access::remote_write | access::remote_read |
                                    access::remote_atomic | access::mw_bind | access::on_demand;

constexpr ValueRule kValueRules[] = {
    // Ports count from 1 (as uverbs modify_qp and rxe: rdma_is_port_valid); a modify that
    // names the QP's port and its AV's port names one port (as uverbs).
    {port, [](const QpAttr& a, const DeviceLimits& d) { return valid_port(a.port_num, d); }},
    {av, [](const QpAttr& a, const DeviceLimits& d) { return valid_port(a.ah_attr.port_num, d); }},
    {port | av, [](const QpAttr& a, const DeviceLimits&) { return a.port_num == a.ah_attr.port_num; }},
    // Indexes into the port's tables (as ib core: ib_get_cached_pkey, rdma_get_gid_attr).
    {pkey_index, [](const QpAttr& a, const DeviceLimits& d) { return a.pkey_index < d.pkey_table_len; }},
    {av, [](const QpAttr& a, const DeviceLimits& d) { return a.ah_attr.sgid_index < d.gid_table_len; }},
    // Codes 256..4096 (see Mtu); rxe refuses above its port's 4096.
    {path_mtu,
     [](const QpAttr& a, const DeviceLimits&) { return a.path_mtu >= Mtu::mtu256 && a.path_mtu <= Mtu::mtu4096; }},
    // The widths of the fields: 5-bit Local ACK Timeout (as rxe) and RNR timer code, 3-bit
    // retry counts (IBTA vol. 1 s9.7.6.1.3, s9.7.5.2.8).
    {timeout, [](const QpAttr& a, const DeviceLimits&) { return a.timeout <= 31; }},
    {min_rnr_timer, [](const QpAttr& a, const DeviceLimits&) { return a.min_rnr_timer <= 31; }},
    {retry_cnt, [](const QpAttr& a, const DeviceLimits&) { return a.retry_cnt <= 7; }},
    {rnr_retry, [](const QpAttr& a, const DeviceLimits&) { return a.rnr_retry <= 7; }},
    // Outstanding READs/atomics as initiator and as responder, within what the device offers
    // (ibv_device_attr max_qp_init_rd_atom, max_qp_rd_atom; rxe checks the same).
    {max_qp_rd_atomic, [](const QpAttr& a, const DeviceLimits& d) { return a.max_rd_atomic <= d.max_qp_init_rd_atom; }},
    {max_dest_rd_atomic,
     [](const QpAttr& a, const DeviceLimits& d) { return a.max_dest_rd_atomic <= d.max_qp_rd_atom; }},
    // 24-bit numbers. Linux's ib core masks a wider PSN to 24 bits with a warning; we refuse
    // it, since a PSN that does not fit is the caller's bug and masking would hide it.
    {sq_psn, [](const QpAttr& a, const DeviceLimits&) { return a.sq_psn < k24Bits; }},
    {rq_psn, [](const QpAttr& a, const DeviceLimits&) { return a.rq_psn < k24Bits; }},
    {dest_qpn, [](const QpAttr& a, const DeviceLimits&) { return a.dest_qp_num < k24Bits; }},
    {access_flags, [](const QpAttr& a, const DeviceLimits&) { return (a.qp_access_flags & ~kQpAccess) == 0; }},
    // Alternate paths (APM) need an InfiniBand link; Linux's ib core refuses them on RoCE and
    // softrdma has no IB link, so the attribute the table allows is never accepted.
    {alt_path, [](const QpAttr&, const DeviceLimits&) { return false; }},
};

template <typename T>
void copy_if(std::uint32_t mask, std::uint32_t bit, T& to, const T& from) {
  if ((mask & bit) != 0) to = from;
}

}  // namespace

int check_modify_qp(QpType type, QpState current, const QpAttr& attr, std::uint32_t mask, const DeviceLimits& limits) {
  // An RC QP never enters SQE: on RC a send-side error moves the QP to ERR (IBTA vol. 1
  // s10.3.1). Linux's table lists SQE->RTS for all types (RC without attributes); we refuse
  // every modify from a state RC cannot be in.
  if (is_reliable(type) && current == QpState::sqe) return EINVAL;

  const QpState next = (mask & qp_attr::state) != 0 ? attr.qp_state : current;
  const std::optional<Masks> masks = find_masks(type, current, next);
  if (!masks) return EINVAL;
  if ((mask & masks->required) != masks->required) return EINVAL;
  if ((mask & ~(masks->required | masks->optional | qp_attr::state)) != 0) return EINVAL;

  // cur_qp_state states what the caller believes the state is (ibv_modify_qp: "assume this is
  // the current QP state"). Linux looks the transition up from it; the engine knows the real
  // state, and a caller who believes another one is refused.
  if ((mask & qp_attr::cur_state) != 0 && attr.cur_qp_state != current) return EINVAL;

  for (const ValueRule& rule : kValueRules)
    if ((mask & rule.when) == rule.when && !rule.ok(attr, limits)) return EINVAL;
  return 0;
}

void apply_modify_qp(QpAttr& qp, const QpAttr& attr, std::uint32_t mask) {
  copy_if(mask, qp_attr::state, qp.qp_state, attr.qp_state);
  copy_if(mask, qp_attr::en_sqd_async_notify, qp.en_sqd_async_notify, attr.en_sqd_async_notify);
  copy_if(mask, qp_attr::access_flags, qp.qp_access_flags, attr.qp_access_flags);
  copy_if(mask, qp_attr::pkey_index, qp.pkey_index, attr.pkey_index);
  copy_if(mask, qp_attr::port, qp.port_num, attr.port_num);
  copy_if(mask, qp_attr::qkey, qp.qkey, attr.qkey);
  copy_if(mask, qp_attr::av, qp.ah_attr, attr.ah_attr);
  copy_if(mask, qp_attr::path_mtu, qp.path_mtu, attr.path_mtu);
  copy_if(mask, qp_attr::timeout, qp.timeout, attr.timeout);
  copy_if(mask, qp_attr::retry_cnt, qp.retry_cnt, attr.retry_cnt);
  copy_if(mask, qp_attr::rnr_retry, qp.rnr_retry, attr.rnr_retry);
  copy_if(mask, qp_attr::rq_psn, qp.rq_psn, attr.rq_psn);
  copy_if(mask, qp_attr::max_qp_rd_atomic, qp.max_rd_atomic, attr.max_rd_atomic);
  copy_if(mask, qp_attr::min_rnr_timer, qp.min_rnr_timer, attr.min_rnr_timer);
  copy_if(mask, qp_attr::sq_psn, qp.sq_psn, attr.sq_psn);
  copy_if(mask, qp_attr::max_dest_rd_atomic, qp.max_dest_rd_atomic, attr.max_dest_rd_atomic);
  copy_if(mask, qp_attr::dest_qpn, qp.dest_qp_num, attr.dest_qp_num);
}

}  // namespace softrdma::core
