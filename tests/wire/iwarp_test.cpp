// iWARP codecs: MPA Request/Reply frames, FPDU framing, DDP and RDMAP headers, and the
// MpaStreamDecoder. Golden bytes are TCP payloads from the Linux siw captures in
// SOFTRDMA_SHARED_DIR/captures/linux-guests (siw sends a zero CRC field when CRCs are off).
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "tests/wire/hex.hpp"
#include "wire/crc32.hpp"
#include "wire/iwarp/mpa.hpp"
#include "wire/iwarp/mpa_stream.hpp"
#include "wire/iwarp/rdmap.hpp"

using namespace wire::iwarp;
using Bytes = std::vector<std::uint8_t>;
using test::from_hex;
using test::to_hex;

namespace {

// Frames as hex, one string per header field (RFC 5044 s7.1, RFC 5041 s4, RFC 5040 s4).
// clang-format off
// siw-rping.pcap frames 4 and 6: revision 2, enhanced, IRD 1, ORD 1.
const std::string kRequest = "4d504120494420526571204672616d65" "10020004" "00010001";
const std::string kReply = "4d504120494420526570204672616d65" "10020004" "00010001";
// A revision 1 request with markers, CRC and three bytes of private data.
const std::string kRequestRev1 = "4d504120494420526571204672616d65" "c0010003" "616263";

// siw-rping.pcap frame 8: Send, 16 bytes.
const std::string kSend = "0022" "4143" "00000000" "00000000" "00000001" "00000000"
                          "0000557461ac2370b0d6410000000040" "00000000";
// siw-rping.pcap frame 9: RDMA Read Request.
const std::string kReadRequest = "002e" "4141" "00000000" "00000001" "00000001" "00000000"
                                 "79433d00" "000056077a6a5550" "00000040" "b0d64100" "0000557461ac2370"
                                 "00000000";
// siw-rping.pcap frame 10: RDMA Read Response, 64 bytes.
const std::string kReadResponse = "004e" "c142" "79433d00" "000056077a6a5550"
                                  "72646d612d70696e672d303a204142434445464748494a4b4c4d4e4f5051525354"
                                  "55565758595a5b5c5d5e5f606162636465666768696a6b6c6d6e6f707172"
                                  "00" "00000000";
// siw-send-bw.pcap frame 64: RDMA Write, 4 bytes.
const std::string kWrite = "0012" "c140" "b6c04d00" "000055fe1f55bf04" "02000000" "00000000";
// Send with Invalidate of STag 0x12345678, 5 bytes (3 pad bytes).
const std::string kSendInvalidate = "0017" "4144" "12345678" "00000000" "00000007" "00000000"
                                    "68656c6c6f" "000000" "00000000";
// Terminate in RFC 5040 s4.8's bit order for a DDP error (layer 1 DDP, type 2 untagged buffer,
// code 1 invalid QN) with M and D: segment length 0x22 and the 18-byte DDP header in error.
const std::string kTerminateDdp = "002a" "4147" "00000000" "00000002" "00000001" "00000000"
                                  "1201" "c000" "0022" "4143" "00000000" "00000005" "00000001" "00000000"
                                  "00000000";
// Terminate for an RDMAP remote protection error (invalid STag) on a Read Request: M, D, R,
// the DDP header and the 28-byte Read Request header.
const std::string kTerminateRead = "0046" "4147" "00000000" "00000002" "00000001" "00000000"
                                   "0100" "e000" "002e" "4141" "00000000" "00000001" "00000001" "00000000"
                                   "79433d00" "000056077a6a5550" "00000040" "b0d64100" "0000557461ac2370"
                                   "00000000";
// Linux siw 6.12's answer to a Read Request whose source STag (0x00abcd00) does not exist,
// captured on the interop bridge: RDMAP remote protection error, invalid STag, with M, D and R,
// its control word in siw's little-endian bit-field order (0x10, then 0x07 for M|D|R).
const std::string kSiwTerminateRead = "0046" "4147" "00000000" "00000002" "00000001" "00000000"
                                      "1000" "0700" "0000" "4141" "00000000" "00000001" "00000064" "00000000"
                                      "00000100" "000055c7f03c4f44" "00000064" "00abcd00" "000056243a39ce70"
                                      "00000000";
// clang-format on

// Parses a marker-free FPDU all the way to RDMAP; fails the test if anything is refused.
RdmapMessage parse_fpdu(const Bytes& fpdu) {
  const auto view = FpduView::check(fpdu, false);
  REQUIRE(view.ok());
  const auto m = RdmapMessage::parse(view->ulpdu());
  REQUIRE(m.ok());
  return *m;
}

// An FPDU's bytes with their parse, whose payload points into them: kept together.
struct ParsedFpdu {
  Bytes bytes;
  RdmapMessage message;
};

ParsedFpdu parse_hex(const std::string& hex) {
  ParsedFpdu p{from_hex(hex), {}};
  p.message = parse_fpdu(p.bytes);
  return p;
}

// Re-emits `m` as an FPDU into a buffer poisoned with 0xA5, so any byte not written shows.
Bytes emit_poisoned(const RdmapMessage& m, bool crc) {
  Bytes out(fpdu_length(m.length()), 0xA5);
  m.emit(out.data() + Fpdu::length_field);
  REQUIRE(seal_fpdu(out.data(), m.length(), crc) == out.size());
  return out;
}

Bytes emit_poisoned(const MpaRequestReply& f) {
  Bytes out(f.length(), 0xA5);
  f.emit(out.data());
  return out;
}

void check_same(const RdmapMessage& a, const RdmapMessage& b) {
  CHECK(a.ddp.tagged == b.ddp.tagged);
  CHECK(a.ddp.last == b.ddp.last);
  CHECK(a.opcode == b.opcode);
  CHECK(a.invalidate_stag == b.invalidate_stag);
  CHECK(a.read_request == b.read_request);
  CHECK(a.terminate == b.terminate);
  CHECK(to_hex(a.payload) == to_hex(b.payload));
  if (a.ddp.tagged) {
    CHECK(a.ddp.stag == b.ddp.stag);
    CHECK(a.ddp.tagged_offset == b.ddp.tagged_offset);
  } else {
    CHECK(a.ddp.queue_number == b.ddp.queue_number);
    CHECK(a.ddp.message_sequence_number == b.ddp.message_sequence_number);
    CHECK(a.ddp.message_offset == b.ddp.message_offset);
  }
}

// Decodes `stream`, cut into chunks at the offsets in `cuts`, into one line per item.
std::vector<std::string> decode(const Bytes& stream, const std::vector<std::size_t>& cuts, MpaStreamDecoder& d) {
  std::vector<std::string> lines;
  std::size_t at = 0;
  auto cut_points = cuts;
  cut_points.push_back(stream.size());
  for (std::size_t end : cut_points) {
    d.feed(std::span(stream).subspan(at, end - at), [&](const MpaStreamItem& item) {
      lines.push_back(std::to_string(item.stream_offset) + "-" + std::to_string(item.end_offset) + " " +
                      item.describe());
    });
    at = end;
  }
  return lines;
}

std::vector<std::string> decode(const Bytes& stream, const std::vector<std::size_t>& cuts = {}) {
  MpaStreamDecoder d;
  return decode(stream, cuts, d);
}

Bytes concat(std::initializer_list<std::string> hex) {
  Bytes out;
  for (const std::string& h : hex) {
    const Bytes b = from_hex(h);
    out.insert(out.end(), b.begin(), b.end());
  }
  return out;
}

}  // namespace

