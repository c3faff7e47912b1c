#include "verbs-shim/convert.hpp"

#include <infiniband/tm_types.h>

#include <cstring>
#include <type_traits>

#include "emulator/core/tm_headers.hpp"

namespace softrdma::shim {

namespace {

template <class A, class B>
constexpr bool same(A a, B b) {
  return static_cast<long long>(a) == static_cast<long long>(b);
}

// The bits of an enum field the caller may have left uninitialised (a field outside the
// attribute mask: ibv_xsrq_pingpong reuses one ibv_qp_attr unset): read as its integer, never
// loaded as the enum, which would be undefined for a value it does not name.
template <class E>
std::underlying_type_t<E> bits_of(const E& field) {
  std::underlying_type_t<E> v;
  std::memcpy(&v, &field, sizeof v);
  return v;
}

// The engine's vocabulary carries libibverbs' numbers (verbs_types.hpp).
static_assert(same(core::QpType::rc, IBV_QPT_RC) && same(core::QpType::uc, IBV_QPT_UC) &&
              same(core::QpType::ud, IBV_QPT_UD) && same(core::QpType::xrc_send, IBV_QPT_XRC_SEND) &&
              same(core::QpType::xrc_recv, IBV_QPT_XRC_RECV));
static_assert(same(core::QpState::sqd, IBV_QPS_SQD) && same(core::QpState::sqe, IBV_QPS_SQE) &&
              same(core::QpState::err, IBV_QPS_ERR));
static_assert(same(core::Mtu::mtu256, IBV_MTU_256) && same(core::Mtu::mtu4096, IBV_MTU_4096));
static_assert(same(core::WrOpcode::rdma_write, IBV_WR_RDMA_WRITE) &&
              same(core::WrOpcode::send_with_inv, IBV_WR_SEND_WITH_INV) &&
              same(core::WrOpcode::bind_mw, IBV_WR_BIND_MW) && same(core::WrOpcode::local_inv, IBV_WR_LOCAL_INV) &&
              same(core::WrOpcode::atomic_fetch_and_add, IBV_WR_ATOMIC_FETCH_AND_ADD));
static_assert(same(core::send_flags::fence, IBV_SEND_FENCE) && same(core::send_flags::signaled, IBV_SEND_SIGNALED) &&
              same(core::send_flags::solicited, IBV_SEND_SOLICITED) &&
              same(core::send_flags::inline_data, IBV_SEND_INLINE));
static_assert(same(core::access::local_write, IBV_ACCESS_LOCAL_WRITE) &&
              same(core::access::remote_write, IBV_ACCESS_REMOTE_WRITE) &&
              same(core::access::remote_read, IBV_ACCESS_REMOTE_READ) &&
              same(core::access::remote_atomic, IBV_ACCESS_REMOTE_ATOMIC) &&
              same(core::access::mw_bind, IBV_ACCESS_MW_BIND) && same(core::access::zero_based, IBV_ACCESS_ZERO_BASED));
static_assert(same(core::WcStatus::wr_flush_err, IBV_WC_WR_FLUSH_ERR) &&
              same(core::WcStatus::retry_exc_err, IBV_WC_RETRY_EXC_ERR) &&
              same(core::WcStatus::general_err, IBV_WC_GENERAL_ERR));
static_assert(same(core::WrOpcode::atomic_write, IBV_WR_ATOMIC_WRITE) &&
              same(core::WcOpcode::atomic_write, IBV_WC_ATOMIC_WRITE));
static_assert(same(core::WcOpcode::local_inv, IBV_WC_LOCAL_INV) && same(core::WcOpcode::recv, IBV_WC_RECV) &&
              same(core::WcOpcode::recv_rdma_with_imm, IBV_WC_RECV_RDMA_WITH_IMM));
static_assert(same(core::wc_flags::grh, IBV_WC_GRH) && same(core::wc_flags::with_imm, IBV_WC_WITH_IMM) &&
              same(core::wc_flags::with_inv, IBV_WC_WITH_INV));
static_assert(same(core::WcStatus::tm_err, IBV_WC_TM_ERR) &&
              same(core::WcStatus::tm_rndv_incomplete, IBV_WC_TM_RNDV_INCOMPLETE) &&
              same(core::WcOpcode::tm_add, IBV_WC_TM_ADD) && same(core::WcOpcode::tm_del, IBV_WC_TM_DEL) &&
              same(core::WcOpcode::tm_sync, IBV_WC_TM_SYNC) && same(core::WcOpcode::tm_recv, IBV_WC_TM_RECV) &&
              same(core::WcOpcode::tm_no_tag, IBV_WC_TM_NO_TAG));
static_assert(same(core::wc_flags::tm_sync_req, IBV_WC_TM_SYNC_REQ) &&
              same(core::wc_flags::tm_match, IBV_WC_TM_MATCH) &&
              same(core::wc_flags::tm_data_valid, IBV_WC_TM_DATA_VALID));
static_assert(same(core::SrqOpcode::tag_add, IBV_WR_TAG_ADD) && same(core::SrqOpcode::tag_del, IBV_WR_TAG_DEL) &&
              same(core::SrqOpcode::tag_sync, IBV_WR_TAG_SYNC) &&
              same(core::srq_op_flags::signaled, IBV_OPS_SIGNALED) &&
              same(core::srq_op_flags::tm_sync, IBV_OPS_TM_SYNC));
static_assert(same(core::TmhOp::no_tag, IBV_TMH_NO_TAG) && same(core::TmhOp::rendezvous, IBV_TMH_RNDV) &&
              same(core::TmhOp::fin, IBV_TMH_FIN) && same(core::TmhOp::eager, IBV_TMH_EAGER) &&
              core::kTmhLength == sizeof(ibv_tmh) && core::kRvhLength == sizeof(ibv_rvh));
static_assert(same(core::qp_attr::state, IBV_QP_STATE) && same(core::qp_attr::av, IBV_QP_AV) &&
              same(core::qp_attr::max_dest_rd_atomic, IBV_QP_MAX_DEST_RD_ATOMIC) &&
              same(core::qp_attr::dest_qpn, IBV_QP_DEST_QPN) && same(core::qp_attr::rate_limit, IBV_QP_RATE_LIMIT));
static_assert(same(core::AsyncEventType::qp_last_wqe_reached, IBV_EVENT_QP_LAST_WQE_REACHED) &&
              same(core::AsyncEventType::srq_limit_reached, IBV_EVENT_SRQ_LIMIT_REACHED) &&
              same(core::AsyncEventType::sq_drained, IBV_EVENT_SQ_DRAINED));

bool known(ibv_wr_opcode op) {
  switch (op) {
    case IBV_WR_RDMA_WRITE:
    case IBV_WR_RDMA_WRITE_WITH_IMM:
    case IBV_WR_SEND:
    case IBV_WR_SEND_WITH_IMM:
    case IBV_WR_RDMA_READ:
    case IBV_WR_ATOMIC_CMP_AND_SWP:
    case IBV_WR_ATOMIC_FETCH_AND_ADD:
    case IBV_WR_LOCAL_INV:
    case IBV_WR_BIND_MW:
    case IBV_WR_SEND_WITH_INV:
      return true;
    default:
      return false;  // TSO, DRIVER1, FLUSH: not this device's; ATOMIC_WRITE: only ibv_wr_atomic_write
  }
}

}  // namespace

void to_core(const ibv_sge* sges, std::size_t count, std::vector<core::Sge>& out) {
  out.resize(count);
  for (std::size_t i = 0; i < count; ++i) out[i] = {sges[i].addr, sges[i].length, sges[i].lkey};
}

int to_core(const ibv_send_wr& wr, ibv_qp_type type, core::SendWr& out) {
  const bool ud = type == IBV_QPT_UD;
  if (!known(wr.opcode) || wr.num_sge < 0) return EINVAL;
  out.wr_id = wr.wr_id;
  out.opcode = static_cast<core::WrOpcode>(wr.opcode);
  out.flags = wr.send_flags & (IBV_SEND_FENCE | IBV_SEND_SIGNALED | IBV_SEND_SOLICITED | IBV_SEND_INLINE);
  out.imm_data = wr.imm_data;  // a union with invalidate_rkey
  out.invalidate_rkey = wr.invalidate_rkey;
  out.inline_data.clear();
  if (wr.send_flags & IBV_SEND_INLINE) {
    // The bytes are the application's, read now without an lkey (IBTA vol. 1 s10.7.2.2).
    out.sg_list.clear();
    for (int i = 0; i < wr.num_sge; ++i) {
      const auto* p = reinterpret_cast<const std::uint8_t*>(wr.sg_list[i].addr);
      out.inline_data.insert(out.inline_data.end(), p, p + wr.sg_list[i].length);
    }
  } else {
    to_core(wr.sg_list, static_cast<std::size_t>(wr.num_sge), out.sg_list);
  }
  out.remote_addr = out.rkey = 0;
  out.compare_add = out.swap = 0;
  switch (wr.opcode) {
    case IBV_WR_RDMA_WRITE:
    case IBV_WR_RDMA_WRITE_WITH_IMM:
    case IBV_WR_RDMA_READ:
      out.remote_addr = wr.wr.rdma.remote_addr;
      out.rkey = wr.wr.rdma.rkey;
      break;
    case IBV_WR_ATOMIC_CMP_AND_SWP:
    case IBV_WR_ATOMIC_FETCH_AND_ADD:
      out.remote_addr = wr.wr.atomic.remote_addr;
      out.rkey = wr.wr.atomic.rkey;
      out.compare_add = wr.wr.atomic.compare_add;
      out.swap = wr.wr.atomic.swap;
      break;
    case IBV_WR_BIND_MW:
      out.mw_rkey = wr.bind_mw.mw != nullptr ? wr.bind_mw.mw->rkey : 0;
      out.bind_new_rkey = wr.bind_mw.rkey;
      out.bind_mr_lkey = wr.bind_mw.bind_info.mr != nullptr ? wr.bind_mw.bind_info.mr->lkey : 0;
      out.bind_addr = wr.bind_mw.bind_info.addr;
      out.bind_length = wr.bind_mw.bind_info.length;
      out.bind_access = wr.bind_mw.bind_info.mw_access_flags;
      break;
    default:
      break;
  }
  // wr.ud shares its storage with wr.rdma and wr.atomic: only a UD QP's WR holds an AH there.
  out.ah = ud && wr.wr.ud.ah != nullptr ? wr.wr.ud.ah->handle : 0;
  out.remote_qpn = ud ? wr.wr.ud.remote_qpn : 0;
  out.remote_qkey = ud ? wr.wr.ud.remote_qkey : 0;
  out.xrc_remote_srq = type == IBV_QPT_XRC_SEND ? wr.qp_type.xrc.remote_srqn : 0;
  return 0;
}

void to_core(const ibv_recv_wr& wr, core::RecvWr& out) {
  out.wr_id = wr.wr_id;
  to_core(wr.sg_list, wr.num_sge > 0 ? static_cast<std::size_t>(wr.num_sge) : 0, out.sg_list);
}

int to_core(const ibv_ops_wr& wr, core::SrqOp& out) {
  // ibv_post_srq_ops(3) has three operations; the opcode is read as an integer, as a caller's
  // other value would be undefined loaded as the enum.
  const auto opcode = bits_of(wr.opcode);
  switch (opcode) {
    case IBV_WR_TAG_ADD:
    case IBV_WR_TAG_DEL:
    case IBV_WR_TAG_SYNC:
      break;
    default:
      return EINVAL;
  }
  const bool add = opcode == IBV_WR_TAG_ADD;
  if (add && wr.tm.add.num_sge < 0) return EINVAL;
  out.wr_id = wr.wr_id;
  out.opcode = static_cast<core::SrqOpcode>(opcode);
  out.flags = static_cast<std::uint32_t>(wr.flags) & (IBV_OPS_SIGNALED | IBV_OPS_TM_SYNC);
  out.unexpected_cnt = wr.tm.unexpected_cnt;
  out.handle = wr.tm.handle;
  out.recv_wr_id = wr.tm.add.recv_wr_id;
  out.tag = wr.tm.add.tag;
  out.mask = wr.tm.add.mask;
  to_core(add ? wr.tm.add.sg_list : nullptr, add ? static_cast<std::size_t>(wr.tm.add.num_sge) : 0, out.sg_list);
  return 0;
}

ibv_wc to_ibv(const core::Wc& wc) {
  ibv_wc out{};
  out.wr_id = wc.wr_id;
  out.status = static_cast<ibv_wc_status>(wc.status);
  out.opcode = static_cast<ibv_wc_opcode>(wc.opcode);
  out.vendor_err = wc.vendor_err;
  out.byte_len = wc.byte_len;
  out.imm_data = wc.imm_data;  // or invalidated_rkey: the same union
  out.qp_num = wc.qp_num;
  out.src_qp = wc.src_qp;
  out.wc_flags = wc.wc_flags;
  out.pkey_index = wc.pkey_index;
  out.sl = wc.sl;
  return out;  // slid and dlid_path_bits stay 0: RoCE has no LIDs
}

core::AddressVector to_core(const ibv_ah_attr& ah) {
  core::AddressVector av;
  std::memcpy(av.dgid.data(), ah.grh.dgid.raw, av.dgid.size());
  av.sgid_index = ah.grh.sgid_index;
  av.flow_label = ah.grh.flow_label;
  av.hop_limit = ah.grh.hop_limit;
  av.traffic_class = ah.grh.traffic_class;
  av.sl = ah.sl;
  av.port_num = ah.port_num;
  return av;
}

ibv_ah_attr to_ibv(const core::AddressVector& av) {
  ibv_ah_attr ah{};
  std::memcpy(ah.grh.dgid.raw, av.dgid.data(), av.dgid.size());
  ah.grh.sgid_index = av.sgid_index;
  ah.grh.flow_label = av.flow_label;
  ah.grh.hop_limit = av.hop_limit;
  ah.grh.traffic_class = av.traffic_class;
  ah.is_global = 1;  // every RoCE address carries a GRH
  ah.sl = av.sl;
  ah.port_num = av.port_num;
  return ah;
}

core::QpCap to_core(const ibv_qp_cap& cap) {
  return {cap.max_send_wr, cap.max_recv_wr, cap.max_send_sge, cap.max_recv_sge, cap.max_inline_data};
}

ibv_qp_cap to_ibv(const core::QpCap& cap) {
  return {cap.max_send_wr, cap.max_recv_wr, cap.max_send_sge, cap.max_recv_sge, cap.max_inline_data};
}

namespace {

// The QP attributes that have the same name and meaning in ibv_qp_attr and core::QpAttr.
template <class From, class To>
void copy_same_named(const From& a, To& out) {
  out.qkey = a.qkey;
  out.rq_psn = a.rq_psn;
  out.sq_psn = a.sq_psn;
  out.dest_qp_num = a.dest_qp_num;
  out.pkey_index = a.pkey_index;
  out.en_sqd_async_notify = a.en_sqd_async_notify;
  out.max_rd_atomic = a.max_rd_atomic;
  out.max_dest_rd_atomic = a.max_dest_rd_atomic;
  out.min_rnr_timer = a.min_rnr_timer;
  out.port_num = a.port_num;
  out.timeout = a.timeout;
  out.retry_cnt = a.retry_cnt;
  out.rnr_retry = a.rnr_retry;
}

}  // namespace

core::QpAttr to_core(const ibv_qp_attr& a) {
  core::QpAttr out;
  copy_same_named(a, out);
  out.qp_state = static_cast<core::QpState>(bits_of(a.qp_state));
  out.cur_qp_state = static_cast<core::QpState>(bits_of(a.cur_qp_state));
  out.path_mtu = static_cast<core::Mtu>(bits_of(a.path_mtu));
  out.qp_access_flags = static_cast<std::uint32_t>(a.qp_access_flags);
  out.cap = to_core(a.cap);
  out.ah_attr = to_core(a.ah_attr);
  return out;
}

ibv_qp_attr to_ibv(const core::QpAttr& a) {
  ibv_qp_attr out{};
  copy_same_named(a, out);
  out.qp_state = static_cast<ibv_qp_state>(a.qp_state);
  out.cur_qp_state = static_cast<ibv_qp_state>(a.cur_qp_state);
  out.path_mtu = static_cast<ibv_mtu>(a.path_mtu);
  out.path_mig_state = IBV_MIG_MIGRATED;  // no alternate path (s17.2.8)
  out.qp_access_flags = static_cast<unsigned>(a.qp_access_flags);
  out.cap = to_ibv(a.cap);
  out.ah_attr = to_ibv(a.ah_attr);
  out.sq_draining = a.sq_draining ? 1 : 0;
  return out;
}

}  // namespace softrdma::shim
