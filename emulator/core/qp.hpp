// A queue pair and the transport state its three engines keep (IBTA vol. 1 ch. 9.7): the
// requester (send queue to request packets), the completer (ACKs and responses to send
// completions, timers) and the responder (request packets to memory, receive completions,
// ACKs and responses).
#pragma once

#include <cstdint>
#include <deque>
#include <memory>

#include "emulator/core/counters.hpp"
#include "emulator/core/iwarp_stream.hpp"
#include "emulator/core/ring.hpp"
#include "emulator/core/tag_matching.hpp"
#include "emulator/core/verbs_types.hpp"
#include "emulator/core/wqe.hpp"

namespace softrdma::core {

// A READ or atomic request the responder accepted: the resource it holds until the
// requester has seen the response (max_dest_rd_atomic of them, s9.7.5.1.4), and the record
// it answers a duplicate from (s9.7.5.1.7): a READ is executed again from the duplicate's
// PSN, an atomic's original value is sent again, never recomputed.
struct ResponderResource {
  bool atomic = false;
  std::uint32_t psn = 0;       // the request's PSN (a READ: its first response's PSN)
  std::uint32_t packets = 1;   // response packets
  std::uint64_t host = 0;      // READ: host address of the first byte
  std::uint64_t length = 0;    // READ: bytes
  std::uint32_t next = 0;      // READ: response packets sent so far in this pass
  std::uint64_t original = 0;  // atomic: the value before the operation
  std::uint32_t msn = 0;       // the MSN its responses carry
  bool sending = false;        // responses still to send
  bool replay = false;         // sending again for a duplicate request, not a new one
};

// Where the responder's requests land: the PD that guards their memory, the SRQ (0: the
// QP's own receive queue) and the CQ their receives complete into.
struct ReceiveTarget {
  std::uint32_t pd = 0;
  std::uint32_t srq = 0;
  std::uint32_t cq = 0;
};

inline ReceiveTarget own_target(const QpInitAttr& init) { return {init.pd, init.srq, init.recv_cq}; }

struct Qp {
  std::uint32_t qpn = 0;
  QpInitAttr init;
  // The QP's own (own_target); an XRC target's is the XRC SRQ the current message named.
  ReceiveTarget target;
  // An XRC target: the handles open on it (create_qp's and each open_qp's); destroy_qp closes
  // one, and the last one destroys the QP (annex A14: a target outlives its creator).
  std::uint32_t handles = 1;
  QpAttr attr;  // attr.qp_state is the QP's state
  std::uint16_t udp_src_port = 0xC000;

  // Requester (s9.7.4).
  Ring<SendWqe> sq;              // posted, not yet retired
  std::size_t next_wqe = 0;      // sq index of the WQE to transmit from
  std::uint32_t next_index = 0;  // its packet to transmit next (resends rewind it)
  std::uint32_t send_psn = 0;    // where the next new WQE's PSNs start
  std::uint32_t packets_since_ack_req = 0;
  std::uint32_t rd_atomic_in_flight = 0;  // READ/atomic WQEs started and not complete (<= max_rd_atomic)
  std::uint32_t max_sent_psn = 0;         // the highest PSN sent: anything at or below is a resend
  bool sent_any = false;
  // After a loss, how many packets from una_psn on may be out (0: no limit but the device's
  // window); see completer.cpp, shrink_window.
  std::uint32_t loss_window = 0;
  std::uint32_t loss_threshold = 0;  // where slow start ends (half of what was out at the loss)
  std::uint32_t window_credit = 0;   // packets acknowledged towards the next widening by one

  // Completer (s9.7.5.2).
  Time retransmit_at = 0;  // 0: not armed
  Time rnr_at = 0;         // 0: not waiting out an RNR NAK
  std::uint8_t retry_left = 0;
  std::uint8_t rnr_left = 0;
  std::uint32_t read_received = 0;  // response packets received for the READ at the head of the window
  std::uint32_t una_psn = 0;        // the oldest PSN not yet acknowledged
  bool rewound_for_gap = false;     // a READ response gap already made us resend (once per gap)

  // Responder (s9.7.5.1).
  std::deque<RecvWqe> rq;
  std::uint32_t epsn = 0;    // expected PSN
  std::uint32_t msn = 0;     // messages completed, 24 bits
  bool nak_sent = false;     // a PSN sequence error NAK is out; stay quiet until epsn arrives
  bool uc_dropping = false;  // UC: dropping the rest of a message that lost a packet (s9.8.3)
  // The message in progress: a SEND filling recv (SGE offset recv_offset), or a WRITE
  // filling host memory at write_host with write_left bytes still allowed.
  bool in_send = false;
  bool in_write = false;
  RecvWqe recv;
  std::uint64_t recv_offset = 0;
  TmReceive recv_tm;  // on a tag-matching SRQ: how the message was routed
  std::uint64_t write_host = 0;
  std::uint64_t write_left = 0;
  std::uint32_t write_imm_len = 0;  // WRITE with immediate: the message's length, for the WC
  std::deque<ResponderResource> resources;
  // No resource before this index has responses to send: the READs being answered sit behind
  // up to max_dest_rd_atomic finished ones, which the responder need not look at per packet.
  std::size_t resources_sent_before = 0;
  // An ACK or NAK to send for `ack_psn` (coalesced: a later one replaces an earlier).
  bool ack_pending = false;
  std::uint32_t ack_psn = 0;
  std::uint8_t ack_syndrome = 0;

  QpCounters counters;

  // iWARP: the QP's byte stream, from Device::stream_attach() on; none for RoCE.
  std::unique_ptr<IwarpStream> stream;
  bool stream_queued = false;  // in the device's queue of streams to ask for FPDUs

  // In the device's queues of QPs to ask for packets (Device::wake): a QP is asked again only
  // after something touched it, so transmit() does not ask every QP for every packet.
  bool answer_queued = false;   // its responder may have an ACK, NAK or response to send
  bool request_queued = false;  // its requester may have a request to send

  QpState state() const { return attr.qp_state; }
};

}  // namespace softrdma::core