TEST_CASE("MPA Request/Reply frames round-trip byte for byte", "[wire][iwarp]") {
  for (const std::string& hex : {kRequest, kReply, kRequestRev1}) {
    INFO(hex);
    const Bytes bytes = from_hex(hex);
    const auto f = MpaRequestReply::parse(bytes);
    REQUIRE(f.ok());
    CHECK(to_hex(emit_poisoned(*f)) == hex);
    const auto back = MpaRequestReply::parse(emit_poisoned(*f));
    REQUIRE(back.ok());
    CHECK(*back == *f);
  }
  const auto req = MpaRequestReply::parse(from_hex(kRequest));
  CHECK(req->kind == MpaFrameKind::request);
  CHECK(req->revision == 2);
  REQUIRE(req->enhanced);
  CHECK(*req->enhanced == MpaEnhanced{1, 1, false, false, false, false});
  CHECK(req->private_data.empty());
  CHECK(MpaRequestReply::parse(from_hex(kReply))->kind == MpaFrameKind::reply);

  const auto rev1 = MpaRequestReply::parse(from_hex(kRequestRev1));
  CHECK(rev1->markers);
  CHECK(rev1->crc);
  CHECK_FALSE(rev1->reject);
  CHECK_FALSE(rev1->enhanced);
  CHECK(rev1->private_data == Bytes{'a', 'b', 'c'});
}

