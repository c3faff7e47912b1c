// The requester (IBTA vol. 1 s9.7.4): segments send WQEs into request packets by path MTU,
// numbers them with PSNs, asks for ACKs, and resends from wherever the completer rewinds it.
#include <algorithm>
#include <cstring>

#include "emulator/core/psn.hpp"
#include "emulator/core/rnr_timer.hpp"
#include "emulator/core/transport.hpp"

namespace softrdma::core {
namespace {

using wire::Operation;

Operation operation_for(WrOpcode op, bool first, bool last) {
  const auto pick = [&](Operation only, Operation f, Operation middle, Operation l) {
    return first && last ? only : first ? f : last ? l : middle;
  };
  switch (op) {
    case WrOpcode::send:
      return pick(Operation::send_only, Operation::send_first, Operation::send_middle, Operation::send_last);
    case WrOpcode::send_with_imm:
      return pick(Operation::send_only_imm, Operation::send_first, Operation::send_middle, Operation::send_last_imm);
    case WrOpcode::send_with_inv:
      return pick(Operation::send_only_inv, Operation::send_first, Operation::send_middle, Operation::send_last_inv);
    case WrOpcode::rdma_write:
      return pick(Operation::write_only, Operation::write_first, Operation::write_middle, Operation::write_last);
    case WrOpcode::rdma_write_with_imm:
      return pick(Operation::write_only_imm, Operation::write_first, Operation::write_middle,
                  Operation::write_last_imm);
    case WrOpcode::rdma_read:
      return Operation::read_request;
    case WrOpcode::atomic_cmp_and_swp:
      return Operation::compare_swap;
    case WrOpcode::atomic_fetch_and_add:
      return Operation::fetch_add;
    case WrOpcode::atomic_write:
      return Operation::atomic_write;
    case WrOpcode::local_inv:
    case WrOpcode::bind_mw:
      break;
  }
  return Operation::send_only;
}

bool is_local(WrOpcode op) { return op == WrOpcode::local_inv || op == WrOpcode::bind_mw; }

// PSNs the WQE uses: one per packet, and for a READ one per response packet (s9.7.1).
std::uint32_t packets_for(const SendWqe& w, std::uint32_t mtu) {
  if (w.wr.opcode == WrOpcode::atomic_cmp_and_swp || w.wr.opcode == WrOpcode::atomic_fetch_and_add) return 1;
  return std::max<std::uint32_t>(1, static_cast<std::uint32_t>((w.length + mtu - 1) / mtu));
}

// Where the next packet of `w` falls in the loss window. After a loss only loss_window packets
// from the oldest unacknowledged one may be out, and the last of them asks for the ACK that
// opens the window again (see completer.cpp).
struct LossWindowSlot {
  bool open = true;   // the packet may go
  bool edge = false;  // it is the window's last
};

LossWindowSlot loss_window_slot(const Qp& q, const SendWqe& w) {
  if (q.loss_window == 0) return {};
  const std::int32_t ahead = psn_diff(w.started ? psn_add(w.first_psn, q.next_index) : q.send_psn, q.una_psn);
  if (ahead >= static_cast<std::int32_t>(q.loss_window)) return {.open = false};
  return {.edge = static_cast<std::uint32_t>(ahead) + 1 == q.loss_window};
}

// Whether the send queue's ordering rules let `w`, not yet started, start now.
bool may_start(const Device& d, const Qp& q, const SendWqe& w, bool draining) {
  if (draining) return false;
  // A fenced WQE waits for every READ and atomic before it (s10.8.3.3); READs and
  // atomics in flight are bounded by max_rd_atomic (s9.7.4.1.4).
  if ((w.wr.flags & send_flags::fence) && q.rd_atomic_in_flight > 0) return false;
  if (is_read_or_atomic(w.wr.opcode) && q.rd_atomic_in_flight >= std::max<std::uint8_t>(q.attr.max_rd_atomic, 1))
    return false;
  // The device's window: max_inflight_packets PSNs from the oldest WQE's first on.
  if (!q.sq.empty() && q.sq.front().started &&
      static_cast<std::uint32_t>(psn_diff(q.send_psn, q.sq.front().first_psn)) >= d.config().max_inflight_packets)
    return false;
  return true;
}

// The error `w` fails with before it is sent, if its length does not fit its operation.
std::optional<WcStatus> local_length_error(const Qp& q, const SendWqe& w, std::uint32_t mtu) {
  // One UD message is one packet (s9.8.2).
  if (q.init.qp_type == QpType::ud && w.length > mtu) return WcStatus::loc_len_err;
  // Atomics move one aligned 8-byte word.
  const bool atomic =
      (is_read_or_atomic(w.wr.opcode) && w.wr.opcode != WrOpcode::rdma_read) || w.wr.opcode == WrOpcode::atomic_write;
  if (atomic && (w.length < 8 || w.wr.remote_addr % 8 != 0)) return WcStatus::loc_len_err;
  return std::nullopt;
}

// `w` takes its PSNs, and a READ or atomic one of the max_rd_atomic slots.
void start_wqe(Qp& q, SendWqe& w, std::uint32_t mtu) {
  w.started = true;
  w.first_psn = q.send_psn;
  w.packets = packets_for(w, mtu);
  q.send_psn = psn_add(q.send_psn, w.packets);
  q.next_index = 0;
  if (is_read_or_atomic(w.wr.opcode)) ++q.rd_atomic_in_flight;
}

// Packet `q.next_index` of `w`: its PSN, place in the message and payload.
struct PacketPlan {
  std::uint32_t psn = 0;
  bool read = false;
  bool atomic = false;
  bool first = false;
  bool last = false;
  std::uint64_t offset = 0;  // of its payload in the message
  std::uint32_t payload = 0;
};

PacketPlan plan_packet(const Qp& q, const SendWqe& w, std::uint32_t mtu) {
  const std::uint32_t index = q.next_index;
  PacketPlan p;
  p.psn = psn_add(w.first_psn, index);
  p.read = w.wr.opcode == WrOpcode::rdma_read;
  p.atomic = is_read_or_atomic(w.wr.opcode) && !p.read;
  p.first = index == 0;
  p.last = p.read || p.atomic || index + 1 == w.packets;
  p.offset = std::uint64_t{index} * mtu;
  p.payload = p.read || p.atomic ? 0 : static_cast<std::uint32_t>(std::min<std::uint64_t>(mtu, w.length - p.offset));
  return p;
}

struct RequestHeaders {
  wire::IbRepr ib;
  const AddressVector* route = nullptr;  // the QP's path, or for UD the WR's AH
};

// The headers of the packet `p` describes, and where it goes. An RC packet that asks for an
// ACK restarts the count towards the next AckReq.
RequestHeaders request_headers(const Device& d, Qp& q, const SendWqe& w, const PacketPlan& p, bool window_edge) {
  RequestHeaders out;
  out.route = &q.attr.ah_attr;
  wire::IbRepr& h = out.ib;
  h.opcode = wire::opcode(transport_of(q.init.qp_type), operation_for(w.wr.opcode, p.first, p.last));
  h.mig_req = true;  // APM: the path is migrated, as every QP starts (s9.2.3, ibv path_mig_state)
  h.dest_qp = q.attr.dest_qp_num;
  h.psn = p.psn;
  // SE only where the responder completes a receive: SEND and WRITE with immediate (s9.2.2, as rxe).
  h.solicited_event = p.last && (w.wr.flags & send_flags::solicited) &&
                      (wire::info(h.opcode).is(wire::OpFlag::send) || wire::info(h.opcode).is(wire::OpFlag::immediate));
  if (q.init.qp_type == QpType::ud) {
    out.route = &w.ud_route;
    h.dest_qp = w.wr.remote_qpn;
    // A Q_Key with its high bit set means "use the QP's own" (s10.2.5).
    h.qkey = (w.wr.remote_qkey & 0x80000000u) ? q.attr.qkey : w.wr.remote_qkey;
    h.src_qp = q.qpn;
  }
  // XRCETH: the peer's XRC SRQ that takes the message (annex A14).
  if (q.init.qp_type == QpType::xrc_send) h.xrc_srq = w.wr.xrc_remote_srq;
  if (is_reliable(q.init.qp_type)) {
    // AckReq on a message's last packet and periodically within long ones (s9.7.4.1.3).
    h.ack_req = p.last || window_edge || ++q.packets_since_ack_req >= d.config().ack_req_every;
    if (h.ack_req) q.packets_since_ack_req = 0;
  }
  h.va = w.wr.remote_addr + (p.read ? p.offset : 0);
  h.rkey = w.wr.rkey;
  h.dma_length = static_cast<std::uint32_t>(p.read ? w.length - p.offset : w.length);
  h.imm = imm_number(w.wr.imm_data);
  h.invalidate_rkey = w.wr.invalidate_rkey;
  if (w.wr.opcode == WrOpcode::atomic_cmp_and_swp) {
    h.swap_add = w.wr.swap;
    h.compare = w.wr.compare_add;
  } else {
    h.swap_add = w.wr.compare_add;
  }
  return out;
}

// The packet itself: headers, payload from the inline data or the SGEs, pad and ICRC; none
// when an SGE's lkey or range is bad.
std::optional<TxPacket> assemble_packet(Device& d, const Qp& q, const SendWqe& w, const PacketPlan& p,
                                        const RequestHeaders& headers) {
  TxPacket pkt = d.packet_to(q, *headers.route);
  const std::size_t pad = wire::IbRepr::pad_for(p.payload);
  const std::size_t header = wire::info(headers.ib.opcode).header_length;
  pkt.bytes.resize(header + p.payload + pad + wire::kIcrcLength);
  headers.ib.emit_headers(pkt.bytes.data(), p.payload);
  const std::span<std::uint8_t> body(pkt.bytes.data() + header, p.payload);
  if (w.wr.opcode == WrOpcode::atomic_write) {
    std::memcpy(body.data(), &w.wr.compare_add, sizeof w.wr.compare_add);
  } else if (w.wr.flags & send_flags::inline_data) {
    // An empty inline message has no bytes to copy, and no buffer to copy them from.
    if (p.payload != 0) std::memcpy(body.data(), w.wr.inline_data.data() + p.offset, p.payload);
  } else if (!d.gather(w.wr.sg_list, q.init.pd, p.offset, body)) {
    return std::nullopt;
  }
  std::memset(pkt.bytes.data() + header + p.payload, 0, pad + wire::kIcrcLength);
  d.finish(pkt);
  return pkt;
}

// The packet `p` describes is out: counters, the highest PSN sent, the position of the next
// packet, and the retransmission timer.
void account_sent(Device& d, Qp& q, SendWqe& w, const PacketPlan& p, std::size_t bytes, Time now) {
  ++q.counters.sent_pkts;
  q.counters.sent_bytes += bytes;
  // A READ request stands for every PSN of its responses (s9.7.1): one that restarts a READ
  // from a later PSN resends it too.
  const std::uint32_t last_psn = p.read ? psn_add(w.first_psn, w.packets - 1) : p.psn;
  if (psn_diff(p.psn, q.max_sent_psn) <= 0 && q.sent_any) ++q.counters.retransmitted_pkts;
  if (psn_diff(last_psn, q.max_sent_psn) > 0 || !q.sent_any) q.max_sent_psn = last_psn;
  q.sent_any = true;

  ++q.next_index;
  if (p.last || p.read) {
    ++q.next_wqe;
    q.next_index = 0;
    // UC and UD have no acknowledgements: a WQE is done once its last packet is out.
    if (!is_reliable(q.init.qp_type)) {
      w.complete = true;
      Completer::retire(d, q);
    }
  }
  if (is_reliable(q.init.qp_type) && q.retransmit_at == 0 && q.attr.timeout != 0)
    q.retransmit_at = now + ack_timeout(q.attr.timeout);
}

}  // namespace

WcOpcode wc_opcode(WrOpcode op) {
  switch (op) {
    case WrOpcode::rdma_write:
    case WrOpcode::rdma_write_with_imm:
      return WcOpcode::rdma_write;
    case WrOpcode::rdma_read:
      return WcOpcode::rdma_read;
    case WrOpcode::atomic_cmp_and_swp:
      return WcOpcode::comp_swap;
    case WrOpcode::atomic_fetch_and_add:
      return WcOpcode::fetch_add;
    case WrOpcode::atomic_write:
      return WcOpcode::atomic_write;
    case WrOpcode::local_inv:
      return WcOpcode::local_inv;
    case WrOpcode::bind_mw:
      return WcOpcode::bind_mw;
    case WrOpcode::send:
    case WrOpcode::send_with_imm:
    case WrOpcode::send_with_inv:
      break;
  }
  return WcOpcode::send;
}

bool is_read_or_atomic(WrOpcode op) {
  return op == WrOpcode::rdma_read || op == WrOpcode::atomic_cmp_and_swp || op == WrOpcode::atomic_fetch_and_add;
}

void Requester::execute_local(Device& d, Qp& q, SendWqe& w) {
  w.complete = true;
  if (w.wr.opcode == WrOpcode::local_inv) {
    if (!d.invalidate(q.init.pd, w.wr.invalidate_rkey)) w.status = WcStatus::loc_prot_err;  // LOCAL_INV, s10.6.5
    return;
  }
  // BIND_MW (s10.6.7.2): the window takes a range of a bound-capable MR, with access no wider
  // than the MR allows, and a new rkey whose low byte the consumer chose.
  // The window is named by its index, whatever key byte it carries now (as dealloc_mw).
  Region* mw = d.region_at(w.wr.mw_rkey >> 8);
  Region* mr = d.find_region(w.wr.bind_mr_lkey);
  const bool ok =
      mw && mw->kind != Region::Kind::mr && mw->pd == q.init.pd && mr && mr->kind == Region::Kind::mr &&
      mr->pd == mw->pd &&                                    // the window, its MR and the QP share one PD
      !(mw->kind == Region::Kind::mw_type2 && mw->valid) &&  // type 2 binds only when free (as rxe)
      mr->valid && (mr->access & access::mw_bind) && w.wr.bind_addr >= mr->iova && w.wr.bind_length <= mr->length &&
      w.wr.bind_addr - mr->iova <= mr->length - w.wr.bind_length &&
      (!(w.wr.bind_access & (access::remote_write | access::remote_atomic)) || (mr->access & access::local_write));
  if (!ok) {
    w.status = WcStatus::mw_bind_err;
    return;
  }
  if (mw->valid) --d.region_at(mw->parent)->windows;
  mw->valid = w.wr.bind_length > 0;  // binding zero bytes unbinds (s10.6.7.2.1)
  mw->parent = w.wr.bind_mr_lkey >> 8;
  mw->iova = w.wr.bind_addr;
  mw->length = w.wr.bind_length;
  mw->host = mr->host + (w.wr.bind_addr - mr->iova);
  mw->access = w.wr.bind_access & (access::remote_read | access::remote_write | access::remote_atomic);
  mw->bound_qp = q.qpn;
  mw->key = (mw->key & ~0xFFu) | (w.wr.bind_new_rkey & 0xFFu);
  if (mw->valid) ++mr->windows;
}

std::optional<TxPacket> Requester::next(Device& d, Qp& q, Time now) {
  // In SQD the requester finishes the messages it started and starts none (s10.3.1: the
  // send queue drains at a message boundary).
  const bool draining = q.state() == QpState::sqd;
  if ((q.state() != QpState::rts && !draining) || q.rnr_at != 0) return std::nullopt;
  // UD has no path MTU attribute: a datagram fits the port's MTU (as rxe's get_mtu).
  const std::uint32_t mtu = mtu_bytes(q.init.qp_type == QpType::ud ? d.config().max_mtu : q.attr.path_mtu);
  while (q.next_wqe < q.sq.size()) {
    SendWqe& w = q.sq[q.next_wqe];
    if (is_local(w.wr.opcode)) {
      // Local operations wait for the WQEs before them, like a fence (s10.6.7.2.1).
      if (q.next_wqe != 0 || draining) return std::nullopt;
      execute_local(d, q, w);
      ++q.next_wqe;
      Completer::retire(d, q);
      continue;
    }
    if (w.complete) {  // failed before it was sent, or acknowledged while being resent
      ++q.next_wqe;
      q.next_index = 0;
      continue;
    }
    const LossWindowSlot slot = loss_window_slot(q, w);
    if (!slot.open) return std::nullopt;
    if (!w.started) {
      if (!may_start(d, q, w, draining)) return std::nullopt;
      if (const std::optional<WcStatus> error = local_length_error(q, w, mtu)) {
        Completer::fail(d, q, w, *error);
        continue;
      }
      start_wqe(q, w, mtu);
    }
    const PacketPlan plan = plan_packet(q, w, mtu);
    const RequestHeaders headers = request_headers(d, q, w, plan, slot.edge);
    std::optional<TxPacket> pkt = assemble_packet(d, q, w, plan, headers);
    if (!pkt) {
      Completer::fail(d, q, w, WcStatus::loc_prot_err);  // a bad lkey or range (s10.6.3.3)
      continue;
    }
    account_sent(d, q, w, plan, pkt->bytes.size(), now);
    return pkt;
  }
  return std::nullopt;
}

}  // namespace softrdma::core
