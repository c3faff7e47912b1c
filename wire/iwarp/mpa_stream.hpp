// A sans-I/O decoder for one direction of one MPA connection.
//
// Feed it the in-order TCP payload bytes of one direction, in chunks of any size: it first
// expects an MPA Request or Reply frame, then FPDUs, and yields one item per frame or FPDU
// (MPA fields, DDP and RDMAP fields, CRC verdict, stream offset), or one error item after
// which it ignores the rest of the stream. An FPDU that arrives whole in one chunk (and
// without markers) is checked where it lies; otherwise it holds at most one frame or one FPDU
// (markers removed) at a time, in a buffer of 65,544 bytes allocated once.
//
// Negotiation (RFC 5044 s7.1): markers in a direction are asked for by the *receiver's*
// frame (its M bit), and CRCs are used when either frame has C set. A decoder sees only its
// own direction's frame, so by default it takes that frame's M and C bits; whoever sees both
// frames calls set_negotiated() with the real values, at the latest from the sink of the
// item for the second frame, before the FPDUs that depend on them are fed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>

#include "wire/error.hpp"
#include "wire/iwarp/mpa.hpp"
#include "wire/iwarp/rdmap.hpp"

namespace wire::iwarp {

enum class MpaItemKind : std::uint8_t { request, reply, fpdu, error };

struct MpaFpduInfo {
  std::uint16_t ulpdu_length = 0;
  std::size_t markers = 0;         // markers removed from this FPDU (one opening it included)
  bool crc_checked = false;        // CRCs negotiated: crc_received was checked
  bool crc_ok = false;             // crc_checked and the CRC matched (markers included, s4.4)
  std::uint32_t crc_received = 0;  // the CRC field, read little-endian
  std::uint32_t crc_computed = 0;  // crc_checked only
  std::size_t payload_length = 0;  // ULPDU bytes after the DDP and RDMAP headers
  // message.payload: valid only until the decoder is fed again, and while the input fed is
  // (an FPDU that arrives whole is parsed where it lies, not copied).
  RdmapMessage message;
};

// One decoded unit of the stream. Exactly one of frame / fpdu / error is meaningful, by kind.
struct MpaStreamItem {
  MpaItemKind kind = MpaItemKind::error;
  std::uint64_t stream_offset = 0;  // its first byte in this direction's TCP payload stream
  std::uint64_t end_offset = 0;     // one past its last byte
  MpaRequestReply frame;            // kind request / reply
  MpaFpduInfo fpdu;                 // kind fpdu
  Error error = Error::truncated;   // kind error

  // One line for humans, e.g. "FPDU Send [last] QN 0 MSN 1 MO 0 payload 16 ulpdu 34 CRC good".
  std::string describe() const;
};

class MpaStreamDecoder {
 public:
  MpaStreamDecoder();

  struct Step {
    std::size_t consumed = 0;           // always > 0 for non-empty input
    std::optional<MpaStreamItem> item;  // completed by the last byte consumed
  };
  // Consumes bytes up to and including the last byte of the next item, or all of `input`.
  Step consume(std::span<const std::uint8_t> input);

  // Consumes all of `input`, calling sink(const MpaStreamItem&) for each completed item.
  template <typename Sink>
  void feed(std::span<const std::uint8_t> input, Sink&& sink) {
    while (!input.empty()) {
      Step s = consume(input);
      input = input.subspan(s.consumed);
      if (s.item) sink(*s.item);
    }
  }

  // The negotiated use of markers and CRCs for the FPDUs this direction carries. Takes effect
  // from the next FPDU; overrides the defaults taken from the frame.
  void set_negotiated(bool markers, bool crc);
  // For a stream whose MPA frames were exchanged elsewhere: what is fed from now on is FPDUs,
  // with the negotiated markers and CRCs.
  void start_full_operation(bool markers, bool crc);

  bool failed() const { return phase_ == Phase::failed; }
  bool in_full_operation() const { return phase_ == Phase::fpdu_length || phase_ == Phase::fpdu_body; }
  std::uint64_t stream_offset() const { return offset_; }  // bytes consumed so far
  // The bytes that complete the unit an earlier chunk began (0: none begun, its length not
  // known yet, or markers in the way). A reader that asks the socket for no more than this
  // starts its next chunk on a boundary, where whole FPDUs are checked in place, not copied.
  std::size_t bytes_to_boundary() const;

 private:
  enum class Phase : std::uint8_t { frame_header, frame_body, fpdu_length, fpdu_body, failed };

  bool marker_due() const;
  void start_unit();
  std::size_t take_marker_bytes(std::span<const std::uint8_t> input);
  bool marker_points_to_unit() const;
  std::size_t take_unit_bytes(std::span<const std::uint8_t> input);
  std::optional<MpaStreamItem> unit_complete();
  MpaStreamItem finish_frame();
  std::size_t whole_fpdu_at(std::span<const std::uint8_t> input) const;
  MpaStreamItem fpdu_in_place(std::span<const std::uint8_t> fpdu);
  MpaStreamItem finish_fpdu(std::span<const std::uint8_t> bytes, std::uint32_t crc_computed);
  MpaStreamItem fail(Error e);

  static constexpr std::size_t capacity = fpdu_length(Fpdu::max_ulpdu);

  std::unique_ptr<std::uint8_t[]> buffer_;      // the current unit, markers removed
  std::size_t fill_ = 0;                        // bytes of buffer_ filled
  std::size_t need_ = MpaFrame::header_length;  // bytes the current phase waits for
  Phase phase_ = Phase::frame_header;
  std::uint64_t offset_ = 0;      // stream bytes consumed
  std::uint64_t unit_start_ = 0;  // stream offset of the current unit's first byte
  bool unit_started_ = false;

  bool markers_ = false;  // in force for the current unit
  bool crc_ = false;
  bool want_markers_ = false;  // for the next unit: from the frame, or set_negotiated()
  bool want_crc_ = false;
  bool negotiated_ = false;
  std::uint64_t marker_base_ = 0;  // stream offset of full operation's first byte
  std::uint8_t marker_[MpaMarker::length] = {};
  std::size_t marker_fill_ = 0;
  std::size_t unit_markers_ = 0;
  std::uint32_t crc_running_ = 0;  // over the unit's bytes before its CRC field
  std::size_t crc_field_at_ = 0;   // buffer offset of the CRC field
};

}  // namespace wire::iwarp
