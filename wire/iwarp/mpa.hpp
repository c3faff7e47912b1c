// MPA, Marker PDU Aligned framing for TCP (RFC 5044), with the revision 2 "enhanced"
// connection setup of RFC 6581.
//
// A connection starts with one MPA Request (initiator -> responder) and one MPA Reply
// (responder -> initiator); after that each direction carries FPDUs:
//
//   ULPDU_Length (2) | ULPDU (a DDP segment) | pad to a multiple of 4 | CRC (4)
//
// The CRC field is always there; it holds the CRC32c when the frames negotiated CRCs and is
// sent as zero (and not checked) otherwise. When negotiated, a 4-byte marker also sits every
// 512 octets of the stream. Markers are parsed and removed (mpa_stream.hpp) but never
// generated: our peer, Linux siw, does not support them either.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "wire/error.hpp"
#include "wire/field.hpp"

namespace wire::iwarp {

// --- Connection setup: the MPA Request and Reply frames (RFC 5044 s7.1) -------------------

inline constexpr std::string_view mpa_request_key = "MPA ID Req Frame";
inline constexpr std::string_view mpa_reply_key = "MPA ID Rep Frame";

struct MpaFrame {
  static constexpr std::size_t key_length = 16;
  static constexpr std::size_t header_length = 20;
  static constexpr std::size_t max_private_data = 512;  // RFC 5044 s7.1, PD_Length
  using markers = Flag<16, 0x80>;                       // M: the sender wants markers in the FPDUs it receives
  using crc = Flag<16, 0x40>;                           // C: the sender wants CRCs (used if either side asks)
  using reject = Flag<16, 0x20>;                        // R: the responder refuses the connection
  // Revision 2 only: the private data starts with the RFC 6581 IRD/ORD words. RFC 5044 calls
  // these bits Res; Linux siw (MPA_RR_FLAG_ENHANCED) and cxgb4 use 0x10 for this.
  using enhanced = Flag<16, 0x10>;
  using revision = Field<17, 1>;
  using pd_length = Field<18, 2>;
};

// The RFC 6581 words at the start of a revision 2 enhanced frame's private data:
// |A|B| IRD (14 bits) |C|D| ORD (14 bits)|.
struct MpaIrdOrd {
  static constexpr std::size_t length = 4;
  using peer_to_peer = Flag<0, 0x80>;  // A: peer-to-peer model, a ready-to-receive message follows
  using send_rtr = Flag<0, 0x40>;      // B: that message may be a zero-length Send
  using ird = Field<0, 2, 0x3FFF>;
  using write_rtr = Flag<2, 0x80>;  // C: ... a zero-length RDMA Write
  using read_rtr = Flag<2, 0x40>;   // D: ... a zero-length RDMA Read
  using ord = Field<2, 2, 0x3FFF>;
};

enum class MpaFrameKind : std::uint8_t { request, reply };

struct MpaEnhanced {
  std::uint16_t ird = 0;  // inbound RDMA Reads the sender accepts in flight (14 bits)
  std::uint16_t ord = 0;  // outbound RDMA Reads the sender wants to issue (14 bits)
  bool peer_to_peer = false;
  bool send_rtr = false;
  bool write_rtr = false;
  bool read_rtr = false;
  bool operator==(const MpaEnhanced&) const = default;
};

// One MPA Request or Reply frame. Not on any fast path, so it owns its private data.
struct MpaRequestReply {
  MpaFrameKind kind = MpaFrameKind::request;
  bool markers = false;
  bool crc = false;
  bool reject = false;
  std::uint8_t revision = 1;               // 1 (RFC 5044) or 2 (RFC 6581)
  std::optional<MpaEnhanced> enhanced;     // revision 2 with the enhanced flag
  std::vector<std::uint8_t> private_data;  // the ULP's private data, after the IRD/ORD words

