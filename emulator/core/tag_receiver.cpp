// Tag matching at the device (tag_matching.hpp): the list operations of ibv_post_srq_ops, and
// how a SEND that reaches a tag-matching SRQ is received.
#include <algorithm>
#include <cerrno>

#include "emulator/core/receive_queue.hpp"
#include "emulator/core/transport.hpp"

namespace softrdma::core {
namespace {

// A tagged buffer's completion. The tag and app context go with the match; a later completion
// for the same buffer reports only its data, as ConnectX's do (rdma-core's test_tag_matching
// expects no tag there).
Wc tagged_wc(const Qp& q, std::uint64_t wr_id, const Tmh& tmh, std::uint32_t flags) {
  Wc wc;
  wc.wr_id = wr_id;
  wc.opcode = WcOpcode::tm_recv;
  wc.qp_num = q.qpn;
  wc.wc_flags = flags;
  if (flags & wc_flags::tm_match) {
    wc.tm_tag = tmh.tag;
    wc.tm_priv = tmh.app_ctx;
  }
  return wc;
}

// A matched rendezvous request (tag_matching.md): the device READs the sender's data into the
// tagged buffer, on the QP's send queue, which the TM-SRQ owns for this. A buffer too small
// for the data gets the request itself instead, completed as RNDV_INCOMPLETE, and software
// finishes the transfer.
void start_rendezvous(Device& d, Qp& q, const Srq& srq, RecvWqe buffer, const TmDecision& how,
                      std::span<const std::uint8_t> request) {
  Wc matched = tagged_wc(q, buffer.wr.wr_id, how.tmh, wc_flags::tm_match);
  if (how.rvh.length > buffer.length) {
    matched.status =
        d.scatter(buffer.wr.sg_list, srq.pd, 0, request) ? WcStatus::tm_rndv_incomplete : WcStatus::loc_prot_err;
    matched.byte_len = static_cast<std::uint32_t>(request.size());
    d.complete(srq.cq, matched, false);
    return;
  }
  d.complete(srq.cq, matched, false);
  SendWqe read;
  read.wr.opcode = WrOpcode::rdma_read;
  read.wr.sg_list = std::move(buffer.wr.sg_list);
  read.wr.remote_addr = how.rvh.va;
  read.wr.rkey = how.rvh.rkey;
  read.length = how.rvh.length;
  read.internal = true;
  Rendezvous& r = read.rendezvous.emplace();
  r.cq = srq.cq;
  r.recv_wr_id = buffer.wr.wr_id;
  r.length = how.rvh.length;
  std::copy_n(request.begin(), r.fin.size(), r.fin.begin());
  r.fin[0] = static_cast<std::uint8_t>(TmhOp::fin);  // the FIN repeats the request's headers
  q.sq.push_back(std::move(read));
  d.wake(q);
}

}  // namespace

Srq* TagReceiver::srq_of(Device& d, const Qp& q) {
  Srq* srq = q.target.srq ? d.find_srq(q.target.srq) : nullptr;
  return srq && srq->tm ? srq : nullptr;
}

bool TagReceiver::can_receive(Device& d, Srq& srq, std::span<const std::uint8_t> first, bool whole) {
  const TmRoute route = route_message(*srq.tm, first, whole, d.tm_caps().max_rndv_hdr_size).route;
  return route == TmRoute::eager || route == TmRoute::rendezvous || !srq.queue.empty();
}

bool TagReceiver::start(Device& d, Qp& q, Srq& srq, std::span<const std::uint8_t> first, bool whole) {
  TagMatching& tm = *srq.tm;
  const TmDecision how = route_message(tm, first, whole, d.tm_caps().max_rndv_hdr_size);
  q.recv_tm = TmReceive{};
  switch (how.route) {
    case TmRoute::no_tag:
      q.recv_tm.opcode = WcOpcode::tm_no_tag;
      break;
    case TmRoute::unexpected:
      // Delivered whole into an ordinary WQE; matching stops until software says it has
      // handled this one (tag_matching.md, the unexpected message count).
      ++tm.unexpected;
      q.recv_tm.opcode = WcOpcode::tm_recv;
      break;
    case TmRoute::eager:
      q.recv = take_tag(tm, how.handle);
      q.recv_tm = {WcOpcode::tm_recv, wc_flags::tm_data_valid, kTmhLength, how.tmh};
      // One completion for a one-packet message; a longer one reports the match at once and
      // its data at its end (tag_matching.md, "TM completion processing").
      if (whole) {
        q.recv_tm.last_flags |= wc_flags::tm_match;
      } else {
        d.complete(srq.cq, tagged_wc(q, q.recv.wr.wr_id, how.tmh, wc_flags::tm_match), false);
      }
      return true;
    case TmRoute::rendezvous:
      start_rendezvous(d, q, srq, take_tag(tm, how.handle), how, first);
      return false;
  }
  q.recv = std::move(*take_recv(d, q));
  return true;
}

void TagReceiver::finish_rendezvous(Device& d, Qp& q, const Rendezvous& r, WcStatus status, bool send_fin) {
  Wc wc = tagged_wc(q, r.recv_wr_id, Tmh{}, status == WcStatus::success ? wc_flags::tm_data_valid : 0);
  wc.status = status;
  wc.byte_len = status == WcStatus::success ? r.length : 0;
  d.complete(r.cq, wc, false);
  if (status != WcStatus::success || !send_fin) return;
  SendWqe fin;
  fin.wr.opcode = WrOpcode::send;
  fin.wr.flags = send_flags::inline_data;
  fin.wr.inline_data.assign(r.fin.begin(), r.fin.end());
  fin.length = r.fin.size();
  fin.internal = true;
  q.sq.push_back(std::move(fin));
  d.wake(q);
}

// --- ibv_post_srq_ops --------------------------------------------------------------------

int Device::post_srq_ops(std::uint32_t srq, SrqOp& op) {
  Srq* s = srqs_.find(srq);
  if (!s || !s->tm) return EINVAL;
  TagMatching& tm = *s->tm;
  Wc wc;
  wc.wr_id = op.wr_id;
  switch (op.opcode) {
    case SrqOpcode::tag_add: {
      if (op.sg_list.empty() || op.sg_list.size() > tm_caps().max_sge) return EINVAL;
      const auto handle = add_tag(tm, op, sge_total(op.sg_list));
      if (!handle) return ENOMEM;
      op.handle = *handle;
      wc.opcode = WcOpcode::tm_add;
      break;
    }
    case SrqOpcode::tag_del:
      if (op.handle >= tm.entries.size()) return EINVAL;
      // A tag a message consumed meanwhile cannot be deleted (ibv_post_srq_ops(3)).
      if (!remove_tag(tm, op.handle)) wc.status = WcStatus::tm_err;
      wc.opcode = WcOpcode::tm_del;
      break;
    case SrqOpcode::tag_sync:
      wc.opcode = WcOpcode::tm_sync;
      break;
    default:
      return EINVAL;
  }
  if (op.flags & srq_op_flags::tm_sync) tm.reported = op.unexpected_cnt;
  if (!(op.flags & srq_op_flags::signaled)) return 0;
  // The operation was posted knowing fewer unexpected messages than were delivered: software
  // must catch up and report its count (ibv_post_srq_ops(3), IBV_WC_TM_SYNC_REQ).
  if (op.unexpected_cnt != tm.unexpected) wc.wc_flags |= wc_flags::tm_sync_req;
  complete(s->cq, wc, false);
  return 0;
}

}  // namespace softrdma::core
