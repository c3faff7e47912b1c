// The completer (IBTA vol. 1 s9.7.5.2 and s9.9): ACKs, NAKs, READ responses and atomic ACKs
// complete send WQEs in order; silence fires the retransmission timer. Go-back-N: every
// resend rewinds the requester to a PSN and it sends everything again from there, as fast as
// the loss window (below) lets it.
#include <algorithm>
#include <cstring>

#include "emulator/core/psn.hpp"
#include "emulator/core/rnr_timer.hpp"
#include "emulator/core/transport.hpp"

namespace softrdma::core {
namespace {

using wire::Ext;

std::size_t first_incomplete(const Qp& q) {
  std::size_t i = 0;
  while (i < q.sq.size() && q.sq[i].complete) ++i;
  return i;
}

bool outstanding(const Qp& q) {
  const std::size_t i = first_incomplete(q);
  return i < q.sq.size() && q.sq[i].started;
}

// Points the requester at `psn`: the WQE holding it is sent again from that packet on (a READ
// is asked again for the responses from there, s9.7.5.2.4).
void rewind(Qp& q, std::uint32_t psn) {
  for (std::size_t i = 0; i < q.sq.size(); ++i) {
    const SendWqe& w = q.sq[i];
    if (!w.started) break;
    if (w.complete) continue;
    const std::int32_t into = psn_diff(psn, w.first_psn);
    if (into >= 0 && static_cast<std::uint32_t>(into) < w.packets) {
      q.next_wqe = i;
      q.next_index = static_cast<std::uint32_t>(into);
      return;
    }
  }
}

// Congestion response, which IBTA leaves to the fabric (RoCE assumes a lossless one) and which
// a software device on a lossy path needs: a queue that dropped a window's packets drops
// them again when go-back-N resends the whole window at once (16 QPs into a 512-frame
// AF_PACKET ring sent three times their data, and now and then one QP ran out of retries).
// As TCP (RFC 5681 s3.1): a loss sets the threshold to half of what was out and the window
// to it (a sequence-error NAK) or to min_loss_window packets (a timeout). Below the threshold
// each acknowledged packet widens the window by one (slow start), above it by one per
// window's worth (congestion avoidance); at the device's own window the limit goes.
void shrink_window(const Device& d, Qp& q, bool timeout) {
  const std::uint32_t out = static_cast<std::uint32_t>(std::max(psn_diff(psn_add(q.max_sent_psn, 1), q.una_psn), 1));
  q.loss_threshold =
      std::max((q.loss_window != 0 ? std::min(q.loss_window, out) : out) / 2, d.config().min_loss_window);
  q.loss_window = timeout ? d.config().min_loss_window : q.loss_threshold;
  q.window_credit = 0;
}

// Moves the oldest unacknowledged PSN to `next`, widening a loss window by what it covered.
void advance_una(Qp& q, std::uint32_t next) {
  const auto acked = static_cast<std::uint32_t>(psn_diff(next, q.una_psn));
  q.una_psn = next;
  if (q.loss_window == 0) return;
  if (q.loss_window < q.loss_threshold) {
    q.loss_window = std::min(q.loss_window + acked, q.loss_threshold);
    return;
  }
  q.window_credit += acked;
  if (q.window_credit >= q.loss_window) {
    q.window_credit -= q.loss_window;
    ++q.loss_window;
  }
}

// An ACK for `psn` acknowledges every request packet up to it (s9.7.5.1.2). Completes the
// send and write WQEs it covers, in order, stopping at a READ or atomic, which only its
// response completes. Returns whether anything new was acknowledged.
bool acknowledge_through(Qp& q, std::uint32_t psn) {
  bool progress = false;
  for (SendWqe& w : q.sq) {
    if (w.complete) continue;
    if (!w.started || is_read_or_atomic(w.wr.opcode)) break;
    if (psn_diff(psn, psn_add(w.first_psn, w.packets - 1)) < 0) break;
    w.complete = true;
    progress = true;
  }
  const std::uint32_t next = psn_add(psn, 1);
  if (psn_diff(next, q.una_psn) > 0 && psn_diff(next, q.send_psn) <= 0) {
    advance_una(q, next);
    progress = true;
  }
  return progress;
}

// The READ or atomic at the head of the window, whose response the completer waits for.
SendWqe* waiting_response(Qp& q) {
  const std::size_t i = first_incomplete(q);
  if (i >= q.sq.size() || !q.sq[i].started || !is_read_or_atomic(q.sq[i].wr.opcode)) return nullptr;
  return &q.sq[i];
}

void on_progress(Device& d, Qp& q, Time now) {
  q.retry_left = q.attr.retry_cnt;  // the counters count consecutive failures (s9.7.6.1.3)
  q.rnr_left = q.attr.rnr_retry;
  if (q.loss_window >= d.config().max_inflight_packets) q.loss_window = 0;
  Completer::retire(d, q);
  if (q.state() == QpState::err) return;
  q.retransmit_at = outstanding(q) && q.attr.timeout ? now + ack_timeout(q.attr.timeout) : 0;
}

WcStatus nak_status(std::uint8_t code) {
  switch (static_cast<wire::NakCode>(code)) {
    case wire::NakCode::invalid_request:
      return WcStatus::rem_inv_req_err;
    case wire::NakCode::remote_access_error:
      return WcStatus::rem_access_err;
    case wire::NakCode::remote_operational_error:
      return WcStatus::rem_op_err;
    default:
      return WcStatus::bad_resp_err;
  }
}

void on_ack(Device& d, Qp& q, std::uint32_t psn, std::uint8_t syndrome, Time now) {
  switch (wire::ack_kind(syndrome)) {
    case wire::AckKind::ack: {
      const bool progress = acknowledge_through(q, psn);
      // An ACK beyond a READ or atomic whose response never came means the response was
      // lost: ask again (s9.7.5.2.3, "implied NAK").
      if (SendWqe* w = waiting_response(q); w && psn_diff(psn, w->first_psn) >= 0)
        rewind(q, psn_add(w->first_psn, q.read_received));
      if (progress) on_progress(d, q, now);
      return;
    }
    case wire::AckKind::rnr_nak: {
      // The responder had no receive WQE: wait the timer it asked for, then resend from the
      // NAKed PSN (s9.7.5.2.8). rnr_retry 7 means retry forever.
      acknowledge_through(q, psn_add(psn, kPsnMask));
      ++q.counters.rcvd_rnr_err;
      Completer::retire(d, q);
      const std::size_t i = first_incomplete(q);
      if (i >= q.sq.size()) return;
      if (q.rnr_left == 0) {
        ++q.counters.rnr_retry_exceeded_err;
        Completer::fail(d, q, q.sq[i], WcStatus::rnr_retry_exc_err);
        return;
      }
      if (q.rnr_left != 7) --q.rnr_left;
      rewind(q, psn);
      q.rnr_at = now + rnr_delay(wire::syndrome_value(syndrome));
      q.retransmit_at = 0;
      return;
    }
    case wire::AckKind::nak: {
      const std::uint8_t code = wire::syndrome_value(syndrome);
      // Everything before the NAKed PSN was received (s9.7.5.2.2).
      const bool progress = acknowledge_through(q, psn_add(psn, kPsnMask));
      if (code == static_cast<std::uint8_t>(wire::NakCode::psn_sequence_error)) {
        ++q.counters.rcvd_seq_err;
        shrink_window(d, q, false);
        Completer::retire(d, q);
        rewind(q, psn);
        if (progress) on_progress(d, q, now);
        return;
      }
      Completer::retire(d, q);
      const std::size_t i = first_incomplete(q);
      if (i < q.sq.size()) Completer::fail(d, q, q.sq[i], nak_status(code));
      return;
    }
    case wire::AckKind::reserved:
      return;
  }
}

void on_read_response(Device& d, Qp& q, const wire::IbPacket& p, Time now) {
  const std::uint32_t psn = p.psn();
  // A response also acknowledges the requests before it (s9.7.5.1.2).
  bool progress = acknowledge_through(q, psn_add(psn, kPsnMask));
  Completer::retire(d, q);
  SendWqe* w = waiting_response(q);
  if (!w || w->wr.opcode != WrOpcode::rdma_read) return;
  const std::uint32_t expected = psn_add(w->first_psn, q.read_received);
  if (psn != expected) {
    // A gap: go back once to the first missing response; older ones are duplicates.
    if (psn_diff(psn, expected) > 0 && !q.rewound_for_gap) {
      rewind(q, expected);
      q.rewound_for_gap = true;
    }
    return;
  }
  q.rewound_for_gap = false;
  const wire::OpcodeInfo& oi = p.info();
  const bool first = q.read_received == 0, last = q.read_received + 1 == w->packets;
  const std::uint32_t mtu = mtu_bytes(q.attr.path_mtu);
  const std::uint64_t offset = std::uint64_t{q.read_received} * mtu;
  const std::uint64_t want = std::min<std::uint64_t>(mtu, w->length - offset);
  if (oi.is(wire::OpFlag::first) != first || oi.is(wire::OpFlag::last) != last || p.payload().size() != want) {
    Completer::fail(d, q, *w, WcStatus::bad_resp_err);  // not the response this READ needs (s9.7.5.2.6)
    return;
  }
  if (!d.scatter(w->wr.sg_list, q.init.pd, offset, p.payload())) {
    Completer::fail(d, q, *w, WcStatus::loc_prot_err);
    return;
  }
  ++q.read_received;
  advance_una(q, psn_add(psn, 1));
  progress = true;
  if (last) {
    w->complete = true;
    q.read_received = 0;
    --q.rd_atomic_in_flight;
  }
  if (progress) on_progress(d, q, now);
}

void on_atomic_ack(Device& d, Qp& q, const wire::IbPacket& p, Time now) {
  const std::uint32_t psn = p.psn();
  acknowledge_through(q, psn_add(psn, kPsnMask));
  Completer::retire(d, q);
  SendWqe* w = waiting_response(q);
  if (!w || w->wr.opcode == WrOpcode::rdma_read || w->first_psn != psn) return;  // stale or duplicate
  // The original value lands in the local buffer as a host-order 64-bit word.
  const std::uint64_t original = wire::AtomicAckEth::original_data::get(p.ext(Ext::atomicacketh));
  std::uint8_t bytes[8];
  std::memcpy(bytes, &original, sizeof bytes);
  if (!d.scatter(w->wr.sg_list, q.init.pd, 0, bytes)) {
    Completer::fail(d, q, *w, WcStatus::loc_prot_err);
    return;
  }
  w->complete = true;
  advance_una(q, psn_add(psn, 1));
  --q.rd_atomic_in_flight;
  on_progress(d, q, now);
}

}  // namespace

void Completer::on_response(Device& d, Qp& q, const wire::IbPacket& p, Time now) {
  if (!is_reliable(q.init.qp_type) || !has_requester(q.init.qp_type) ||
      (q.state() != QpState::rts && q.state() != QpState::sqd))
    return;
  const wire::OpcodeInfo& oi = p.info();
  if (oi.is(wire::OpFlag::read)) {
    on_read_response(d, q, p, now);
  } else if (oi.has(Ext::atomicacketh)) {
    on_atomic_ack(d, q, p, now);
  } else {
    on_ack(d, q, p.psn(), wire::Aeth::syndrome::get(p.ext(Ext::aeth)), now);
  }
}

void Completer::on_timer(Device& d, Qp& q, Time now) {
  if (q.rnr_at != 0 && now >= q.rnr_at) {
    q.rnr_at = 0;  // the requester resumes from where the RNR NAK rewound it
    if (q.attr.timeout) q.retransmit_at = now + ack_timeout(q.attr.timeout);
  }
  if (q.retransmit_at == 0 || now < q.retransmit_at) return;
  q.retransmit_at = 0;
  const std::size_t i = first_incomplete(q);
  if (i >= q.sq.size() || !q.sq[i].started) return;
  ++q.counters.local_ack_timeout_err;
  if (q.retry_left == 0) {
    ++q.counters.retry_exceeded_err;
    fail(d, q, q.sq[i], WcStatus::retry_exc_err);  // s9.7.6.1.3
    return;
  }
  --q.retry_left;
  shrink_window(d, q, true);
  const SendWqe& w = q.sq[i];
  rewind(q, is_read_or_atomic(w.wr.opcode) ? psn_add(w.first_psn, q.read_received)
                                           : (psn_diff(q.una_psn, w.first_psn) > 0 ? q.una_psn : w.first_psn));
  q.retransmit_at = now + ack_timeout(q.attr.timeout);
}

void Completer::retire(Device& d, Qp& q) {
  while (!q.sq.empty() && q.sq.front().complete) {
    const SendWqe& w = q.sq.front();
    const bool failed = w.status != WcStatus::success;
    if (w.internal) {
      if (w.rendezvous) {
        const Rendezvous r = *w.rendezvous;  // the FIN it queues may move the queue
        TagReceiver::finish_rendezvous(d, q, r, w.status, true);
      }
    } else if (w.signaled || failed) {
      Wc wc;
      wc.wr_id = w.wr.wr_id;
      wc.status = w.status;
      wc.opcode = wc_opcode(w.wr.opcode);
      wc.byte_len = static_cast<std::uint32_t>(w.length);
      wc.qp_num = q.qpn;
      d.complete(q.init.send_cq, wc, false);
    }
    q.sq.pop_front();
    // The requester's place moves with the queue; if it was resending the WQE just retired
    // (an ACK for the first transmission came late), it starts the next one afresh.
    if (q.next_wqe > 0)
      --q.next_wqe;
    else
      q.next_index = 0;
    if (failed) {
      d.enter_send_error(q);
      return;
    }
  }
  note_if_drained(d, q);
}

void Completer::note_if_drained(Device& d, Qp& q) {
  // SQD: once nothing started is outstanding the send queue is drained; the consumer asked
  // for an event with en_sqd_async_notify (s11.6.3, SQ Drained).
  if (q.state() != QpState::sqd || !q.attr.sq_draining || outstanding(q)) return;
  q.attr.sq_draining = false;
  if (q.attr.en_sqd_async_notify) d.raise(AsyncEventType::sq_drained, q.qpn);
}

void Completer::fail(Device& d, Qp& q, SendWqe& w, WcStatus status) {
  if (w.started && is_read_or_atomic(w.wr.opcode) && !w.complete) --q.rd_atomic_in_flight;
  w.complete = true;
  w.status = status;
  retire(d, q);
  if (q.state() != QpState::err && q.state() != QpState::sqe) d.enter_send_error(q);
}

}  // namespace softrdma::core