TEST_CASE("MPA enhanced frames carry IRD/ORD and the RTR bits", "[wire][iwarp]") {
  MpaRequestReply f;
  f.kind = MpaFrameKind::reply;
  f.revision = 2;
  f.reject = true;
  f.enhanced = MpaEnhanced{0x3FFF, 0x1234, true, true, false, true};
  f.private_data = {1, 2, 3};
  const Bytes bytes = emit_poisoned(f);
  CHECK(to_hex(bytes) == "4d504120494420526570204672616d65"
                         "3002"
                         "0007"
                         "ffff"
                         "5234"
                         "010203");
  const auto back = MpaRequestReply::parse(bytes);
  REQUIRE(back.ok());
  CHECK(*back == f);

  // Revision 1 has no enhanced data: the flag is not sent and the words are not taken.
  f.revision = 1;
  CHECK(to_hex(emit_poisoned(f)).substr(32, 8) == "20010003");
}

TEST_CASE("MPA frames refuse bad input", "[wire][iwarp]") {
  const Bytes good = from_hex(kRequest);
  CHECK(MpaRequestReply::parse(std::span(good).first(19)).error() == wire::Error::truncated);
  CHECK(MpaRequestReply::parse(std::span(good).first(23)).error() == wire::Error::truncated);

  Bytes key = good;
  key[9] = 'X';
  CHECK(MpaRequestReply::parse(key).error() == wire::Error::bad_mpa_key);

  for (unsigned rev : {0u, 3u, 255u}) {
    Bytes b = good;
    b[17] = static_cast<std::uint8_t>(rev);
    CHECK(MpaRequestReply::parse(b).error() == wire::Error::bad_version);
  }

  // PD_Length 512 is the most RFC 5044 s7.1 allows.
  Bytes big = from_hex("4d504120494420526571204672616d65"
                       "00010200");
  big.resize(20 + 512, 0x55);
  CHECK(MpaRequestReply::parse(big).ok());
  big[19] = 0x01;  // 513
  big.push_back(0x55);
  CHECK(MpaRequestReply::parse(big).error() == wire::Error::oversized);

  // Enhanced, but the private data cannot hold the IRD/ORD words.
  CHECK(MpaRequestReply::parse(from_hex("4d504120494420526571204672616d65"
                                        "10020002"
                                        "0001"))
            .error() == wire::Error::bad_length);
}

TEST_CASE("FPDUs from siw round-trip byte for byte", "[wire][iwarp]") {
  for (const std::string& hex :
       {kSend, kReadRequest, kReadResponse, kWrite, kSendInvalidate, kTerminateDdp, kTerminateRead}) {
    INFO(hex);
    const Bytes bytes = from_hex(hex);
    const RdmapMessage m = parse_fpdu(bytes);
    CHECK(to_hex(emit_poisoned(m, false)) == hex);
    check_same(parse_fpdu(emit_poisoned(m, false)), m);
  }
}

