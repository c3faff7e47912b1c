// The iWARP sender (RFC 5040 s5, RFC 5041 s5, RFC 5044 s4): segments Sends and RDMA Writes into
// FPDUs that each fit one TCP segment, issues RDMA Read Requests within the ORD, answers the
// peer's Read Requests in order, and ends the stream with a Terminate after an error. A Send or
// Write completes once its last FPDU is handed to the stream: TCP delivers it or the
// connection fails, which flushes the QP (RFC 5040 s5.4, as Linux siw completes them).
#include <algorithm>

#include "emulator/core/iwarp_transport.hpp"
#include "emulator/core/transport.hpp"

namespace softrdma::core {
namespace {

using wire::iwarp::Fpdu;
using wire::iwarp::RdmapMessage;
using wire::iwarp::RdmapOpcode;
namespace rdmap_queue = wire::iwarp::rdmap_queue;

// The largest ULPDU whose FPDU, with no pad, fits in max_fpdu bytes (RFC 5044 s4: the length
// field and the ULPDU end on a 4-byte boundary before the CRC).
std::size_t max_ulpdu(const StreamParams& p) {
  const std::size_t aligned = (p.max_fpdu - Fpdu::crc_length) & ~std::size_t{Fpdu::alignment - 1};
  return std::min<std::size_t>(aligned - Fpdu::length_field, Fpdu::max_ulpdu - 1);
}

// Appends one FPDU: `m`'s headers, then `payload_length` bytes that fill() writes; nothing if
// fill() fails.
template <typename Fill>
bool append_fpdu(Qp& q, UninitialisedBytes& out, const RdmapMessage& m, std::size_t payload_length, Fill&& fill) {
  const std::size_t start = out.size();
  const std::size_t header = m.header_length();
  out.resize(start + wire::iwarp::fpdu_length(header + payload_length));
  std::uint8_t* fpdu = out.data() + start;
  m.emit(fpdu + Fpdu::length_field);
  if (!fill(std::span<std::uint8_t>(fpdu + Fpdu::length_field + header, payload_length))) {
    out.resize(start);
    return false;
  }
  wire::iwarp::seal_fpdu(fpdu, header + payload_length, q.stream->params.crc);
  ++q.counters.sent_pkts;
  q.counters.sent_bytes += out.size() - start;
  return true;
}

bool no_payload(std::span<std::uint8_t>) { return true; }

RdmapMessage untagged(RdmapOpcode op, std::uint32_t queue, std::uint32_t msn, std::uint32_t offset, bool last) {
  RdmapMessage m;
  m.opcode = op;
  m.ddp.tagged = false;
  m.ddp.last = last;
  m.ddp.queue_number = queue;
  m.ddp.message_sequence_number = msn;
  m.ddp.message_offset = offset;
  return m;
}

RdmapMessage tagged(RdmapOpcode op, std::uint32_t stag, std::uint64_t offset, bool last) {
  RdmapMessage m;
  m.opcode = op;
  m.ddp.tagged = true;
  m.ddp.last = last;
  m.ddp.stag = stag;
  m.ddp.tagged_offset = offset;
  return m;
}

RdmapOpcode send_opcode(const SendWr& wr) {
  const bool se = (wr.flags & send_flags::solicited) != 0;
  if (wr.opcode == WrOpcode::send_with_inv) return se ? RdmapOpcode::send_se_invalidate : RdmapOpcode::send_invalidate;
  return se ? RdmapOpcode::send_se : RdmapOpcode::send;
}

bool send_terminate(Device& d, Qp& q, UninitialisedBytes& out) {
  IwarpStream& s = *q.stream;
  RdmapMessage m = untagged(RdmapOpcode::terminate, rdmap_queue::terminate, 1, 0, true);
  m.terminate = *s.terminate;
  s.terminate.reset();
  append_fpdu(q, out, m, 0, no_payload);
  d.close_stream(q);  // RFC 5040 s7.1: the Terminate is the stream's last message
  return true;
}

// The next Read Response segment of the oldest accepted Read Request (RFC 5040 s5.3: in the
// order the requests came).
bool send_read_response(Device& d, Qp& q, UninitialisedBytes& out) {
  IwarpStream& s = *q.stream;
  InboundRead& r = s.reads.front();
  const std::size_t room = max_ulpdu(s.params) - wire::iwarp::Ddp::tagged_length;
  const std::uint32_t n = static_cast<std::uint32_t>(std::min<std::size_t>(r.length - r.sent, room));
  const bool last = r.sent + n == r.length;
  const RdmapMessage m = tagged(RdmapOpcode::read_response, r.sink_stag, r.sink_offset + r.sent, last);
  const std::uint64_t from = r.host + r.sent;
  if (!append_fpdu(q, out, m, n, [&](std::span<std::uint8_t> p) { return d.memory().read(from, p); })) {
    iwarp_terminate(d, q, wire::iwarp::terminate_cause::rdmap_catastrophic_stream, nullptr);
    return IwarpSender::next(d, q, out);  // the Terminate
  }
  r.sent += n;
  if (last) s.reads.pop_front();
  return true;
}

bool send_read_request(Qp& q, SendWqe& w, UninitialisedBytes& out) {
  IwarpStream& s = *q.stream;
  RdmapMessage m = untagged(RdmapOpcode::read_request, rdmap_queue::read_request, s.read_request_msn, 0, true);
  // The sink is where the first SGE starts; the response is scattered over the SGE list by
  // its offset from there (iwarp_receiver.cpp).
  if (!w.wr.sg_list.empty()) {
    m.read_request.sink_stag = w.wr.sg_list.front().lkey;
    m.read_request.sink_tagged_offset = w.wr.sg_list.front().addr;
  }
  m.read_request.size = static_cast<std::uint32_t>(w.length);
  m.read_request.source_stag = w.wr.rkey;
  m.read_request.source_tagged_offset = w.wr.remote_addr;
  append_fpdu(q, out, m, 0, no_payload);
  ++s.read_request_msn;
  w.started = true;
  ++q.rd_atomic_in_flight;
  ++q.next_wqe;
  return true;
}

// The next FPDU of a Send or RDMA Write; its last one completes the WQE.
bool send_data_segment(Device& d, Qp& q, SendWqe& w, UninitialisedBytes& out) {
  IwarpStream& s = *q.stream;
  const bool is_write = w.wr.opcode == WrOpcode::rdma_write;
  const std::size_t header = is_write ? wire::iwarp::Ddp::tagged_length : wire::iwarp::Ddp::untagged_length;
  const std::uint64_t offset = s.wqe_sent;
  const std::uint32_t n =
      static_cast<std::uint32_t>(std::min<std::uint64_t>(w.length - offset, max_ulpdu(s.params) - header));
  const bool last = offset + n == w.length;
  RdmapMessage m =
      is_write ? tagged(RdmapOpcode::write, w.wr.rkey, w.wr.remote_addr + offset, last)
               : untagged(send_opcode(w.wr), rdmap_queue::send, s.send_msn, static_cast<std::uint32_t>(offset), last);
  m.invalidate_stag = w.wr.opcode == WrOpcode::send_with_inv ? w.wr.invalidate_rkey : 0;
  const auto fill = [&](std::span<std::uint8_t> p) {
    if (!(w.wr.flags & send_flags::inline_data)) return d.gather(w.wr.sg_list, q.init.pd, offset, p);
    std::copy_n(w.wr.inline_data.begin() + static_cast<std::ptrdiff_t>(offset), p.size(), p.begin());
    return true;
  };
  if (!append_fpdu(q, out, m, n, fill)) {
    Completer::fail(d, q, w, WcStatus::loc_prot_err);  // a bad lkey or range (s10.6.3.3)
    return false;
  }
  w.started = true;
  s.wqe_sent += n;
  if (!last) return true;
  if (!is_write) ++s.send_msn;
  s.wqe_sent = 0;
  w.complete = true;
  ++q.next_wqe;
  Completer::retire(d, q);
  return true;
}

bool may_start(const Qp& q, const SendWqe& w) {
  // A fenced WR waits for the RDMA Reads before it (RFC 5040 s5.5); a Read waits for room
  // under the ORD the MPA exchange settled.
  if ((w.wr.flags & send_flags::fence) && q.rd_atomic_in_flight > 0) return false;
  if (w.wr.opcode == WrOpcode::rdma_read)
    return q.rd_atomic_in_flight < std::max<std::uint16_t>(q.stream->params.ord, 1);
  return true;
}

bool send_request(Device& d, Qp& q, UninitialisedBytes& out) {
  // In SQD the sender finishes the message it started and starts none (s10.3.1).
  const bool draining = q.state() == QpState::sqd;
  if (q.state() != QpState::rts && !draining) return false;
  while (q.next_wqe < q.sq.size()) {
    SendWqe& w = q.sq[q.next_wqe];
    if (w.wr.opcode == WrOpcode::local_inv) {
      if (q.next_wqe != 0 || draining) return false;  // as a fence (s10.6.7.2.1)
      Requester::execute_local(d, q, w);
      ++q.next_wqe;
      Completer::retire(d, q);
      continue;
    }
    if (w.complete) {  // failed before it was sent
      ++q.next_wqe;
      continue;
    }
    if (!w.started && (draining || !may_start(q, w))) return false;
    if (w.wr.opcode == WrOpcode::rdma_read) return send_read_request(q, w, out);
    if (send_data_segment(d, q, w, out)) return true;
  }
  return false;
}

}  // namespace

bool iwarp_supports(WrOpcode op) {
  return op == WrOpcode::send || op == WrOpcode::send_with_inv || op == WrOpcode::rdma_write ||
         op == WrOpcode::rdma_read || op == WrOpcode::local_inv;
}

bool IwarpSender::next(Device& d, Qp& q, UninitialisedBytes& out) {
  IwarpStream& s = *q.stream;
  if (s.closing) return false;
  if (s.terminate) return send_terminate(d, q, out);
  if (q.state() == QpState::err) return false;
  if (!s.reads.empty() && (q.state() == QpState::rts || q.state() == QpState::sqd))
    return send_read_response(d, q, out);
  return send_request(d, q, out);
}

}  // namespace softrdma::core
