#include "wire/iwarp/rdmap.hpp"

#include <algorithm>

namespace wire::iwarp {
namespace {

using Term = RdmapTerminateHeader;
using ReadReq = RdmapReadRequestHeader;

// Linux siw declares the control word with bit-fields that a little-endian host lays out
// low bit first: Layer in the low nibble of the first octet and EType in the high one, M, D
// and R in the three low bits of the third octet, where RFC 5040 s4.8 has them in the high
// bits. A word whose RFC flag bits are clear while those low bits are not is read that way.
constexpr std::uint8_t kSiwM = 0x01, kSiwD = 0x02, kSiwR = 0x04;
bool siw_bit_order(const std::uint8_t* control) { return (control[2] & 0xE0) == 0 && (control[2] & 0x07) != 0; }

// With R set, the segment in error's Read Request header follows unless the copied DDP
// header shows that segment was something else (see RdmapTerminateHeader).
bool copies_rdmap_header(bool r, std::span<const std::uint8_t> copied_ddp_header) {
  if (!r) return false;
  if (copied_ddp_header.empty()) return true;
  return Rdmap::opcode::get(copied_ddp_header.data() + 1) == static_cast<unsigned>(RdmapOpcode::read_request);
}

Result<RdmapTerminate> parse_terminate(std::span<const std::uint8_t> body) {
  if (body.size() < Term::control_length) return Error::truncated;
  const std::uint8_t* p = body.data();
  RdmapTerminate t;
  t.siw_bit_order = siw_bit_order(p);
  t.layer = t.siw_bit_order ? p[0] & 0x0F : Term::layer::get(p);
  t.error_type = t.siw_bit_order ? p[0] >> 4 : Term::error_type::get(p);
  t.error_code = Term::error_code::get(p);
  t.segment_length_valid = t.siw_bit_order ? (p[2] & kSiwM) != 0 : Term::segment_length_valid::get(p);
  t.has_ddp_header = t.siw_bit_order ? (p[2] & kSiwD) != 0 : Term::has_ddp_header::get(p);
  t.has_rdmap_header = t.siw_bit_order ? (p[2] & kSiwR) != 0 : Term::has_rdmap_header::get(p);
  std::size_t at = Term::control_length;
  if (t.has_ddp_header) {
    // The length field and at least the copied DDP control octet, to learn T.
    if (body.size() < at + Term::segment_length_length + 1) return Error::truncated;
    t.ddp_segment_length = Term::ddp_segment_length::get(p + at);
    at += Term::segment_length_length;
    const std::size_t n = Ddp::length(Ddp::tagged::get(p + at));
    if (body.size() < at + n) return Error::truncated;
    std::copy_n(p + at, n, t.ddp_header.begin());
    t.ddp_header_length = static_cast<std::uint8_t>(n);
    at += n;
  }
  if (copies_rdmap_header(t.has_rdmap_header, std::span(t.ddp_header).first(t.ddp_header_length))) {
    if (body.size() < at + ReadReq::length) return Error::truncated;
    std::copy_n(p + at, ReadReq::length, t.rdmap_header.begin());
    t.rdmap_header_present = true;
  }
  return t;
}

void emit_terminate(const RdmapTerminate& t, std::uint8_t* out) {
  std::fill_n(out, Term::control_length, std::uint8_t{0});
  Term::error_code::set(out, t.error_code);
  if (t.siw_bit_order) {
    out[0] = static_cast<std::uint8_t>(t.error_type << 4 | (t.layer & 0x0F));
    out[2] = static_cast<std::uint8_t>((t.segment_length_valid ? kSiwM : 0) | (t.has_ddp_header ? kSiwD : 0) |
                                       (t.has_rdmap_header ? kSiwR : 0));
  } else {
    Term::layer::set(out, t.layer);
    Term::error_type::set(out, t.error_type);
    Term::segment_length_valid::set(out, t.segment_length_valid);
    Term::has_ddp_header::set(out, t.has_ddp_header);
    Term::has_rdmap_header::set(out, t.has_rdmap_header);
  }
  out += Term::control_length;
  if (t.has_ddp_header) {
    Term::ddp_segment_length::set(out, t.ddp_segment_length);
    out = std::copy_n(t.ddp_header.begin(), t.ddp_header_length, out + Term::segment_length_length);
  }
  if (t.rdmap_header_present) std::copy(t.rdmap_header.begin(), t.rdmap_header.end(), out);
}

std::size_t body_length(const RdmapMessage& m) {
  switch (m.info().body) {
    case RdmapBody::none:
      return 0;
    case RdmapBody::read_request:
      return ReadReq::length;
    case RdmapBody::terminate:
      return m.terminate.length();
  }
  return 0;
}

}  // namespace

std::size_t RdmapTerminate::length() const {
  return Term::control_length + (has_ddp_header ? Term::segment_length_length + ddp_header_length : 0) +
         (rdmap_header_present ? ReadReq::length : 0);
}

Result<RdmapMessage> RdmapMessage::parse(std::span<const std::uint8_t> ulpdu) {
  const Result<DdpHeader> ddp = DdpHeader::parse(ulpdu);
  if (!ddp) return ddp.error();
  RdmapMessage m;
  m.ddp = *ddp;
  const std::uint8_t control = ddp->ulp_control;
  if (Rdmap::rv::get(&control) != Rdmap::version) return Error::bad_version;  // RFC 5040 s4.1
  const unsigned op = Rdmap::opcode::get(&control);
  if (op >= rdmap_opcodes.size()) return Error::unknown_opcode;  // RFC 5040 s4.2
  m.opcode = static_cast<RdmapOpcode>(op);
  const RdmapOpcodeInfo& inf = m.info();
  // RFC 5040 s4.2: each message has one buffer model and, untagged, one queue.
  if (ddp->tagged != inf.tagged) return Error::bad_buffer_model;
  if (!ddp->tagged && ddp->queue_number != inf.queue) return Error::bad_buffer_model;
  if (inf.invalidates) m.invalidate_stag = ddp->ulp_word;  // RFC 5040 s4.1

  std::span<const std::uint8_t> body = ulpdu.subspan(ddp->length());
  if (inf.body == RdmapBody::read_request) {
    if (body.size() < ReadReq::length) return Error::truncated;
    const std::uint8_t* p = body.data();
    m.read_request = {ReadReq::sink_stag::get(p), ReadReq::sink_tagged_offset::get(p), ReadReq::size::get(p),
                      ReadReq::source_stag::get(p), ReadReq::source_tagged_offset::get(p)};
  } else if (inf.body == RdmapBody::terminate) {
    const Result<RdmapTerminate> t = parse_terminate(body);
    if (!t) return t.error();
    m.terminate = *t;
  }
  m.payload = body.subspan(body_length(m));
  return m;
}

std::size_t RdmapMessage::header_length() const { return ddp.length() + body_length(*this); }

void RdmapMessage::emit(std::uint8_t* out) const {
  DdpHeader h = ddp;
  h.ulp_control = Rdmap::control(static_cast<unsigned>(opcode));
  if (!h.tagged) h.ulp_word = info().invalidates ? invalidate_stag : 0;
  h.emit(out);
  std::uint8_t* body = out + h.length();
  if (info().body == RdmapBody::read_request) {
    ReadReq::sink_stag::set(body, read_request.sink_stag);
    ReadReq::sink_tagged_offset::set(body, read_request.sink_tagged_offset);
    ReadReq::size::set(body, read_request.size);
    ReadReq::source_stag::set(body, read_request.source_stag);
    ReadReq::source_tagged_offset::set(body, read_request.source_tagged_offset);
  } else if (info().body == RdmapBody::terminate) {
    emit_terminate(terminate, body);
  }
  std::copy(payload.begin(), payload.end(), body + body_length(*this));
}

}  // namespace wire::iwarp