TEST_CASE("FPDU fields", "[wire][iwarp]") {
  const auto [send_bytes, send] = parse_hex(kSend);
  CHECK(send.opcode == RdmapOpcode::send);
  CHECK_FALSE(send.ddp.tagged);
  CHECK(send.ddp.last);
  CHECK(send.ddp.queue_number == rdmap_queue::send);
  CHECK(send.ddp.message_sequence_number == 1);
  CHECK(send.payload.size() == 16);

  const auto [rr_bytes, rr] = parse_hex(kReadRequest);
  CHECK(rr.opcode == RdmapOpcode::read_request);
  CHECK(rr.read_request == RdmapReadRequest{0x79433d00, 0x56077a6a5550, 64, 0xb0d64100, 0x557461ac2370});
  CHECK(rr.payload.empty());

  const auto [resp_bytes, resp] = parse_hex(kReadResponse);
  CHECK(resp.opcode == RdmapOpcode::read_response);
  CHECK(resp.ddp.tagged);
  CHECK(resp.ddp.stag == 0x79433d00);
  CHECK(resp.ddp.tagged_offset == 0x56077a6a5550);
  CHECK(resp.payload.size() == 64);

  const auto [inv_bytes, inv] = parse_hex(kSendInvalidate);
  CHECK(inv.opcode == RdmapOpcode::send_invalidate);
  CHECK(inv.invalidate_stag == 0x12345678);
  CHECK(inv.payload.size() == 5);
  CHECK(fpdu_pad_length(inv.length()) == 3);

  const auto [term_bytes, term] = parse_hex(kTerminateDdp);
  CHECK(term.opcode == RdmapOpcode::terminate);
  CHECK(term.ddp.queue_number == rdmap_queue::terminate);
  CHECK(term.terminate.layer == 1);
  CHECK(term.terminate.error_type == 2);
  CHECK(term.terminate.error_code == 1);
  CHECK(term.terminate.segment_length_valid);
  CHECK(term.terminate.has_ddp_header);
  CHECK_FALSE(term.terminate.has_rdmap_header);
  CHECK(term.terminate.ddp_segment_length == 0x22);
  CHECK(term.terminate.ddp_header_length == 18);
  CHECK(term.payload.empty());

  const auto [term_rr_bytes, term_rr] = parse_hex(kTerminateRead);
  CHECK(term_rr.terminate.rdmap_header_present);
  CHECK(to_hex(term_rr.terminate.rdmap_header) == "79433d00"
                                                  "000056077a6a5550"
                                                  "00000040"
                                                  "b0d64100"
                                                  "0000557461ac2370");
}

TEST_CASE("Terminate with R for a Send copies no RDMAP header (as siw sends it)", "[wire][iwarp]") {
  const Bytes bytes = from_hex("002a"
                               "4147"
                               "00000000"
                               "00000002"
                               "00000001"
                               "00000000"
                               "0100"
                               "e000"
                               "0022"
                               "4143"
                               "00000000"
                               "00000000"
                               "00000001"
                               "00000000"
                               "00000000");
  const RdmapMessage m = parse_fpdu(bytes);
  CHECK(m.terminate.has_rdmap_header);
  CHECK_FALSE(m.terminate.rdmap_header_present);
  CHECK(to_hex(emit_poisoned(m, false)) == to_hex(bytes));
}

TEST_CASE("DDP and RDMAP refuse bad input", "[wire][iwarp]") {
  const Bytes send = from_hex(kSend);
  auto ulpdu_error = [](Bytes fpdu) {
    const auto view = FpduView::check(fpdu, false);
    REQUIRE(view.ok());
    return RdmapMessage::parse(view->ulpdu()).error();
  };

  for (unsigned dv : {0u, 2u, 3u}) {  // DDP version, RFC 5041 s4.2
    Bytes b = send;
    b[2] = static_cast<std::uint8_t>((b[2] & 0xFCu) | dv);
    CHECK(ulpdu_error(b) == wire::Error::bad_version);
  }
  for (unsigned rv : {0u, 2u, 3u}) {  // RDMAP version, RFC 5040 s4.1
    Bytes b = send;
    b[3] = static_cast<std::uint8_t>((b[3] & 0x3Fu) | rv << 6);
    CHECK(ulpdu_error(b) == wire::Error::bad_version);
  }
  for (std::uint8_t op = 8; op < 16; ++op) {
    Bytes b = send;
    b[3] = static_cast<std::uint8_t>(0x40 | op);
    CHECK(ulpdu_error(b) == wire::Error::unknown_opcode);
  }

  Bytes tagged_send = send;  // T=1 on a Send
  tagged_send[2] |= 0x80;
  CHECK(ulpdu_error(tagged_send) == wire::Error::bad_buffer_model);
  Bytes untagged_write = from_hex(kWrite);  // 18-byte ULPDU: parses as untagged, then refused
  untagged_write[2] &= 0x7F;
  CHECK(ulpdu_error(untagged_write) == wire::Error::bad_buffer_model);
  Bytes send_on_qn1 = send;
  send_on_qn1[11] = 1;
  CHECK(ulpdu_error(send_on_qn1) == wire::Error::bad_buffer_model);
  Bytes read_on_qn0 = from_hex(kReadRequest);
  read_on_qn0[11] = 0;
  CHECK(ulpdu_error(read_on_qn0) == wire::Error::bad_buffer_model);

  // Truncation at each layer.
  CHECK(FpduView::check(std::span(send).first(1), false).error() == wire::Error::truncated);
  CHECK(FpduView::check(std::span(send).first(send.size() - 1), false).error() == wire::Error::truncated);
  CHECK(RdmapMessage::parse({}).error() == wire::Error::truncated);
  CHECK(RdmapMessage::parse(std::span(send).subspan(2, 17)).error() == wire::Error::truncated);
  const Bytes resp = from_hex(kReadResponse);
  CHECK(RdmapMessage::parse(std::span(resp).subspan(2, 13)).error() == wire::Error::truncated);
  const Bytes rr = from_hex(kReadRequest);
  CHECK(RdmapMessage::parse(std::span(rr).subspan(2, 18 + 27)).error() == wire::Error::truncated);
  const Bytes term = from_hex(kTerminateDdp);
  CHECK(RdmapMessage::parse(std::span(term).subspan(2, 18 + 3)).error() == wire::Error::truncated);
  CHECK(RdmapMessage::parse(std::span(term).subspan(2, 18 + 4 + 2)).error() == wire::Error::truncated);
  CHECK(RdmapMessage::parse(std::span(term).subspan(2, 18 + 4 + 2 + 17)).error() == wire::Error::truncated);
  const Bytes term_rr = from_hex(kTerminateRead);
  CHECK(RdmapMessage::parse(std::span(term_rr).subspan(2, 0x46 - 1)).error() == wire::Error::truncated);
}

