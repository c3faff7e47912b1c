// The iWARP receiver (RFC 5040 s5, RFC 5041 s5 and s7, RFC 5044 s4): decodes the peer's FPDUs
// and places them. Untagged Sends fill receive WQEs in MSN order; tagged RDMA Writes and Read
// Responses go where their STag and tagged offset say, after the checks of RFC 5041 s7.2;
// Read Requests are queued for the sender within the IRD. Any error ends the stream with a
// Terminate (iwarp_terminate.cpp); a Terminate from the peer ends it here.
#include <algorithm>
#include <variant>

#include "emulator/core/iwarp_transport.hpp"
#include "emulator/core/receive_queue.hpp"
#include "emulator/core/transport.hpp"

namespace softrdma::core {
namespace {

using wire::iwarp::MpaItemKind;
using wire::iwarp::MpaStreamItem;
using wire::iwarp::RdmapMessage;
using wire::iwarp::RdmapOpcode;
using wire::iwarp::TerminateCause;
namespace cause = wire::iwarp::terminate_cause;

// The frame-level errors of the stream decoder, as the layer that finds them reports them.
TerminateCause decode_error_cause(wire::Error e) {
  switch (e) {
    case wire::Error::unknown_opcode:
      return cause::rdmap_unexpected_opcode;
    case wire::Error::bad_buffer_model:
      return cause::ddp_untagged_invalid_qn;
    case wire::Error::bad_version:
      return cause::rdmap_invalid_version;
    case wire::Error::bad_crc:
      return cause::mpa_crc_error;
    default:
      return cause::mpa_fpdu_length_error;
  }
}

struct TaggedChecks {
  TerminateCause invalid_stag, not_associated, access_rights, base_or_bounds;
};
// RFC 5041 s7.2 reports a bad sink STag of a tagged segment (Write, Read Response) at the DDP
// layer; RFC 5040 s7.4 a bad source STag of a Read Request at RDMAP.
constexpr TaggedChecks kSinkChecks{cause::ddp_tagged_invalid_stag, cause::ddp_tagged_stag_not_associated,
                                   cause::rdmap_access_rights, cause::ddp_tagged_base_or_bounds};
constexpr TaggedChecks kSourceChecks{cause::rdmap_invalid_stag, cause::rdmap_stag_not_associated,
                                     cause::rdmap_access_rights, cause::rdmap_base_or_bounds};

// The host address of [offset, offset + length) under `stag` for the peer, or why not. A
// zero-length access touches no memory and is not checked (as IBTA C9-88).
std::variant<std::uint64_t, TerminateCause> remote_range(Device& d, const Qp& q, std::uint32_t stag,
                                                         std::uint64_t offset, std::uint64_t length,
                                                         std::uint32_t access, const TaggedChecks& c) {
  if (length == 0) return std::uint64_t{0};
  const Region* r = d.find_region(stag);
  if (!r || !r->valid) return c.invalid_stag;
  if (r->pd != q.init.pd || (r->kind == Region::Kind::mw_type2 && r->bound_qp != q.qpn)) return c.not_associated;
  if (!(r->access & access) || !(q.attr.qp_access_flags & access)) return c.access_rights;
  const auto host = d.translate(stag, q.init.pd, offset, length, access, q.qpn);
  if (!host) return c.base_or_bounds;
  return *host;
}

void complete_recv(Device& d, Qp& q, WcStatus status, std::uint32_t byte_len, std::uint32_t invalidated,
                   bool solicited) {
  Wc wc;
  wc.wr_id = q.recv.wr.wr_id;
  wc.status = status;
  wc.opcode = WcOpcode::recv;
  wc.byte_len = byte_len;
  wc.qp_num = q.qpn;
  if (invalidated) {
    wc.imm_data = invalidated;
    wc.wc_flags = wc_flags::with_inv;
  }
  q.in_send = false;
  d.complete(q.init.recv_cq, wc, solicited);
}

void place_send(Device& d, Qp& q, const RdmapMessage& m) {
  IwarpStream& s = *q.stream;
  if (m.ddp.message_sequence_number != s.expected_send_msn)
    return iwarp_terminate(d, q, cause::ddp_untagged_msn_range, &m);
  if (!q.in_send) {
    std::optional<RecvWqe> r = take_recv(d, q);
    if (!r) return iwarp_terminate(d, q, cause::ddp_untagged_no_buffer, &m);
    q.recv = std::move(*r);
    q.recv_offset = 0;
    q.in_send = true;
  }
  const std::uint64_t end = std::uint64_t{m.ddp.message_offset} + m.payload.size();
  if (end > q.recv.length) {
    complete_recv(d, q, WcStatus::loc_len_err, 0, 0, false);
    return iwarp_terminate(d, q, cause::ddp_untagged_too_long, &m);
  }
  if (!d.scatter(q.recv.wr.sg_list, q.init.pd, m.ddp.message_offset, m.payload)) {
    complete_recv(d, q, WcStatus::loc_prot_err, 0, 0, false);
    return iwarp_terminate(d, q, cause::rdmap_catastrophic_stream, &m);
  }
  q.recv_offset = std::max(q.recv_offset, end);
  if (!m.ddp.last) return;
  ++s.expected_send_msn;
  // A message's length is where its last segment ends (RFC 5041 s5.3).
  const auto length = static_cast<std::uint32_t>(end);
  const bool invalidates = m.info().invalidates;
  const bool solicited = m.opcode == RdmapOpcode::send_se || m.opcode == RdmapOpcode::send_se_invalidate;
  if (invalidates && !d.invalidate(q.init.pd, m.invalidate_stag)) {
    complete_recv(d, q, WcStatus::loc_prot_err, length, 0, solicited);
    return iwarp_terminate(d, q, cause::rdmap_cannot_invalidate, &m);
  }
  complete_recv(d, q, WcStatus::success, length, invalidates ? m.invalidate_stag : 0, solicited);
}

void place_write(Device& d, Qp& q, const RdmapMessage& m) {
  const auto host =
      remote_range(d, q, m.ddp.stag, m.ddp.tagged_offset, m.payload.size(), access::remote_write, kSinkChecks);
  if (const auto* c = std::get_if<TerminateCause>(&host)) return iwarp_terminate(d, q, *c, &m);
  if (!m.payload.empty() && !d.memory().write(std::get<std::uint64_t>(host), m.payload))
    iwarp_terminate(d, q, cause::rdmap_catastrophic_stream, &m);
}

void accept_read_request(Device& d, Qp& q, const RdmapMessage& m) {
  IwarpStream& s = *q.stream;
  if (m.ddp.message_sequence_number != s.expected_read_request_msn)
    return iwarp_terminate(d, q, cause::ddp_untagged_msn_range, &m);
  // More Read Requests than the IRD we granted find no buffer on queue 1 (RFC 5040 s6.1).
  if (s.reads.size() >= std::max<std::uint16_t>(s.params.ird, 1))
    return iwarp_terminate(d, q, cause::ddp_untagged_no_buffer, &m);
  const wire::iwarp::RdmapReadRequest& r = m.read_request;
  const auto host =
      remote_range(d, q, r.source_stag, r.source_tagged_offset, r.size, access::remote_read, kSourceChecks);
  if (const auto* c = std::get_if<TerminateCause>(&host)) return iwarp_terminate(d, q, *c, &m);
  ++s.expected_read_request_msn;
  s.reads.push_back({r.sink_stag, r.sink_tagged_offset, std::get<std::uint64_t>(host), r.size, 0});
}

// The READ that the next Read Response answers: the oldest one issued and not complete.
SendWqe* outstanding_read(Qp& q) {
  for (SendWqe& w : q.sq)
    if (w.wr.opcode == WrOpcode::rdma_read && w.started && !w.complete) return &w;
  return nullptr;
}

void place_read_response(Device& d, Qp& q, const RdmapMessage& m) {
  IwarpStream& s = *q.stream;
  SendWqe* w = outstanding_read(q);
  if (!w) return iwarp_terminate(d, q, cause::rdmap_unexpected_opcode, &m);
  const Sge sink = w->wr.sg_list.empty() ? Sge{} : w->wr.sg_list.front();
  if (m.ddp.stag != sink.lkey) return iwarp_terminate(d, q, cause::ddp_tagged_invalid_stag, &m);
  const std::uint64_t offset = m.ddp.tagged_offset - sink.addr;
  if (m.ddp.tagged_offset < sink.addr || offset > w->length || m.payload.size() > w->length - offset)
    return iwarp_terminate(d, q, cause::ddp_tagged_base_or_bounds, &m);
  if (!d.scatter(w->wr.sg_list, q.init.pd, offset, m.payload)) {
    Completer::fail(d, q, *w, WcStatus::loc_prot_err);
    return iwarp_terminate(d, q, cause::rdmap_catastrophic_stream, &m);
  }
  s.read_response_received += m.payload.size();
  if (!m.ddp.last) return;
  const bool whole = s.read_response_received == w->length;
  s.read_response_received = 0;
  --q.rd_atomic_in_flight;
  w->complete = true;
  if (!whole) w->status = WcStatus::bad_resp_err;  // the last segment came before all the data
  Completer::retire(d, q);
}

// The peer ended the stream (RFC 5040 s7.1): the operation it refused fails, the rest flush.
void on_terminate(Device& d, Qp& q, const RdmapMessage& m) {
  ++d.iwarp_counters().terminates_received;
  for (SendWqe& w : q.sq) {
    if (!w.complete) {
      if (w.started) return Completer::fail(d, q, w, terminate_status(m.terminate));
      break;
    }
  }
  d.enter_error(q);
}

void on_fpdu(Device& d, Qp& q, const MpaStreamItem& item) {
  ++q.counters.rcvd_pkts;
  q.counters.rcvd_bytes += item.end_offset - item.stream_offset;
  const RdmapMessage& m = item.fpdu.message;
  if (item.fpdu.crc_checked && !item.fpdu.crc_ok) {
    ++d.iwarp_counters().crc_err;
    return iwarp_terminate(d, q, cause::mpa_crc_error, nullptr);
  }
  switch (m.opcode) {
    case RdmapOpcode::write:
      return place_write(d, q, m);
    case RdmapOpcode::read_request:
      return accept_read_request(d, q, m);
    case RdmapOpcode::read_response:
      return place_read_response(d, q, m);
    case RdmapOpcode::send:
    case RdmapOpcode::send_invalidate:
    case RdmapOpcode::send_se:
    case RdmapOpcode::send_se_invalidate:
      return place_send(d, q, m);
    case RdmapOpcode::terminate:
      return on_terminate(d, q, m);
  }
}

}  // namespace

void IwarpReceiver::on_bytes(Device& d, Qp& q, std::span<const std::uint8_t> bytes) {
  q.stream->decoder.feed(bytes, [&](const MpaStreamItem& item) {
    // After an error the rest of the stream is not looked at (RFC 5040 s7.1).
    if (q.state() == QpState::err) return;
    if (item.kind == MpaItemKind::fpdu) return on_fpdu(d, q, item);
    ++q.counters.rcvd_pkts;
    if (item.error == wire::Error::bad_crc) ++d.iwarp_counters().crc_err;  // one whose header made no sense
    iwarp_terminate(d, q, decode_error_cause(item.error), nullptr);
  });
}

}  // namespace softrdma::core
