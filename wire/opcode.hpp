// The BTH opcode table: the single source of truth for what follows a BTH.
//
// An opcode byte is a transport (bits 7-5) and an operation (bits 4-0), IBTA vol. 1 s9.2.1
// table 35. Each operation is described once (its extension headers and flags); the
// transport adds its own headers (RDETH/DETH for RD, DETH for UD, XRCETH for XRC requests)
// and decides which operations exist. Names, offsets and lengths of all 256 entries are
// computed from that, never typed.
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>

#include "wire/ib_headers.hpp"

namespace wire {

enum class Opcode : std::uint8_t {};  // a BTH opcode byte; a distinct type from flags and PSNs
constexpr Opcode opcode(std::uint8_t v) { return static_cast<Opcode>(v); }
constexpr std::uint8_t value(Opcode op) { return static_cast<std::uint8_t>(op); }

enum class Transport : std::uint8_t { rc = 0, uc = 1, rd = 2, ud = 3, cnp = 4, xrc = 5, vendor6 = 6, vendor7 = 7 };
constexpr Transport transport_of(Opcode op) { return static_cast<Transport>(value(op) >> 5); }

// The operation half of an opcode (bits 4-0), named for code; display names are in the table.
enum class Operation : std::uint8_t {
  send_first = 0x00,
  send_middle = 0x01,
  send_last = 0x02,
  send_last_imm = 0x03,
  send_only = 0x04,
  send_only_imm = 0x05,
  write_first = 0x06,
  write_middle = 0x07,
  write_last = 0x08,
  write_last_imm = 0x09,
  write_only = 0x0A,
  write_only_imm = 0x0B,
  read_request = 0x0C,
  read_response_first = 0x0D,
  read_response_middle = 0x0E,
  read_response_last = 0x0F,
  read_response_only = 0x10,
  ack = 0x11,
  atomic_ack = 0x12,
  compare_swap = 0x13,
  fetch_add = 0x14,
  resync = 0x15,
  send_last_inv = 0x16,
  send_only_inv = 0x17,
  atomic_write = 0x1D,  // IBTA vol. 1 release 1.5
  cnp = 0x01,           // with Transport::cnp: 0x81
};
constexpr Opcode opcode(Transport t, Operation o) {
  return static_cast<Opcode>(static_cast<std::uint8_t>(t) << 5 | static_cast<std::uint8_t>(o));
}
constexpr Operation operation_of(Opcode op) { return static_cast<Operation>(value(op) & 0x1F); }

// Extension headers, in the order they follow the BTH (s9.2, figure 110 and the XRC annex).
enum class Ext : std::uint8_t { rdeth, deth, xrceth, reth, atomiceth, aeth, atomicacketh, immdt, ieth, cnp, count };
inline constexpr std::array<std::size_t, static_cast<std::size_t>(Ext::count)> kExtLength = {
    Rdeth::length, Deth::length,         Xrceth::length, Reth::length, AtomicEth::length,
    Aeth::length,  AtomicAckEth::length, ImmDt::length,  Ieth::length, CnpReserved::length};

// A set of extension headers.
class ExtSet {
 public:
  constexpr ExtSet() = default;
  constexpr ExtSet(std::initializer_list<Ext> exts) {
    for (Ext e : exts) bits_ |= bit(e);
  }
  constexpr bool has(Ext e) const { return (bits_ & bit(e)) != 0; }
  constexpr ExtSet operator|(ExtSet o) const { return from_bits(bits_ | o.bits_); }
  constexpr bool operator==(const ExtSet&) const = default;

 private:
  static constexpr std::uint16_t bit(Ext e) { return static_cast<std::uint16_t>(1u << static_cast<unsigned>(e)); }
  static constexpr ExtSet from_bits(std::uint16_t b) {
    ExtSet s;
    s.bits_ = b;
    return s;
  }
  std::uint16_t bits_ = 0;
};

// What a packet of this opcode is and does. Distinct from Opcode so that testing a flag on
// an opcode byte cannot compile.
enum class OpFlag : std::uint16_t {
  request = 1 << 0,   // requester to responder
  response = 1 << 1,  // responder to requester (ACK, READ response, atomic ACK)
  send = 1 << 2,
  write = 1 << 3,
  read = 1 << 4,
  atomic = 1 << 5,
  first = 1 << 6,           // starts a message (FIRST or ONLY)
  last = 1 << 7,            // ends a message (LAST or ONLY)
  payload = 1 << 8,         // may carry payload
  immediate = 1 << 9,       // carries ImmDt
  invalidate = 1 << 10,     // carries IETH
  consumes_recv = 1 << 11,  // needs a receive WQE at the responder (s9.7.4.1.5, s9.7.5.1.1)
  ack = 1 << 12,            // plain ACK/NAK
  cnp = 1 << 13,            // congestion notification (annex A17.9.2)
  resync = 1 << 14,         // RD RESYNC
};
class OpFlags {
 public:
  constexpr OpFlags() = default;
  constexpr OpFlags(std::initializer_list<OpFlag> fs) {
    for (OpFlag f : fs) bits_ |= static_cast<std::uint16_t>(f);
  }
  constexpr bool has(OpFlag f) const { return (bits_ & static_cast<std::uint16_t>(f)) != 0; }
  constexpr bool operator==(const OpFlags&) const = default;