  // Checks the fixed 20-byte header (key, revision, PD_Length) at the start of `header` and
  // returns the whole frame's length. `truncated` if fewer than 20 bytes are given.
  static Result<std::size_t> frame_length(std::span<const std::uint8_t> header);
  // Parses one whole frame at the start of `bytes` (bytes after it are not looked at).
  static Result<MpaRequestReply> parse(std::span<const std::uint8_t> bytes);

  std::size_t pd_length() const { return (enhanced ? MpaIrdOrd::length : 0) + private_data.size(); }
  std::size_t length() const { return MpaFrame::header_length + pd_length(); }
  // Writes length() bytes. The caller keeps pd_length() <= 512 and the revision 1 or 2
  // (`enhanced` is written only with revision 2).
  void emit(std::uint8_t* out) const;

  bool operator==(const MpaRequestReply&) const = default;
};

// --- Full operation: FPDU framing (RFC 5044 s4) --------------------------------------------

struct Fpdu {
  static constexpr std::size_t length_field = 2;
  static constexpr std::size_t crc_length = 4;
  static constexpr std::size_t alignment = 4;
  static constexpr std::size_t max_ulpdu = 0xFFFF;
  using ulpdu_length = Field<0, 2>;
};

// RFC 5044 s4.3: 16 reserved bits, then FPDUPTR, the distance back from the marker to the
// start of the FPDU it lies in (0 when the marker opens the FPDU).
struct MpaMarker {
  static constexpr std::size_t length = 4;
  static constexpr std::size_t interval = 512;
  using fpdu_pointer = Field<2, 2>;
};

// Pad bytes after the ULPDU: ULPDU_Length + ULPDU + pad is a multiple of 4 (RFC 5044 s4).
constexpr std::size_t fpdu_pad_length(std::size_t ulpdu_length) {
  return (Fpdu::alignment - (Fpdu::length_field + ulpdu_length) % Fpdu::alignment) % Fpdu::alignment;
}

// Bytes of a marker-free FPDU.
constexpr std::size_t fpdu_length(std::size_t ulpdu_length) {
  return Fpdu::length_field + ulpdu_length + fpdu_pad_length(ulpdu_length) + Fpdu::crc_length;
}

// The CRC32c of an FPDU as it goes on the wire: the CRC register value written little-endian
// (RFC 5044 s4.4 computes it as RFC 3720 B.4 does; tshark checks these bytes).
std::uint32_t fpdu_crc_from_wire(const std::uint8_t* p);

// A checked FPDU without markers (the stream decoder removes them first).
class FpduView {
 public:
  // `crc` says whether the connection negotiated CRCs. Bytes after the FPDU are allowed.
  // A CRC mismatch is not an error here: see crc_ok().
  static Result<FpduView> check(std::span<const std::uint8_t> bytes, bool crc);

  std::uint16_t ulpdu_length() const { return Fpdu::ulpdu_length::get(bytes_.data()); }
  std::span<const std::uint8_t> ulpdu() const { return bytes_.subspan(Fpdu::length_field, ulpdu_length()); }
  std::span<const std::uint8_t> bytes() const { return bytes_; }
  bool crc_checked() const { return crc_; }
  std::uint32_t received_crc() const;  // the CRC field
  std::uint32_t computed_crc() const;  // over everything before the CRC field
  bool crc_ok() const { return !crc_ || received_crc() == computed_crc(); }

 private:
  FpduView(std::span<const std::uint8_t> b, bool crc) : bytes_(b), crc_(crc) {}
  std::span<const std::uint8_t> bytes_;
  bool crc_;
};

// Writes ULPDU_Length, `ulpdu`, zero pad and the CRC field (the CRC32c with `crc`, else zero)
// at `out`; returns the bytes written, fpdu_length(ulpdu.size()). The caller keeps
// ulpdu.size() <= Fpdu::max_ulpdu.
std::size_t emit_fpdu(std::uint8_t* out, std::span<const std::uint8_t> ulpdu, bool crc);
// The same when the caller already wrote the ULPDU at out + 2 (no copy).
std::size_t seal_fpdu(std::uint8_t* out, std::size_t ulpdu_length, bool crc);

}  // namespace wire::iwarp
