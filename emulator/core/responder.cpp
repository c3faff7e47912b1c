// The responder (IBTA vol. 1 s9.7.5.1; UC s9.8.3; UD s9.8.2): checks each request's PSN,
// executes SENDs, WRITEs (ATOMIC WRITE among them), READs and atomics against registered
// memory, completes receive WQEs, and answers with ACKs, NAKs, READ responses and atomic ACKs.
#include <algorithm>
#include <cstring>

#include "emulator/core/psn.hpp"
#include "emulator/core/receive_queue.hpp"
#include "emulator/core/roce_headers.hpp"
#include "emulator/core/transport.hpp"
#include "emulator/core/uninitialised_bytes.hpp"

namespace softrdma::core {
namespace {

using wire::Ext;
using wire::OpFlag;

constexpr std::uint8_t kAckNoCredit = 0x1F;  // "no credit information", as Linux rxe sends
constexpr std::size_t kGrhLength = 40;

std::uint8_t nak(wire::NakCode code) {
  return wire::make_syndrome(wire::AckKind::nak, static_cast<std::uint8_t>(code));
}

void queue_ack(Qp& q, std::uint32_t psn, std::uint8_t syndrome) {
  // One slot, a later answer replacing an earlier one; but a NAK or RNR NAK still waiting to
  // go is kept against an ACK or sequence NAK that says no more (for an earlier or the same
  // PSN): replacing it would lose the RNR wait or the fast resend.
  const bool weaker =
      wire::ack_kind(syndrome) == wire::AckKind::ack || syndrome == nak(wire::NakCode::psn_sequence_error);
  if (q.ack_pending && wire::ack_kind(q.ack_syndrome) != wire::AckKind::ack && weaker && psn_diff(psn, q.ack_psn) <= 0)
    return;
  q.ack_pending = true;
  q.ack_psn = psn;
  q.ack_syndrome = syndrome;
}

Endpoints endpoints_of(const RxPacket& rx) { return {rx.src_gid, rx.dst_gid, rx.src_port, 0, 0, 64}; }

Wc recv_wc(const Qp& q, const RecvWqe& r, WcStatus status, WcOpcode opcode, std::uint32_t byte_len,
           const wire::IbPacket& p, std::uint32_t src_qp, std::uint32_t flags) {
  Wc wc;
  if (flags & wc_flags::tm_match) {
    wc.tm_tag = q.recv_tm.tmh.tag;
    wc.tm_priv = q.recv_tm.tmh.app_ctx;
  }
  wc.wr_id = r.wr.wr_id;
  wc.status = status;
  wc.opcode = opcode;
  wc.byte_len = byte_len;
  wc.qp_num = q.qpn;
  wc.src_qp = src_qp;
  wc.wc_flags = flags;
  if (const auto* h = p.ext(Ext::immdt)) {
    wc.imm_data = imm_number(wire::ImmDt::imm::get(h));
    wc.wc_flags |= wc_flags::with_imm;
  }
  if (const auto* h = p.ext(Ext::ieth)) {
    wc.imm_data = wire::Ieth::rkey::get(h);
    wc.wc_flags |= wc_flags::with_inv;
  }
  return wc;
}

void complete_recv(Device& d, Qp& q, const RecvWqe& r, WcStatus status, WcOpcode opcode, std::uint32_t byte_len,
                   const wire::IbPacket& p, std::uint32_t src_qp, std::uint32_t flags) {
  d.complete(q.target.cq, recv_wc(q, r, status, opcode, byte_len, p, src_qp, flags),
             wire::Bth::solicited_event::get(p.bth()));
}

// A datagram's completion. A RoCE v2 packet carries no SL field (IBTA vol. 1 annex A17), so
// `sl` names its network header as ConnectX does (1 IPv6, 2 IPv4): UCX's ud_verbs reads it
// there to find the destination address in the GRH area.
void complete_datagram(Device& d, Qp& q, const RecvWqe& r, WcStatus status, std::uint32_t byte_len,
                       const wire::IbPacket& p, const RxPacket& rx, std::uint32_t flags) {
  constexpr std::uint8_t kIpv6Header = 1, kIpv4Header = 2;
  Wc wc = recv_wc(q, r, status, WcOpcode::recv, byte_len, p, wire::Deth::src_qp::get(p.ext(Ext::deth)), flags);
  wc.sl = is_ipv4_mapped(rx.src_gid) ? kIpv4Header : kIpv6Header;
  d.complete(q.target.cq, wc, wire::Bth::solicited_event::get(p.bth()));
}

// The NAK for `psn` of an RC request the responder cannot finish, the QP then in the error
// state (s9.7.5.1.3: invalid request, remote access and remote operational errors are fatal).
std::optional<TxPacket> fail_with_nak(Device& d, Qp& q, std::uint32_t psn, wire::NakCode code) {
  queue_ack(q, psn, nak(code));
  q.resources.clear();  // the error state drops queued responses; the NAK goes now
  q.resources_sent_before = 0;
  auto answer = Responder::next(d, q);
  d.enter_error(q);
  return answer;
}

// A request the responder cannot execute: RC answers with a NAK and the QP errs; UC drops the
// message.
void reject(Device& d, Qp& q, const wire::IbPacket& p, wire::NakCode code) {
  if (q.init.qp_type == QpType::uc) {
    q.uc_dropping = true;
    q.in_send = q.in_write = false;
    return;
  }
  if (auto pkt = fail_with_nak(d, q, p.psn(), code)) d.send_control(std::move(*pkt));
}

void answer_duplicate(Qp& q, const wire::IbPacket& p) {
  ++q.counters.duplicate_request;
  const std::uint32_t psn = p.psn();
  const wire::OpcodeInfo& oi = p.info();
  if (oi.is(OpFlag::read) || oi.is(OpFlag::atomic)) {
    // Execute a READ again from the duplicate's PSN; resend an atomic's saved result
    // (s9.7.5.1.7). A request older than the history is dropped.
    for (std::size_t i = 0; i < q.resources.size(); ++i) {
      ResponderResource& r = q.resources[i];
      const std::int32_t into = psn_diff(psn, r.psn);
      if (into < 0 || static_cast<std::uint32_t>(into) >= r.packets) continue;
      r.next = static_cast<std::uint32_t>(into);
      r.replay = r.replay || !r.sending;
      r.sending = true;
      q.resources_sent_before = std::min(q.resources_sent_before, i);
      return;
    }
    return;
  }
  // A duplicate SEND or WRITE is not executed again; the ACK says how far we are.
  queue_ack(q, psn_add(q.epsn, kPsnMask), wire::make_syndrome(wire::AckKind::ack, kAckNoCredit));
}

// The first packet of a SEND takes its receive WQE; on a tag-matching SRQ its TMH decides which
// (tag_matching.hpp). False when nothing is left to place: a rendezvous request, handled whole.
bool start_send(Device& d, Qp& q, const wire::IbPacket& p, const wire::OpcodeInfo& oi) {
  q.recv_offset = 0;
  q.recv_tm = TmReceive{};
  if (Srq* srq = TagReceiver::srq_of(d, q)) {
    if (!TagReceiver::start(d, q, *srq, p.payload(), oi.is(OpFlag::last))) return false;
  } else {
    q.recv = std::move(*take_recv(d, q));
  }
  q.in_send = true;
  return true;
}

void execute_send(Device& d, Qp& q, const wire::IbPacket& p, const wire::OpcodeInfo& oi, std::uint32_t src_qp) {
  auto payload = p.payload();
  if (oi.is(OpFlag::first)) {
    if (!start_send(d, q, p, oi)) return;
    payload = payload.subspan(q.recv_tm.skip);
  }
  const WcOpcode opcode = q.recv_tm.opcode;
  if (q.recv_offset + payload.size() > q.recv.length) {
    // The message does not fit the receive buffers: a local length error at the responder,
    // an invalid request for the requester (s9.7.5.1.3 / s11.6.2).
    complete_recv(d, q, q.recv, WcStatus::loc_len_err, opcode, 0, p, src_qp, 0);
    q.in_send = false;
    reject(d, q, p, wire::NakCode::invalid_request);
    return;
  }
  if (!d.scatter(q.recv.wr.sg_list, q.target.pd, q.recv_offset, payload)) {
    complete_recv(d, q, q.recv, WcStatus::loc_prot_err, opcode, 0, p, src_qp, 0);
    q.in_send = false;
    reject(d, q, p, wire::NakCode::remote_operational_error);
    return;
  }
  q.recv_offset += payload.size();
  if (!oi.is(OpFlag::last)) return;
  if (const auto* h = p.ext(Ext::ieth)) {
    d.invalidate(q.target.pd, wire::Ieth::rkey::get(h));  // SEND with Invalidate (s9.4.1.1.1)
  }
  complete_recv(d, q, q.recv, WcStatus::success, opcode, static_cast<std::uint32_t>(q.recv_offset), p, src_qp,
                q.recv_tm.last_flags);
  q.in_send = false;
}

bool execute_write(Device& d, Qp& q, const wire::IbPacket& p, const wire::OpcodeInfo& oi) {
  if (oi.is(OpFlag::first)) {
    const auto* reth = p.ext(Ext::reth);
    const std::uint64_t len = wire::Reth::dma_length::get(reth);
    // ATOMIC WRITE places one naturally aligned 8-byte word (IBTA vol. 1 release 1.5).
    if (wire::operation_of(p.opcode()) == wire::Operation::atomic_write &&
        (len != 8 || wire::Reth::va::get(reth) % 8 != 0)) {
      reject(d, q, p, wire::NakCode::invalid_request);
      return false;
    }
    // A zero-length WRITE or READ touches no memory: its R_Key and VA go unchecked (C9-88, as rxe).
    const auto host = !(q.attr.qp_access_flags & access::remote_write) ? std::nullopt
                      : len == 0                                       ? std::optional<std::uint64_t>{0}
                                 : d.translate(wire::Reth::rkey::get(reth), q.target.pd, wire::Reth::va::get(reth), len,
                                               access::remote_write, q.qpn);
    if (!host) {
      reject(d, q, p, wire::NakCode::remote_access_error);
      return false;
    }
    q.write_host = *host;
    q.write_left = len;
    q.write_imm_len = static_cast<std::uint32_t>(len);
    q.in_write = true;
  }
  const auto payload = p.payload();
  // The packets of a WRITE carry exactly the RETH's length (s9.7.5.1.3, C9-91).
  if (payload.size() > q.write_left || (oi.is(OpFlag::last) && payload.size() != q.write_left)) {
    reject(d, q, p, wire::NakCode::invalid_request);
    return false;
  }
  if (!payload.empty() && !d.memory().write(q.write_host, payload)) {
    reject(d, q, p, wire::NakCode::remote_access_error);
    return false;
  }
  q.write_host += payload.size();
  q.write_left -= payload.size();
  if (oi.is(OpFlag::last)) q.in_write = false;
  return true;
}

// Keeps a READ's or atomic's resource to answer its duplicates: as many finished ones as the
// requester may have outstanding (max_dest_rd_atomic), as it may ask again for any of those
// (s9.7.5.1.7).
void keep_resource(Qp& q, ResponderResource r) {
  q.resources.push_back(r);
  const std::size_t history = std::max<std::size_t>(q.attr.max_dest_rd_atomic, 1);
  while (q.resources.size() > history && !q.resources.front().sending) {
    q.resources.pop_front();
    q.resources_sent_before -= std::min<std::size_t>(q.resources_sent_before, 1);
  }
}

// Whether a new READ or atomic exceeds max_dest_rd_atomic (s9.7.5.1.4). Responses sent again
// for a duplicate request do not count: the requester counts that request once, and may have
// completed it already (a duplicate made by the network), so counting the replay would turn
// away a request within its limit.
bool resources_exhausted(const Qp& q) {
  const auto busy = std::count_if(q.resources.begin(), q.resources.end(),
                                  [](const ResponderResource& r) { return r.sending && !r.replay; });
  return static_cast<std::size_t>(busy) >= std::max<std::uint8_t>(q.attr.max_dest_rd_atomic, 1);
}

void execute_read(Device& d, Qp& q, const wire::IbPacket& p) {
  const auto* reth = p.ext(Ext::reth);
  const std::uint64_t len = wire::Reth::dma_length::get(reth);
  if (resources_exhausted(q)) return reject(d, q, p, wire::NakCode::invalid_request);  // s9.7.5.1.4
  const auto host = !(q.attr.qp_access_flags & access::remote_read) ? std::nullopt
                    : len == 0 ? std::optional<std::uint64_t>{0}  // C9-88, as for WRITE
                               : d.translate(wire::Reth::rkey::get(reth), q.target.pd, wire::Reth::va::get(reth), len,
                                             access::remote_read, q.qpn);
  if (!host) return reject(d, q, p, wire::NakCode::remote_access_error);
  const std::uint32_t mtu = mtu_bytes(q.attr.path_mtu);
  ResponderResource r;
  r.psn = p.psn();
  r.packets = std::max<std::uint32_t>(1, static_cast<std::uint32_t>((len + mtu - 1) / mtu));
  r.host = *host;
  r.length = len;
  q.msn = psn_add(q.msn, 1);
  r.msn = q.msn;
  r.sending = true;
  q.epsn = psn_add(q.epsn, r.packets);
  keep_resource(q, r);
}

void execute_atomic(Device& d, Qp& q, const wire::IbPacket& p) {
  const auto* a = p.ext(Ext::atomiceth);
  const std::uint64_t va = wire::AtomicEth::va::get(a);
  if (resources_exhausted(q)) return reject(d, q, p, wire::NakCode::invalid_request);
  if (va % 8 != 0) return reject(d, q, p, wire::NakCode::invalid_request);  // s9.4.5: 8-byte aligned
  const auto host = (q.attr.qp_access_flags & access::remote_atomic)
                        ? d.translate(wire::AtomicEth::rkey::get(a), q.target.pd, va, 8, access::remote_atomic, q.qpn)
                        : std::nullopt;
  if (!host) return reject(d, q, p, wire::NakCode::remote_access_error);
  ResponderResource r;
  r.atomic = true;
  r.psn = p.psn();
  const bool ok = wire::operation_of(p.opcode()) == wire::Operation::compare_swap
                      ? d.memory().compare_swap(*host, wire::AtomicEth::compare::get(a),
                                                wire::AtomicEth::swap_add::get(a), r.original)
                      : d.memory().fetch_add(*host, wire::AtomicEth::swap_add::get(a), r.original);
  if (!ok) return reject(d, q, p, wire::NakCode::remote_access_error);
  q.msn = psn_add(q.msn, 1);
  r.msn = q.msn;
  r.sending = true;
  q.epsn = psn_add(q.epsn, 1);
  keep_resource(q, r);
}

// Whether a message that needs a receive WQE finds one now.
bool can_receive(Device& d, const Qp& q, const wire::IbPacket& p, const wire::OpcodeInfo& oi) {
  Srq* srq = TagReceiver::srq_of(d, q);
  if (srq && oi.is(OpFlag::send)) return TagReceiver::can_receive(d, *srq, p.payload(), oi.is(OpFlag::last));
  return recv_available(d, q);
}

// An XRC target's message lands in the XRC SRQ its XRCETH names, which must be one of the
// target's domain; that SRQ's PD guards the memory the message touches and its CQ takes the
// receive (IBTA vol. 1 annex A14). Any other number makes the request an invalid one.
bool aim_at_xrc_srq(Device& d, Qp& q, const wire::IbPacket& p) {
  const std::uint32_t number = wire::Xrceth::xrc_srq::get(p.ext(Ext::xrceth));
  const Srq* srq = d.find_srq(number);
  if (!srq || srq->xrcd == 0 || srq->xrcd != q.init.xrcd) return false;
  q.target = {srq->pd, number, srq->cq};
  return true;
}

void on_ud(Device& d, Qp& q, const wire::IbPacket& p, const RxPacket& rx) {
  const auto* deth = p.ext(Ext::deth);
  // A datagram for another Q_Key is dropped silently (s9.6.1.1.3 C9-48).
  if (wire::Deth::qkey::get(deth) != q.attr.qkey) {
    d.count_dropped();
    return;
  }
  auto r = take_recv(d, q);
  if (!r) {
    d.count_dropped();  // UD has no RNR: the datagram is lost (s9.8.2)
    return;
  }
  const auto payload = p.payload();
  if (kGrhLength + payload.size() > r->length) {
    complete_datagram(d, q, *r, WcStatus::loc_len_err, 0, p, rx, 0);
    return;
  }
  // One buffer, so that an unpinned write is one system call; unpinned, because a datagram
  // can come at any moment, also after the application has unmapped the buffer it posted.
  UninitialisedBytes datagram(kGrhLength + payload.size());
  write_grh(endpoints_of(rx), p.bytes().size(), datagram.data());
  copy_bytes(datagram.data() + kGrhLength, payload.data(), payload.size());
  if (!d.scatter(r->wr.sg_list, q.target.pd, 0, {datagram.data(), datagram.size()}, Device::Pinning::unpinned)) {
    complete_datagram(d, q, *r, WcStatus::loc_prot_err, 0, p, rx, 0);
    return;
  }
  complete_datagram(d, q, *r, WcStatus::success, static_cast<std::uint32_t>(kGrhLength + payload.size()), p, rx,
                    wc_flags::grh);
}

}  // namespace

void Responder::on_request(Device& d, Qp& q, const wire::IbPacket& p, const RxPacket& rx) {
  const QpState s = q.state();
  // The receive side works from RTR on, through SQD and SQE (s10.3.1).
  // An XRC initiator has no responder (annex A14): a request to one is dropped.
  if ((s != QpState::rtr && s != QpState::rts && s != QpState::sqd && s != QpState::sqe) ||
      !has_responder(q.init.qp_type)) {
    d.count_dropped();
    return;
  }
  if (q.init.qp_type == QpType::ud) return on_ud(d, q, p, rx);

  const wire::OpcodeInfo& oi = p.info();
  const std::uint32_t psn = p.psn();
  const std::int32_t ahead = psn_diff(psn, q.epsn);
  const bool rc = is_reliable(q.init.qp_type);
  if (rc) {
    if (ahead < 0) return answer_duplicate(q, p);
    if (ahead > 0) {
      // A gap: one NAK for the episode, then silence until the expected PSN arrives
      // (s9.7.5.1.1), as Linux rxe does.
      ++q.counters.out_of_seq_request;
      if (!q.nak_sent) queue_ack(q, q.epsn, nak(wire::NakCode::psn_sequence_error));
      q.nak_sent = true;
      return;
    }
    q.nak_sent = false;
  } else {
    // UC (s9.8.3): a lost packet loses its message; the next FIRST or ONLY starts afresh.
    if (ahead != 0) {
      ++q.counters.out_of_seq_request;
      q.uc_dropping = true;
      q.in_write = false;
      if (q.in_send) {
        // The WQE is reused for the next message, not completed.
        (q.target.srq ? d.find_srq(q.target.srq)->queue : q.rq).push_front(std::move(q.recv));
        q.in_send = false;
      }
    }
    q.epsn = psn_add(psn, 1);
    if (q.uc_dropping && !oi.is(OpFlag::first)) return;
    q.uc_dropping = false;
  }

  // The opcode must continue the message in progress, or start one (s9.7.5.1.3 C9-84).
  const bool continues = oi.is(OpFlag::send) ? q.in_send : oi.is(OpFlag::write) && q.in_write;
  if (oi.is(OpFlag::first) ? (q.in_send || q.in_write) : !continues)
    return reject(d, q, p, wire::NakCode::invalid_request);
  if ((oi.is(OpFlag::read) || oi.is(OpFlag::atomic)) && !rc) return reject(d, q, p, wire::NakCode::invalid_request);
  if (q.init.qp_type == QpType::xrc_recv && oi.is(OpFlag::first) && !aim_at_xrc_srq(d, q, p))
    return reject(d, q, p, wire::NakCode::invalid_request);

  // A message that needs a receive WQE waits for one: RNR NAK (s9.7.5.1.5), and the
  // requester sends the packet again later. UC cannot wait: the message is dropped. Fault
  // injection can make an RC request find the receive queue empty (Device::force_rnr).
  const bool needs_recv = oi.is(OpFlag::consumes_recv) && (oi.is(OpFlag::first) || !oi.is(OpFlag::send));
  const bool forced_rnr = needs_recv && rc && d.take_forced_rnr();
  if (needs_recv && (forced_rnr || !can_receive(d, q, p, oi))) {
    if (!rc) {
      q.uc_dropping = !oi.is(OpFlag::last);
      d.count_dropped();
      return;
    }
    ++q.counters.send_rnr_err;
    queue_ack(q, psn, wire::make_syndrome(wire::AckKind::rnr_nak, q.attr.min_rnr_timer));
    return;
  }

  if (oi.is(OpFlag::read)) return execute_read(d, q, p);
  if (oi.is(OpFlag::atomic)) return execute_atomic(d, q, p);
  if (oi.is(OpFlag::send)) {
    execute_send(d, q, p, oi, 0);
  } else if (execute_write(d, q, p, oi) && oi.is(OpFlag::immediate)) {
    auto r = take_recv(d, q);
    complete_recv(d, q, *r, WcStatus::success, WcOpcode::recv_rdma_with_imm, q.write_imm_len, p, 0, 0);
  }
  if (q.state() == QpState::err) return;
  if (!rc) return;
  if (oi.is(OpFlag::last)) q.msn = psn_add(q.msn, 1);
  q.epsn = psn_add(psn, 1);
  if (p.ack_req()) queue_ack(q, psn, wire::make_syndrome(wire::AckKind::ack, kAckNoCredit));
}

std::optional<TxPacket> Responder::next(Device& d, Qp& q) {
  const auto it = std::find_if(q.resources.begin() + static_cast<std::ptrdiff_t>(q.resources_sent_before),
                               q.resources.end(), [](const ResponderResource& r) { return r.sending; });
  q.resources_sent_before = static_cast<std::size_t>(it - q.resources.begin());
  // The device asks every QP in turn for each packet it sends: most have nothing to answer.
  if (!q.ack_pending && it == q.resources.end()) return std::nullopt;
  wire::IbRepr h;
  h.dest_qp = q.attr.dest_qp_num;
  h.mig_req = true;
  std::uint32_t payload = 0;
  std::uint64_t payload_host = 0;
  // Answers go out in PSN order: a READ or atomic response queued for an earlier PSN goes
  // before an ACK or NAK for a later one, which the requester would otherwise take for an
  // implied NAK of the READ or atomic (s9.7.5.2.3).
  const bool response_first =
      it != q.resources.end() && (!q.ack_pending || psn_diff(psn_add(it->psn, it->next), q.ack_psn) < 0);
  if (q.ack_pending && !response_first) {
    q.ack_pending = false;
    h.opcode = wire::opcode(transport_of(q.init.qp_type), wire::Operation::ack);
    h.psn = q.ack_psn;
    h.syndrome = q.ack_syndrome;
    h.msn = q.msn;
  } else {
    if (it == q.resources.end()) return std::nullopt;
    ResponderResource& r = *it;
    h.syndrome = wire::make_syndrome(wire::AckKind::ack, kAckNoCredit);
    h.msn = r.msn;
    h.psn = psn_add(r.psn, r.next);
    if (r.atomic) {
      h.opcode = wire::opcode(transport_of(q.init.qp_type), wire::Operation::atomic_ack);
      h.original_data = r.original;
      r.sending = r.replay = false;
    } else {
      const std::uint32_t mtu = mtu_bytes(q.attr.path_mtu);
      const bool first = r.next == 0, last = r.next + 1 == r.packets;
      h.opcode = wire::opcode(transport_of(q.init.qp_type), first && last ? wire::Operation::read_response_only
                                                            : first       ? wire::Operation::read_response_first
                                                            : last        ? wire::Operation::read_response_last
                                                                          : wire::Operation::read_response_middle);
      const std::uint64_t offset = std::uint64_t{r.next} * mtu;
      payload = static_cast<std::uint32_t>(std::min<std::uint64_t>(mtu, r.length - offset));
      payload_host = r.host + offset;
      if (++r.next == r.packets) r.sending = r.replay = false;
    }
  }
  TxPacket pkt = d.packet_to(q, q.attr.ah_attr);
  const std::size_t header = wire::info(h.opcode).header_length;
  const std::size_t pad = wire::IbRepr::pad_for(payload);
  pkt.bytes.resize(header + payload + pad + wire::kIcrcLength);
  h.emit_headers(pkt.bytes.data(), payload);
  if (payload && !d.memory().read(payload_host, {pkt.bytes.data() + header, payload})) {
    // The memory went away after the READ passed its checks (an on-demand MR unmapped): a
    // remote access error, as for a READ that failed them.
    return fail_with_nak(d, q, h.psn, wire::NakCode::remote_access_error);
  }
  std::memset(pkt.bytes.data() + header + payload, 0, pad + wire::kIcrcLength);
  d.finish(pkt);
  ++q.counters.sent_pkts;
  q.counters.sent_bytes += pkt.bytes.size();
  return pkt;
}

}  // namespace softrdma::core