TEST_CASE("FPDU CRC32c: little-endian on the wire, checked when negotiated", "[wire][iwarp]") {
  // RFC 3720 B.4: CRC32c of 32 zero bytes is 0x8a9136aa, sent as aa 36 91 8a.
  const Bytes zeros(32, 0);
  CHECK(wire::crc32c(zeros) == 0x8a9136aau);
  const std::uint8_t wire_bytes[4] = {0xaa, 0x36, 0x91, 0x8a};
  CHECK(fpdu_crc_from_wire(wire_bytes) == 0x8a9136aau);

  const auto [m_bytes, m] = parse_hex(kSendInvalidate);
  Bytes fpdu = emit_poisoned(m, true);
  const std::uint32_t crc = wire::crc32c(std::span(fpdu).first(fpdu.size() - 4));
  CHECK(to_hex(std::span(fpdu).last(4)) ==
        to_hex(Bytes{static_cast<std::uint8_t>(crc), static_cast<std::uint8_t>(crc >> 8),
                     static_cast<std::uint8_t>(crc >> 16), static_cast<std::uint8_t>(crc >> 24)}));
  auto view = FpduView::check(fpdu, true);
  REQUIRE(view.ok());
  CHECK(view->crc_ok());
  CHECK(view->received_crc() == crc);

  fpdu[22] ^= 0x01;  // a payload bit
  view = FpduView::check(fpdu, true);
  REQUIRE(view.ok());
  CHECK_FALSE(view->crc_ok());
  CHECK(FpduView::check(fpdu, false)->crc_ok());  // not negotiated: not checked

  Bytes emitted(fpdu_length(5 + 18), 0xA5);
  CHECK(emit_fpdu(emitted.data(), std::span(fpdu).subspan(2, 23), false) == emitted.size());
  CHECK(to_hex(std::span(emitted).last(4)) == "00000000");  // CRC off: the field is zero
}

TEST_CASE("RDMAP opcode table", "[wire][iwarp]") {
  CHECK(rdmap_opcodes.size() == 8);
  CHECK(info(RdmapOpcode::write).tagged);
  CHECK(info(RdmapOpcode::read_response).tagged);
  CHECK(info(RdmapOpcode::read_request).queue == rdmap_queue::read_request);
  CHECK(info(RdmapOpcode::read_request).body == RdmapBody::read_request);
  CHECK(info(RdmapOpcode::terminate).queue == rdmap_queue::terminate);
  CHECK(info(RdmapOpcode::terminate).body == RdmapBody::terminate);
  for (RdmapOpcode op :
       {RdmapOpcode::send, RdmapOpcode::send_invalidate, RdmapOpcode::send_se, RdmapOpcode::send_se_invalidate}) {
    CHECK_FALSE(info(op).tagged);
    CHECK(info(op).queue == rdmap_queue::send);
  }
  CHECK(info(RdmapOpcode::send_invalidate).invalidates);
  CHECK(info(RdmapOpcode::send_se_invalidate).invalidates);
  CHECK_FALSE(info(RdmapOpcode::send_se).invalidates);
}