 private:
  std::uint16_t bits_ = 0;
};

struct OpcodeInfo {
  bool valid = false;  // false: reserved or manufacturer-specific; such packets are refused
  Transport transport = Transport::rc;
  std::string_view operation;  // e.g. "SEND_FIRST"
  ExtSet exts;
  OpFlags flags;
  std::size_t header_length = 0;                                            // BTH plus extension headers
  std::array<std::uint8_t, static_cast<std::size_t>(Ext::count)> offset{};  // from the BTH start; valid if has()

  constexpr bool has(Ext e) const { return exts.has(e); }
  constexpr bool is(OpFlag f) const { return flags.has(f); }
};

namespace detail {

struct OperationDesc {
  std::string_view name;
  ExtSet exts;
  OpFlags flags;
};

using F = OpFlag;
// The operations of table 35 by their low five bits; an empty name is reserved. One row each.
// clang-format off
// The operations of table 35 by their low five bits; an empty name is reserved.
inline constexpr std::array<OperationDesc, 32> kOperations = {{
    /*0x00*/ {"SEND_FIRST", {}, {F::request, F::send, F::first, F::payload, F::consumes_recv}},
    /*0x01*/ {"SEND_MIDDLE", {}, {F::request, F::send, F::payload, F::consumes_recv}},
    /*0x02*/ {"SEND_LAST", {}, {F::request, F::send, F::last, F::payload, F::consumes_recv}},
    /*0x03*/ {"SEND_LAST_WITH_IMMEDIATE", {Ext::immdt}, {F::request, F::send, F::last, F::payload, F::immediate, F::consumes_recv}},
    /*0x04*/ {"SEND_ONLY", {}, {F::request, F::send, F::first, F::last, F::payload, F::consumes_recv}},
    /*0x05*/ {"SEND_ONLY_WITH_IMMEDIATE", {Ext::immdt}, {F::request, F::send, F::first, F::last, F::payload, F::immediate, F::consumes_recv}},
    /*0x06*/ {"RDMA_WRITE_FIRST", {Ext::reth}, {F::request, F::write, F::first, F::payload}},
    /*0x07*/ {"RDMA_WRITE_MIDDLE", {}, {F::request, F::write, F::payload}},
    /*0x08*/ {"RDMA_WRITE_LAST", {}, {F::request, F::write, F::last, F::payload}},
    /*0x09*/ {"RDMA_WRITE_LAST_WITH_IMMEDIATE", {Ext::immdt}, {F::request, F::write, F::last, F::payload, F::immediate, F::consumes_recv}},
    /*0x0A*/ {"RDMA_WRITE_ONLY", {Ext::reth}, {F::request, F::write, F::first, F::last, F::payload}},
    /*0x0B*/ {"RDMA_WRITE_ONLY_WITH_IMMEDIATE", {Ext::reth, Ext::immdt}, {F::request, F::write, F::first, F::last, F::payload, F::immediate, F::consumes_recv}},
    /*0x0C*/ {"RDMA_READ_REQUEST", {Ext::reth}, {F::request, F::read, F::first, F::last}},
    /*0x0D*/ {"RDMA_READ_RESPONSE_FIRST", {Ext::aeth}, {F::response, F::read, F::first, F::payload}},
    /*0x0E*/ {"RDMA_READ_RESPONSE_MIDDLE", {}, {F::response, F::read, F::payload}},
    /*0x0F*/ {"RDMA_READ_RESPONSE_LAST", {Ext::aeth}, {F::response, F::read, F::last, F::payload}},
    /*0x10*/ {"RDMA_READ_RESPONSE_ONLY", {Ext::aeth}, {F::response, F::read, F::first, F::last, F::payload}},
    /*0x11*/ {"ACKNOWLEDGE", {Ext::aeth}, {F::response, F::ack, F::first, F::last}},
    /*0x12*/ {"ATOMIC_ACKNOWLEDGE", {Ext::aeth, Ext::atomicacketh}, {F::response, F::atomic, F::first, F::last}},
    /*0x13*/ {"COMPARE_SWAP", {Ext::atomiceth}, {F::request, F::atomic, F::first, F::last}},
    /*0x14*/ {"FETCH_ADD", {Ext::atomiceth}, {F::request, F::atomic, F::first, F::last}},
    /*0x15*/ {"RESYNC", {}, {F::request, F::resync, F::first, F::last}},
    /*0x16*/ {"SEND_LAST_WITH_INVALIDATE", {Ext::ieth}, {F::request, F::send, F::last, F::payload, F::invalidate, F::consumes_recv}},
    /*0x17*/ {"SEND_ONLY_WITH_INVALIDATE", {Ext::ieth}, {F::request, F::send, F::first, F::last, F::payload, F::invalidate, F::consumes_recv}},
    /*0x18*/ {}, /*0x19*/ {}, /*0x1A*/ {}, /*0x1B*/ {}, /*0x1C*/ {},
    // Release 1.5's ATOMIC WRITE: an RDMA WRITE of one aligned 8-byte word, placed whole.
    /*0x1D*/ {"ATOMIC_WRITE", {Ext::reth}, {F::request, F::write, F::first, F::last, F::payload}},
}};
// clang-format on

// Which operations each transport defines (table 35).
constexpr bool transport_has(Transport t, std::uint8_t op) {
  switch (t) {
    case Transport::rc:
      return op <= 0x14 || op == 0x16 || op == 0x17 || op == 0x1D;
    case Transport::xrc:
      return op <= 0x14 || op == 0x16 || op == 0x17;
    case Transport::uc:
      return op <= 0x0B;
    case Transport::rd:
      return op <= 0x15;
    case Transport::ud:
      return op == 0x04 || op == 0x05;
    case Transport::cnp:
      return op == 0x01;
    default:
      return false;
  }
}

constexpr OpcodeInfo describe(std::uint8_t byte) {
  OpcodeInfo info;
  info.transport = static_cast<Transport>(byte >> 5);
  const std::uint8_t op = byte & 0x1F;
  if (!transport_has(info.transport, op)) return info;
  info.valid = true;
  if (info.transport == Transport::cnp) {
    info.operation = "CNP";
    info.exts = {Ext::cnp};
    info.flags = {F::cnp, F::first, F::last};
  } else {
    const OperationDesc& d = kOperations[op];
    info.operation = d.name;
    info.exts = d.exts;
    info.flags = d.flags;
    // Transport-specific headers (s9.2): RD requests carry RDETH+DETH and its responses
    // RDETH; UD carries DETH; XRC requests carry XRCETH.
    const bool request = d.flags.has(F::request);
    if (info.transport == Transport::rd)
      info.exts = info.exts | (request ? ExtSet{Ext::rdeth, Ext::deth} : ExtSet{Ext::rdeth});
    if (info.transport == Transport::ud) info.exts = info.exts | ExtSet{Ext::deth};
    if (info.transport == Transport::xrc && request) info.exts = info.exts | ExtSet{Ext::xrceth};
  }
  std::size_t at = Bth::length;
  for (std::size_t e = 0; e < static_cast<std::size_t>(Ext::count); ++e) {
    if (!info.exts.has(static_cast<Ext>(e))) continue;
    info.offset[e] = static_cast<std::uint8_t>(at);
    at += kExtLength[e];
  }
  info.header_length = at;
  return info;
}

constexpr std::array<OpcodeInfo, 256> make_table() {
  std::array<OpcodeInfo, 256> t{};
  for (std::size_t i = 0; i < t.size(); ++i) t[i] = describe(static_cast<std::uint8_t>(i));
  return t;
}

}  // namespace detail

inline constexpr std::array<OpcodeInfo, 256> kOpcodeTable = detail::make_table();

constexpr const OpcodeInfo& info(Opcode op) { return kOpcodeTable[value(op)]; }

constexpr std::string_view transport_name(Transport t) {
  constexpr std::array<std::string_view, 8> names = {"RC", "UC", "RD", "UD", "CNP", "XRC", "VENDOR6", "VENDOR7"};
  return names[static_cast<std::size_t>(t)];
}

// "RC_SEND_FIRST", "UD_SEND_ONLY", "CNP", or "RESERVED_0x1F".
std::string opcode_name(Opcode op);

}  // namespace wire
