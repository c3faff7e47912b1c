// InfiniBand transport headers as they appear in RoCE packets (IBTA vol. 1 ch. 9.2-9.3,
// RoCEv1 annex A16, RoCEv2 annex A17). Offsets are relative to each header's first byte.
#pragma once

#include <cstdint>

#include "wire/field.hpp"

namespace wire {

// Base Transport Header, IBTA vol. 1 s9.2.
struct Bth {
  static constexpr std::size_t length = 12;
  using opcode = Field<0, 1>;
  using solicited_event = Flag<1, 0x80>;
  using mig_req = Flag<1, 0x40>;
  using pad_count = Field<1, 1, 0x30>;
  using tver = Field<1, 1, 0x0F>;  // transport header version: 0 (s9.2.6)
  using pkey = Field<2, 2>;
  // Byte 4 is "reserved (variant)" in IBTA and therefore masked to 0xFF in the ICRC; RoCEv2
  // (annex A17.9.3) puts FECN and BECN in its top two bits.
  using variant_byte = Field<4, 1>;
  using fecn = Flag<4, 0x80>;
  using becn = Flag<4, 0x40>;
  using resv6 = Field<4, 1, 0x3F>;
  using dest_qp = Field<5, 3>;
  using ack_req = Flag<8, 0x80>;
  using resv7 = Field<8, 1, 0x7F>;
  using psn = Field<9, 3>;
};

// The DestQP of a multicast packet: every QP attached to its group receives it (IBTA vol. 1
// s10.5).
inline constexpr std::uint32_t kMulticastQpn = 0xFFFFFF;

// Reliable Datagram Extended Transport Header, s9.3.1.
struct Rdeth {
  static constexpr std::size_t length = 4;
  using reserved = Field<0, 1>;
  using ee_context = Field<1, 3>;
};

// Datagram Extended Transport Header, s9.3.2.
struct Deth {
  static constexpr std::size_t length = 8;
  using qkey = Field<0, 4>;
  using reserved = Field<4, 1>;
  using src_qp = Field<5, 3>;
};

// XRC Extended Transport Header, s9.3.8 (XRC annex).
struct Xrceth {
  static constexpr std::size_t length = 4;
  using reserved = Field<0, 1>;
  using xrc_srq = Field<1, 3>;
};

// RDMA Extended Transport Header, s9.3.3.
struct Reth {
  static constexpr std::size_t length = 16;
  using va = Field<0, 8>;
  using rkey = Field<8, 4>;
  using dma_length = Field<12, 4>;
};

// Atomic Extended Transport Header, s9.3.4.
struct AtomicEth {
  static constexpr std::size_t length = 28;
  using va = Field<0, 8>;
  using rkey = Field<8, 4>;
  using swap_add = Field<12, 8>;
  using compare = Field<20, 8>;
};

// ACK Extended Transport Header, s9.3.5. The syndrome's bits 6-5 say ACK, RNR NAK or NAK.
struct Aeth {
  static constexpr std::size_t length = 4;
  using syndrome = Field<0, 1>;
  using msn = Field<1, 3>;
};

// Atomic ACK Extended Transport Header, s9.3.6.
struct AtomicAckEth {
  static constexpr std::size_t length = 8;
  using original_data = Field<0, 8>;
};

// Immediate Data Extended Transport Header, s9.3.7.
struct ImmDt {
  static constexpr std::size_t length = 4;
  using imm = Field<0, 4>;
};

// Invalidate Extended Transport Header, s9.3.9.
struct Ieth {
  static constexpr std::size_t length = 4;
  using rkey = Field<0, 4>;
};

// The 16 reserved bytes that follow the BTH of a RoCEv2 CNP (annex A17.9.2).
struct CnpReserved {
  static constexpr std::size_t length = 16;
};

// Global Route Header, s8.3: the network header of RoCEv1 (annex A16).
struct Grh {
  static constexpr std::size_t length = 40;
  static constexpr std::uint8_t next_header_ib = 0x1B;  // IBA transport follows (s8.3.4)
  using ip_version = Field<0, 1, 0xF0>;
  using traffic_class = Field<0, 2, 0x0FF0>;
  using flow_label = Field<1, 3, 0x0FFFFF>;
  using payload_length = Field<4, 2>;
  using next_header = Field<6, 1>;
  using hop_limit = Field<7, 1>;
  static constexpr std::size_t sgid_offset = 8;
  static constexpr std::size_t dgid_offset = 24;
};

// AETH syndrome decoding, IBTA vol. 1 s9.7.5.1 table 44.
enum class AckKind : std::uint8_t { ack = 0, rnr_nak = 1, reserved = 2, nak = 3 };
constexpr AckKind ack_kind(std::uint8_t syndrome) { return static_cast<AckKind>((syndrome >> 5) & 0x3); }
constexpr std::uint8_t syndrome_value(std::uint8_t syndrome) { return syndrome & 0x1F; }  // credits, timer or NAK code
constexpr std::uint8_t make_syndrome(AckKind kind, std::uint8_t value) {
  return static_cast<std::uint8_t>((static_cast<std::uint8_t>(kind) << 5) | (value & 0x1F));
}

// NAK codes, table 45.
enum class NakCode : std::uint8_t {
  psn_sequence_error = 0,
  invalid_request = 1,
  remote_access_error = 2,
  remote_operational_error = 3,
  invalid_rd_request = 4,
};

}  // namespace wire