TEST_CASE("MpaStreamDecoder decodes a siw stream however it is cut", "[wire][iwarp]") {
  const Bytes stream =
      concat({kRequest, kSend, kReadRequest, kReadResponse, kWrite, kSendInvalidate, kTerminateDdp, kTerminateRead});
  const std::vector<std::string> whole = decode(stream);
  REQUIRE(whole.size() == 8);
  CHECK(whole[0] == "0-24 MPA Request rev 2 M0 C0 R0 IRD 1 ORD 1 private 0");
  CHECK(whole[1] == "24-64 FPDU Send [last] QN 0 MSN 1 MO 0 payload 16 ulpdu 34 CRC off");
  CHECK(whole[2] == "64-116 FPDU Read Request [last] QN 1 MSN 1 MO 0 sink 0x79433d00@0x56077a6a5550 size 64 "
                    "source 0xb0d64100@0x557461ac2370 payload 0 ulpdu 46 CRC off");
  CHECK(whole[3] == "116-200 FPDU Read Response [last] STag 0x79433d00 TO 0x56077a6a5550 payload 64 ulpdu 78 CRC off");
  CHECK(whole[5] ==
        "224-256 FPDU Send with Invalidate [last] QN 0 MSN 7 MO 0 invalidate 0x12345678 payload 5 ulpdu 23 CRC off");
  CHECK(whole[6] ==
        "256-304 FPDU Terminate [last] QN 2 MSN 1 MO 0 layer 1 type 2 code 0x01 M D payload 0 ulpdu 42 CRC off");

  for (std::size_t cut = 1; cut < stream.size(); ++cut) {
    INFO("cut at " << cut);
    REQUIRE(decode(stream, {cut}) == whole);
  }
  std::vector<std::size_t> every_byte;
  for (std::size_t i = 1; i < stream.size(); ++i) every_byte.push_back(i);
  CHECK(decode(stream, every_byte) == whole);
}

TEST_CASE("MpaStreamDecoder says how many bytes end the FPDU it is in", "[wire][iwarp]") {
  const Bytes stream = concat({kRequest, kSend, kReadRequest, kReadResponse, kWrite, kTerminateRead});
  std::vector<std::pair<std::size_t, std::size_t>> fpdus;  // [start, end) of each
  MpaStreamDecoder whole;
  whole.feed(stream, [&](const MpaStreamItem& item) {
    if (item.kind == MpaItemKind::fpdu) fpdus.emplace_back(item.stream_offset, item.end_offset);
  });
  REQUIRE(fpdus.size() == 5);
  for (const auto& [start, end] : fpdus) {
    for (std::size_t cut = start; cut < end; ++cut) {
      MpaStreamDecoder d;
      d.feed(std::span(stream).first(cut), [](const MpaStreamItem&) {});
      INFO("cut at " << cut << " in the FPDU at " << start << "-" << end);
      // At its start nothing is begun; inside its 2-byte length field, only the field's rest
      // is known.
      const std::size_t expected = cut == start                       ? 0
                                   : cut - start < Fpdu::length_field ? start + Fpdu::length_field - cut
                                                                      : end - cut;
      CHECK(d.bytes_to_boundary() == expected);
    }
  }
}

