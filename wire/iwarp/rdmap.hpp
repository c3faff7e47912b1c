// RDMAP, the RDMA Protocol (RFC 5040), as carried in a DDP segment (ddp.hpp).
//
// RDMAP's control octet is DDP's RsvdULP octet: |RV (2)|Rsvd (2)|Opcode (4)|, RV = 1
// (RFC 5040 s4.1). The opcode fixes the DDP buffer model, the untagged queue and which
// header follows the DDP header; rdmap_opcodes below is the one table of those rules.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include "wire/error.hpp"
#include "wire/field.hpp"
#include "wire/iwarp/ddp.hpp"

namespace wire::iwarp {

struct Rdmap {
  static constexpr unsigned version = 1;
  // Within the control octet (DDP octet 1).
  using rv = Field<0, 1, 0xC0>;
  using opcode = Field<0, 1, 0x0F>;
  static constexpr std::uint8_t control(unsigned opcode_value) {
    return static_cast<std::uint8_t>(version << 6 | (opcode_value & 0x0F));
  }
};

// RFC 5040 s4.2. Opcodes 8..11 are RFC 7306's atomics and immediate data, which this codec
// does not decode: like 12..15 they are refused as unknown_opcode.
enum class RdmapOpcode : std::uint8_t {
  write = 0,
  read_request = 1,
  read_response = 2,
  send = 3,
  send_invalidate = 4,
  send_se = 5,
  send_se_invalidate = 6,
  terminate = 7,
};

// Untagged DDP queues (the QN column of the RFC 5040 s4.2 table).
namespace rdmap_queue {
inline constexpr std::uint32_t send = 0;
inline constexpr std::uint32_t read_request = 1;
inline constexpr std::uint32_t terminate = 2;
}  // namespace rdmap_queue

// What follows the DDP header before the payload.
enum class RdmapBody : std::uint8_t { none, read_request, terminate };

struct RdmapOpcodeInfo {
  std::string_view name;  // as Wireshark names it
  bool tagged;            // DDP buffer model (RFC 5040 s4.2)
  std::uint32_t queue;    // DDP queue number when untagged
  RdmapBody body;
  bool invalidates;  // the untagged RsvdULP word is an Invalidate STag (RFC 5040 s4.1)
};

inline constexpr std::array<RdmapOpcodeInfo, 8> rdmap_opcodes{{
    {"Write", true, 0, RdmapBody::none, false},
    {"Read Request", false, rdmap_queue::read_request, RdmapBody::read_request, false},
    {"Read Response", true, 0, RdmapBody::none, false},
    {"Send", false, rdmap_queue::send, RdmapBody::none, false},
    {"Send with Invalidate", false, rdmap_queue::send, RdmapBody::none, true},
    {"Send with SE", false, rdmap_queue::send, RdmapBody::none, false},
    {"Send with SE and Invalidate", false, rdmap_queue::send, RdmapBody::none, true},
    {"Terminate", false, rdmap_queue::terminate, RdmapBody::terminate, false},
}};

constexpr const RdmapOpcodeInfo& info(RdmapOpcode op) { return rdmap_opcodes[static_cast<std::size_t>(op)]; }

// RDMA Read Request header, after the untagged DDP header (RFC 5040 s4, "RDMA Read Request
// Header").
struct RdmapReadRequestHeader {
  static constexpr std::size_t length = 28;
  using sink_stag = Field<0, 4>;
  using sink_tagged_offset = Field<4, 8>;
  using size = Field<12, 4>;
  using source_stag = Field<16, 4>;
  using source_tagged_offset = Field<20, 8>;
};

struct RdmapReadRequest {
  std::uint32_t sink_stag = 0;
  std::uint64_t sink_tagged_offset = 0;
  std::uint32_t size = 0;
  std::uint32_t source_stag = 0;
  std::uint64_t source_tagged_offset = 0;
  bool operator==(const RdmapReadRequest&) const = default;
};

// Terminate header, after the untagged DDP header (RFC 5040 s4, "Terminate Header"): a
// control word |Layer (4)|EType (4)|Error Code (8)|M|D|R|Rsvd (13)|, then with D the DDP
// Segment Length (2 bytes, meaningful with M) and the DDP header of the segment in error
// (14 or 18 bytes, by its T bit), then with R that segment's RDMAP header. The 28-byte Read
// Request header is the only RDMAP header beyond DDP's, so R copies bytes only when the
// segment in error was a Read Request (Linux siw also sets R for a Send, copying nothing).
struct RdmapTerminateHeader {
  static constexpr std::size_t control_length = 4;
  static constexpr std::size_t segment_length_length = 2;
  using layer = Field<0, 1, 0xF0>;
  using error_type = Field<0, 1, 0x0F>;
  using error_code = Field<1, 1>;
  using segment_length_valid = Flag<2, 0x80>;  // M
  using has_ddp_header = Flag<2, 0x40>;        // D
  using has_rdmap_header = Flag<2, 0x20>;      // R
  using ddp_segment_length = Field<0, 2>;      // relative to the field after the control word
};

struct RdmapTerminate {
  std::uint8_t layer = 0;  // 0 RDMAP, 1 DDP, 2 LLP (MPA)
  std::uint8_t error_type = 0;
  std::uint8_t error_code = 0;
  bool segment_length_valid = false;  // M
  bool has_ddp_header = false;        // D
  bool has_rdmap_header = false;      // R
  std::uint16_t ddp_segment_length = 0;
  std::array<std::uint8_t, Ddp::untagged_length> ddp_header{};  // the first ddp_header_length bytes
  std::uint8_t ddp_header_length = 0;                           // 0, 14 or 18
  std::array<std::uint8_t, RdmapReadRequestHeader::length> rdmap_header{};
  bool rdmap_header_present = false;
  // The control word as Linux siw writes it on little-endian hosts (rdmap.cpp): read so, and
  // written back so, that a parsed Terminate rebuilds byte for byte.
  bool siw_bit_order = false;
  bool operator==(const RdmapTerminate&) const = default;

  std::size_t length() const;
};

// One DDP segment read as RDMAP: the ULPDU of one FPDU.
struct RdmapMessage {
  // ddp.ulp_control and, when untagged, ddp.ulp_word are what parse() found; emit() writes
  // the control octet from `opcode` and the RsvdULP word from `invalidate_stag` instead.
  DdpHeader ddp;
  RdmapOpcode opcode = RdmapOpcode::send;
  std::uint32_t invalidate_stag = 0;  // Send with (SE and) Invalidate
  RdmapReadRequest read_request;      // opcode == read_request
  RdmapTerminate terminate;           // opcode == terminate
  std::span<const std::uint8_t> payload;

  // Checks, in order: the DDP header (truncated, bad_version), RV (bad_version), the opcode
  // (unknown_opcode), the buffer model and queue the opcode needs (bad_buffer_model), and
  // the RDMAP header after DDP's (truncated).
  static Result<RdmapMessage> parse(std::span<const std::uint8_t> ulpdu);

  const RdmapOpcodeInfo& info() const { return iwarp::info(opcode); }
  std::size_t header_length() const;  // DDP header and RDMAP header, before the payload
  std::size_t length() const { return header_length() + payload.size(); }
  // Writes length() bytes: headers, then the payload.
  void emit(std::uint8_t* out) const;
};

}  // namespace wire::iwarp
