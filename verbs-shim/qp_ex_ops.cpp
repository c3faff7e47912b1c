// The extended send API (ibv_wr_start ... ibv_wr_complete, verbs.h's ibv_wr_* inlines call
// these through ibv_qp_ex). A batch of work requests is built in the shim and handed to the
// engine in one call at ibv_wr_complete, so a batch is posted whole or, when building it went
// wrong, not at all.
#include <cstring>

#include "verbs-shim/convert.hpp"
#include "verbs-shim/host_link.hpp"
#include "verbs-shim/ops.hpp"

namespace softrdma::shim {

namespace {

// A new WR carrying the wr_id and flags the application wrote into the ibv_qp_ex.
core::SendWr& begin(ibv_qp_ex* qpx, core::WrOpcode opcode) {
  Qp& q = qp_of(qpx);
  core::SendWr& w = q.batch.emplace_back();
  w.wr_id = qpx->wr_id;
  w.opcode = opcode;
  w.flags = qpx->wr_flags & (IBV_SEND_FENCE | IBV_SEND_SIGNALED | IBV_SEND_SOLICITED | IBV_SEND_INLINE);
  return w;
}

// A setter called with no WR begun, or an operation the QP was not created for, spoils the
// batch: ibv_wr_complete reports it.
core::SendWr* last(ibv_qp_ex* qpx) {
  Qp& q = qp_of(qpx);
  if (q.batch.empty()) {
    q.batch_error = EINVAL;
    return nullptr;
  }
  return &q.batch.back();
}

void fail(ibv_qp_ex* qpx, int err) {
  Qp& q = qp_of(qpx);
  if (q.batch_error == 0) q.batch_error = err;
}

void remote(core::SendWr& w, std::uint32_t rkey, std::uint64_t remote_addr) {
  w.rkey = rkey;
  w.remote_addr = remote_addr;
}

void wr_atomic_cmp_swp(ibv_qp_ex* qpx, std::uint32_t rkey, std::uint64_t remote_addr, std::uint64_t compare,
                       std::uint64_t swap) {
  core::SendWr& w = begin(qpx, core::WrOpcode::atomic_cmp_and_swp);
  remote(w, rkey, remote_addr);
  w.compare_add = compare;
  w.swap = swap;
}

void wr_atomic_fetch_add(ibv_qp_ex* qpx, std::uint32_t rkey, std::uint64_t remote_addr, std::uint64_t add) {
  core::SendWr& w = begin(qpx, core::WrOpcode::atomic_fetch_and_add);
  remote(w, rkey, remote_addr);
  w.compare_add = add;
}

// The 8 bytes are read now, as inline data is (verbs.h: the buffer may be reused on return).
void wr_atomic_write(ibv_qp_ex* qpx, std::uint32_t rkey, std::uint64_t remote_addr, const void* atomic_wr) {
  core::SendWr& w = begin(qpx, core::WrOpcode::atomic_write);
  remote(w, rkey, remote_addr);
  std::memcpy(&w.compare_add, atomic_wr, sizeof w.compare_add);
}

void wr_bind_mw(ibv_qp_ex* qpx, ibv_mw* mw, std::uint32_t rkey, const ibv_mw_bind_info* info) {
  core::SendWr& w = begin(qpx, core::WrOpcode::bind_mw);
  w.mw_rkey = mw->rkey;
  w.bind_new_rkey = rkey;
  w.bind_mr_lkey = info->mr != nullptr ? info->mr->lkey : 0;
  w.bind_addr = info->addr;
  w.bind_length = info->length;
  w.bind_access = info->mw_access_flags;
}

void wr_local_inv(ibv_qp_ex* qpx, std::uint32_t invalidate_rkey) {
  begin(qpx, core::WrOpcode::local_inv).invalidate_rkey = invalidate_rkey;
}

void wr_rdma_read(ibv_qp_ex* qpx, std::uint32_t rkey, std::uint64_t remote_addr) {
  remote(begin(qpx, core::WrOpcode::rdma_read), rkey, remote_addr);
}

void wr_rdma_write(ibv_qp_ex* qpx, std::uint32_t rkey, std::uint64_t remote_addr) {
  remote(begin(qpx, core::WrOpcode::rdma_write), rkey, remote_addr);
}

void wr_rdma_write_imm(ibv_qp_ex* qpx, std::uint32_t rkey, std::uint64_t remote_addr, __be32 imm) {
  core::SendWr& w = begin(qpx, core::WrOpcode::rdma_write_with_imm);
  remote(w, rkey, remote_addr);
  w.imm_data = imm;
}

void wr_send(ibv_qp_ex* qpx) { begin(qpx, core::WrOpcode::send); }
void wr_send_imm(ibv_qp_ex* qpx, __be32 imm) { begin(qpx, core::WrOpcode::send_with_imm).imm_data = imm; }
void wr_send_inv(ibv_qp_ex* qpx, std::uint32_t invalidate_rkey) {
  begin(qpx, core::WrOpcode::send_with_inv).invalidate_rkey = invalidate_rkey;
}

// Not offered (create refuses their send_ops_flags); reached only through a misbehaving caller.
void wr_send_tso(ibv_qp_ex* qpx, void*, std::uint16_t, std::uint16_t) { fail(qpx, EOPNOTSUPP); }

// The peer's XRC SRQ an XRC initiator's WR lands in (XRCETH, IBTA vol. 1 annex A14).
void wr_set_xrc_srqn(ibv_qp_ex* qpx, std::uint32_t remote_srqn) {
  if (qpx->qp_base.qp_type != IBV_QPT_XRC_SEND) return fail(qpx, EINVAL);
  if (core::SendWr* w = last(qpx)) w->xrc_remote_srq = remote_srqn;
}

void wr_set_ud_addr(ibv_qp_ex* qpx, ibv_ah* ah, std::uint32_t remote_qpn, std::uint32_t remote_qkey) {
  if (core::SendWr* w = last(qpx)) {
    w->ah = ah != nullptr ? ah->handle : 0;
    w->remote_qpn = remote_qpn;
    w->remote_qkey = remote_qkey;
  }
}

void wr_set_sge(ibv_qp_ex* qpx, std::uint32_t lkey, std::uint64_t addr, std::uint32_t length) {
  if (core::SendWr* w = last(qpx)) w->sg_list.assign(1, core::Sge{addr, length, lkey});
}

void wr_set_sge_list(ibv_qp_ex* qpx, std::size_t num_sge, const ibv_sge* sg_list) {
  if (core::SendWr* w = last(qpx)) to_core(sg_list, num_sge, w->sg_list);
}

// Inline data is copied now: the buffers are the application's again when the setter returns.
void wr_set_inline_data_list(ibv_qp_ex* qpx, std::size_t num_buf, const ibv_data_buf* bufs) {
  core::SendWr* w = last(qpx);
  if (w == nullptr) return;
  w->flags |= core::send_flags::inline_data;
  w->sg_list.clear();
  w->inline_data.clear();
  for (std::size_t i = 0; i < num_buf; ++i) {
    const auto* p = static_cast<const std::uint8_t*>(bufs[i].addr);
    w->inline_data.insert(w->inline_data.end(), p, p + bufs[i].length);
  }
}

void wr_set_inline_data(ibv_qp_ex* qpx, void* addr, std::size_t length) {
  const ibv_data_buf buf{addr, length};
  wr_set_inline_data_list(qpx, 1, &buf);
}

void wr_start(ibv_qp_ex* qpx) {
  Qp& q = qp_of(qpx);
  q.batch.clear();
  q.batch_error = 0;
}

int wr_complete(ibv_qp_ex* qpx) {
  Qp& q = qp_of(qpx);
  int err = q.batch_error;
  if (err == 0) {
    std::size_t posted = 0;
    err = link(q.ex.qp_base.context).post_send(q.ex.qp_base.qp_num, q.batch, posted);
  }
  wr_start(qpx);
  return err;
}

void wr_abort(ibv_qp_ex* qpx) { wr_start(qpx); }

}  // namespace

void install_send_ops(Qp& q) {
  ibv_qp_ex& ex = q.ex;
  ex.comp_mask = 0;
  ex.wr_atomic_cmp_swp = wr_atomic_cmp_swp;
  ex.wr_atomic_fetch_add = wr_atomic_fetch_add;
  ex.wr_bind_mw = wr_bind_mw;
  ex.wr_local_inv = wr_local_inv;
  ex.wr_rdma_read = wr_rdma_read;
  ex.wr_rdma_write = wr_rdma_write;
  ex.wr_rdma_write_imm = wr_rdma_write_imm;
  ex.wr_send = wr_send;
  ex.wr_send_imm = wr_send_imm;
  ex.wr_send_inv = wr_send_inv;
  ex.wr_send_tso = wr_send_tso;
  ex.wr_set_ud_addr = wr_set_ud_addr;
  ex.wr_set_xrc_srqn = wr_set_xrc_srqn;
  ex.wr_set_inline_data = wr_set_inline_data;
  ex.wr_set_inline_data_list = wr_set_inline_data_list;
  ex.wr_set_sge = wr_set_sge;
  ex.wr_set_sge_list = wr_set_sge_list;
  ex.wr_start = wr_start;
  ex.wr_complete = wr_complete;
  ex.wr_abort = wr_abort;
  ex.wr_atomic_write = wr_atomic_write;
}

}  // namespace softrdma::shim