TEST_CASE("MpaStreamDecoder checks CRCs once negotiated", "[wire][iwarp]") {
  MpaRequestReply reply;
  reply.kind = MpaFrameKind::reply;
  reply.crc = true;
  Bytes stream = emit_poisoned(reply);
  for (const std::string& hex : {kSend, kWrite, kSendInvalidate}) {
    const Bytes f = emit_poisoned(parse_hex(hex).message, true);
    stream.insert(stream.end(), f.begin(), f.end());
  }
  std::vector<std::string> lines = decode(stream);
  REQUIRE(lines.size() == 4);
  for (std::size_t i = 1; i < 4; ++i) CHECK(lines[i].ends_with("CRC good"));

  stream[stream.size() - 10] ^= 0x80;  // last FPDU's payload
  lines = decode(stream);
  REQUIRE(lines.size() == 4);
  CHECK(lines[3].find("CRC bad") != std::string::npos);

  // This side's frame said C=0 but the peer's said C=1: the caller tells the decoder.
  reply.crc = false;
  Bytes plain = emit_poisoned(reply);
  plain.insert(plain.end(), stream.begin() + 20, stream.end());
  MpaStreamDecoder d;
  std::vector<std::string> told;
  d.feed(plain, [&](const MpaStreamItem& item) {
    if (item.kind == MpaItemKind::reply) d.set_negotiated(false, true);
    told.push_back(item.describe());
  });
  REQUIRE(told.size() == 4);
  CHECK(told[1].ends_with("CRC good"));
  CHECK(told[3].find("CRC bad") != std::string::npos);
}

TEST_CASE("MpaStreamDecoder stops at the first error", "[wire][iwarp]") {
  Bytes not_mpa = from_hex("474554202f20485454502f312e310d0a486f73743a206578616d706c65");  // "GET / HTTP/1.1..."
  std::vector<std::string> lines = decode(not_mpa);
  REQUIRE(lines.size() == 1);
  CHECK(lines[0] == "0-20 error bad_mpa_key at stream offset 0");

  MpaStreamDecoder d;
  CHECK(decode(not_mpa, {}, d).size() == 1);
  CHECK(d.failed());
  CHECK(decode(concat({kRequest, kSend}), {}, d).empty());  // ignored after the error

  Bytes bad_op = concat({kReply, kSend, kSend});
  bad_op[24 + 40 + 3] = 0x4C;  // second FPDU: opcode 12
  lines = decode(bad_op);
  REQUIRE(lines.size() == 3);
  CHECK(lines[2] == "64-104 error unknown_opcode at stream offset 64");

  Bytes bad_rev = from_hex(kRequest);
  bad_rev[17] = 3;
  CHECK(decode(bad_rev) == std::vector<std::string>{"0-20 error bad_version at stream offset 0"});
}

namespace {

// RFC 5044 s4.3 markers, as a sender that negotiated them would place them: every 512
// octets from the first octet after the MPA frame, FPDUPTR counting back to the start of
// the FPDU holding the marker (a marker opening an FPDU belongs to it), the CRC covering
// them. Counts where markers landed, to show the test reached each case.
struct MarkedStream {
  Bytes bytes;
  int opening = 0, inside = 0, before_crc = 0;
};

MarkedStream add_markers(const std::vector<Bytes>& fpdus, bool crc) {
  MarkedStream s;
  for (const Bytes& f : fpdus) {
    const std::size_t start = s.bytes.size();
    for (std::size_t i = 0; i < f.size(); ++i) {
      if (s.bytes.size() % MpaMarker::interval == 0) {
        const std::size_t ptr = s.bytes.size() - start;
        s.bytes.insert(s.bytes.end(), {0, 0, static_cast<std::uint8_t>(ptr >> 8), static_cast<std::uint8_t>(ptr)});
        (i == 0 ? s.opening : i == f.size() - 4 ? s.before_crc : s.inside) += 1;
      }
      s.bytes.push_back(f[i]);
    }
    if (crc) {
      const std::uint32_t c = wire::crc32c(std::span(s.bytes).subspan(start, s.bytes.size() - 4 - start));
      for (std::size_t k = 0; k < 4; ++k) s.bytes[s.bytes.size() - 4 + k] = static_cast<std::uint8_t>(c >> (8 * k));
    }
  }
  return s;
}

// Sends whose FPDU sizes put markers at an FPDU's start, inside it, and just before its CRC.
std::vector<Bytes> sends_for_markers() {
  std::vector<Bytes> out;
  std::uint32_t msn = 1;
  for (std::size_t payload : {484u, 100u, 5u, 700u, 1200u, 385u, 3u, 2000u}) {
    RdmapMessage m = parse_hex(kSend).message;  // its payload is replaced below
    const Bytes data(payload, static_cast<std::uint8_t>(payload));
    m.payload = data;
    m.ddp.message_sequence_number = msn++;
    Bytes f(fpdu_length(m.length()));
    m.emit(f.data() + 2);
    seal_fpdu(f.data(), m.length(), false);
    out.push_back(f);
  }
  return out;
}

}  // namespace

