// Terminate messages (RFC 5040 s4.8, s7.1): the last message of a stream that found an error,
// naming the layer, type and code of the error and copying the headers of the segment in
// error; and the statuses a requester's WQE gets when the peer ends the stream with one.
#include "emulator/core/iwarp_transport.hpp"

namespace softrdma::core {
namespace {

using wire::iwarp::RdmapMessage;
using wire::iwarp::RdmapOpcode;
using wire::iwarp::RdmapTerminate;

void copy_headers(const RdmapMessage& m, RdmapTerminate& t) {
  t.has_ddp_header = true;
  t.segment_length_valid = true;
  t.ddp_segment_length = static_cast<std::uint16_t>(m.length());
  t.ddp_header_length = static_cast<std::uint8_t>(m.ddp.length());
  m.ddp.emit(t.ddp_header.data());
  if (m.opcode != RdmapOpcode::read_request) return;
  using H = wire::iwarp::RdmapReadRequestHeader;
  std::uint8_t* h = t.rdmap_header.data();
  H::sink_stag::set(h, m.read_request.sink_stag);
  H::sink_tagged_offset::set(h, m.read_request.sink_tagged_offset);
  H::size::set(h, m.read_request.size);
  H::source_stag::set(h, m.read_request.source_stag);
  H::source_tagged_offset::set(h, m.read_request.source_tagged_offset);
  t.has_rdmap_header = true;
  t.rdmap_header_present = true;
}

}  // namespace

void iwarp_terminate(Device& d, Qp& q, wire::iwarp::TerminateCause cause, const RdmapMessage* in_error) {
  IwarpStream& s = *q.stream;
  if (s.terminate || s.closing) return;  // the stream's first error is the one reported
  RdmapTerminate t;
  t.layer = cause.layer;
  t.error_type = cause.error_type;
  t.error_code = cause.error_code;
  if (in_error) copy_headers(*in_error, t);
  s.terminate = t;
  ++d.iwarp_counters().terminates_sent;
  d.enter_error(q);
}

WcStatus terminate_status(const RdmapTerminate& t) {
  namespace layer = wire::iwarp::terminate_layer;
  constexpr std::uint8_t kProtection = 1, kUntaggedBuffer = 2;
  // The peer refused our memory access (RDMAP remote protection, DDP tagged buffer errors),
  // found no or too small a receive buffer (DDP untagged), or failed otherwise.
  if ((t.layer == layer::rdmap && t.error_type == kProtection) || (t.layer == layer::ddp && t.error_type == 1))
    return WcStatus::rem_access_err;
  if (t.layer == layer::ddp && t.error_type == kUntaggedBuffer) return WcStatus::rem_inv_req_err;
  return WcStatus::rem_op_err;
}

}  // namespace softrdma::core
