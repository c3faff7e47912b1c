// The InfiniBand transport part of a RoCE packet: BTH, extension headers, payload, pad and
// the 4-byte ICRC (the UDP payload of RoCEv2, what follows the GRH in RoCEv1).
//
// IbPacket::check() validates untrusted bytes once; afterwards every accessor is safe.
// IbRepr is the same packet as plain values: parse() from a checked packet, emit() into a
// caller's buffer. The ICRC is not IbRepr's business (it covers the IP/UDP headers too):
// emit() leaves its 4 bytes zero and roce_frame.hpp / icrc.hpp fill them.
#pragma once

#include <array>
#include <cstdint>
#include <span>

#include "wire/error.hpp"
#include "wire/ib_headers.hpp"
#include "wire/opcode.hpp"

namespace wire {

inline constexpr std::size_t kIcrcLength = 4;
// The largest path MTU, and so the largest payload of one packet (IBTA vol. 1 s7.7.8).
inline constexpr std::size_t kMaxPayload = 4096;

class IbPacket {
 public:
  // Rules enforced (IBTA vol. 1): the opcode is defined (s9.2.1 table 35); TVer is 0
  // (s9.2.6); the headers the opcode implies fit; the pad count does not exceed the payload
  // and header+payload+pad is a multiple of 4 (s9.2.4: "the packet length shall be a
  // multiple of 4 bytes"); opcodes without payload carry none (s9.4); no payload exceeds
  // the largest path MTU. Whether a payload fits the QP's own MTU is the responder's check.
  static Result<IbPacket> check(std::span<const std::uint8_t> bytes);

  const std::uint8_t* bth() const { return bytes_.data(); }
  Opcode opcode() const { return wire::opcode(Bth::opcode::get(bth())); }
  const OpcodeInfo& info() const { return wire::info(opcode()); }
  // The first byte of extension header `e`, or nullptr when this opcode has none.
  const std::uint8_t* ext(Ext e) const {
    return info().has(e) ? bytes_.data() + info().offset[static_cast<std::size_t>(e)] : nullptr;
  }

  std::uint32_t dest_qp() const { return Bth::dest_qp::get(bth()); }
  std::uint32_t psn() const { return Bth::psn::get(bth()); }
  bool ack_req() const { return Bth::ack_req::get(bth()); }
  std::uint8_t pad_count() const { return Bth::pad_count::get(bth()); }

  // The payload without pad bytes.
  std::span<const std::uint8_t> payload() const {
    return bytes_.subspan(info().header_length, payload_with_pad_ - pad_count());
  }
  // Everything the ICRC covers after the masked headers: BTH through pad.
  std::span<const std::uint8_t> covered() const { return bytes_.first(bytes_.size() - kIcrcLength); }
  // The ICRC as the CRC-32 value (the wire holds it little-endian, see icrc.hpp).
  std::uint32_t icrc() const;
  std::span<const std::uint8_t> bytes() const { return bytes_; }

 private:
  IbPacket(std::span<const std::uint8_t> b, std::size_t p) : bytes_(b), payload_with_pad_(p) {}
  std::span<const std::uint8_t> bytes_;
  std::size_t payload_with_pad_;
};

// Every field of every header an IB packet can carry; emit() writes those its opcode has.
// Reserved bits are kept so that parse() followed by emit() reproduces the bytes exactly.
struct IbRepr {
  Opcode opcode = wire::opcode(0x04);
  bool solicited_event = false;
  bool mig_req = false;
  std::uint16_t pkey = 0xFFFF;
  bool fecn = false;
  bool becn = false;
  std::uint8_t resv6 = 0;
  std::uint32_t dest_qp = 0;
  bool ack_req = false;
  std::uint8_t resv7 = 0;
  std::uint32_t psn = 0;

  std::uint32_t ee_context = 0;             // RDETH
  std::uint32_t qkey = 0, src_qp = 0;       // DETH
  std::uint32_t xrc_srq = 0;                // XRCETH
  std::uint64_t va = 0;                     // RETH / AtomicETH
  std::uint32_t rkey = 0;                   // RETH / AtomicETH
  std::uint32_t dma_length = 0;             // RETH
  std::uint64_t swap_add = 0, compare = 0;  // AtomicETH
  std::uint8_t syndrome = 0;                // AETH
  std::uint32_t msn = 0;                    // AETH
  std::uint64_t original_data = 0;          // AtomicAckETH
  std::uint32_t imm = 0;                    // ImmDt (network byte order value)
  std::uint32_t invalidate_rkey = 0;        // IETH
  std::uint8_t reserved_rdeth = 0, reserved_deth = 0, reserved_xrceth = 0;
  std::array<std::uint8_t, CnpReserved::length> cnp_reserved{};  // CNP

  std::span<const std::uint8_t> payload;  // without pad; the pad count is derived

  static IbRepr parse(const IbPacket& p);

  static constexpr std::size_t pad_for(std::size_t payload_length) { return (4 - payload_length % 4) % 4; }
  std::size_t pad_count() const { return pad_for(payload.size()); }
  // Bytes emit() writes: headers, payload, pad and the ICRC placeholder.
  std::size_t buffer_len() const { return info(opcode).header_length + payload.size() + pad_count() + kIcrcLength; }
  // Writes buffer_len() bytes to `out` (ICRC zero) and returns that length.
  std::size_t emit(std::uint8_t* out) const;
  // Writes only the BTH and extension headers, for a payload of `payload_length` bytes that
  // the caller places after them (reading it straight from memory, without a copy through
  // `payload`); returns the header length. Pad and ICRC are the caller's too.
  std::size_t emit_headers(std::uint8_t* out, std::size_t payload_length) const;

  bool operator==(const IbRepr& o) const;
};

}  // namespace wire