TEST_CASE("MpaStreamDecoder removes markers and checks where they point", "[wire][iwarp]") {
  MpaRequestReply req;  // rev 1, M and C
  req.markers = true;
  req.crc = true;
  const Bytes frame = emit_poisoned(req);
  const std::vector<Bytes> fpdus = sends_for_markers();
  const MarkedStream marked = add_markers(fpdus, true);
  CHECK(marked.opening >= 2);  // the first FPDU, and one starting on a 512 boundary
  CHECK(marked.inside >= 2);
  CHECK(marked.before_crc >= 1);

  Bytes stream = frame;
  stream.insert(stream.end(), marked.bytes.begin(), marked.bytes.end());
  const std::vector<std::string> whole = decode(stream);
  REQUIRE(whole.size() == 1 + fpdus.size());
  std::size_t markers = 0;
  for (std::size_t i = 1; i < whole.size(); ++i) {
    INFO(whole[i]);
    CHECK(whole[i].ends_with("CRC good"));
    const std::size_t at = whole[i].find(" markers ");
    if (at != std::string::npos) markers += std::stoul(whole[i].substr(at + 9));
  }
  CHECK(markers == static_cast<std::size_t>(marked.opening + marked.inside + marked.before_crc));
  // Built with append: GCC 12 at -O3 warns (-Wrestrict, a known false positive) on
  // "literal" + std::string here.
  const std::string ends_stream = std::string("-").append(std::to_string(stream.size())).append(" FPDU");
  CHECK(whole.back().find(ends_stream) != std::string::npos);

  for (std::size_t cut = 1; cut < stream.size(); ++cut) {
    INFO("cut at " << cut);
    REQUIRE(decode(stream, {cut}) == whole);
  }

  // Every marker's pointer matters: bending any one stops the stream there.
  for (std::size_t m = 0; m < marked.bytes.size(); m += MpaMarker::interval) {
    Bytes bent = stream;
    bent[frame.size() + m + 3] ^= 0x04;
    const std::vector<std::string> lines = decode(bent);
    INFO("marker at " << m);
    REQUIRE_FALSE(lines.empty());
    CHECK(lines.back().find("error bad_mpa_marker") != std::string::npos);
  }

  // Without markers negotiated, the same bytes do not frame.
  MpaStreamDecoder no_markers;
  no_markers.set_negotiated(false, true);
  const std::vector<std::string> lines = decode(stream, {}, no_markers);
  CHECK(lines.back().find("error") != std::string::npos);
}

TEST_CASE("siw's Terminate, control word in little-endian bit-field order, reads as meant", "[wire][iwarp]") {
  const auto [bytes, m] = parse_hex(kSiwTerminateRead);
  const RdmapTerminate& t = m.terminate;
  CHECK(t.siw_bit_order);
  CHECK(t.layer == 0);       // RDMAP
  CHECK(t.error_type == 1);  // remote protection error
  CHECK(t.error_code == 0);  // invalid STag
  CHECK(t.segment_length_valid);
  CHECK(t.has_ddp_header);
  CHECK(t.has_rdmap_header);
  CHECK(t.ddp_header_length == 18);
  CHECK(t.rdmap_header_present);
  CHECK(to_hex(t.rdmap_header) == "00000100"
                                  "000055c7f03c4f44"
                                  "00000064"
                                  "00abcd00"
                                  "000056243a39ce70");
  // Written back in the same order: the FPDU rebuilds byte for byte.
  Bytes rebuilt(m.length());
  m.emit(rebuilt.data());
  CHECK(to_hex(rebuilt) ==
        to_hex(Bytes(bytes.begin() + 2, bytes.begin() + 2 + static_cast<std::ptrdiff_t>(m.length()))));
  // Our own Terminates keep RFC 5040's order.
  const auto [rfc_bytes, rfc] = parse_hex(kTerminateRead);
  CHECK_FALSE(rfc.terminate.siw_bit_order);
}
