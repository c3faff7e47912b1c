// What an rsocket puts on the wire, as rdma-core's librdmacm speaks it (its rsocket.c is the
// only definition of the protocol; rsocket(7) describes the API): the private data of the
// REQ and REP, the 32-bit immediate data of every RDMA WRITE WITH IMMEDIATE, and the
// scatter/gather entries one side writes into the other's memory. Only facts live here:
// layouts, numbers and their byte order, so that a real rsocket peer understands ours.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>

namespace softrdma::rsockets::wire {

// The immediate data: the operation in bits 31..29, its argument in bits 28..0. Sent in
// network order (the verbs' imm_data field is big-endian).
enum class Op : std::uint32_t {
  data = 0,       // argument: bytes written into the receive buffer
  write = 2,      // riowrite's plain RDMA WRITE: never on the wire, used only to tag completions
  sgl = 4,        // argument: the receiver's new sequence limit (credits); maybe an SGE written
  iomap_sgl = 6,  // argument: the index of the iomap entry written
  ctrl = 7,       // argument: a Ctrl value
};
inline constexpr std::uint32_t kArgMask = 0x1FFFFFFF;

inline constexpr std::uint32_t message(Op op, std::uint32_t arg) {
  return (static_cast<std::uint32_t>(op) << 29) | (arg & kArgMask);
}
inline constexpr std::uint32_t op_bits(std::uint32_t msg) { return msg >> 29; }
inline constexpr std::uint32_t arg_of(std::uint32_t msg) { return msg & kArgMask; }

// On iWARP a message travels in a SEND of its own (rdma-core's RS_OPT_MSG_SEND): these 4
// bytes, in the sender's byte order, as rdma-core sends them.
inline constexpr std::uint32_t kMsgSize = 4;

enum class Ctrl : std::uint32_t { disconnect = 0, keepalive = 1, shutdown = 2 };

// Each side's target SGL holds two entries (a receive buffer is offered in halves), and the
// first one is the data_buf of the connection data: the first SGE update goes to entry 1.
inline constexpr int kSglEntries = 2;
// Each side may have this many control messages (SGL updates, CTRL) outstanding; the send
// queue keeps room for them.
inline constexpr int kCtrlSlots = 4;

// struct rs_sge: written into the peer's memory in the PEER's byte order (see kFlagNet).
inline constexpr std::size_t kSgeSize = 16;  // addr u64, key u32, length u32
// struct rs_iomap: offset u64, then an SGE; the entries follow the target SGL in one region.
inline constexpr std::size_t kIomapSize = 24;

struct Sge {
  std::uint64_t addr = 0;
  std::uint32_t key = 0;
  std::uint32_t length = 0;
};

struct Iomap {
  std::uint64_t offset = 0;
  Sge sge;
};

// Connection data flags: kFlagNet says the sender's host is big-endian (its SGEs must be
// written to it in network order); kFlagIomap that the target_iomap_size field is valid.
inline constexpr std::uint8_t kFlagNet = 1 << 0;
inline constexpr std::uint8_t kFlagIomap = 1 << 1;
inline constexpr std::uint8_t kVersion = 1;

// struct rs_conn_data, the REQ's and the REP's private data (after rdma_cm's annex A11
// header, which the connection manager strips): 40 bytes, its fields in network order.
inline constexpr std::size_t kConnDataSize = 40;

struct ConnData {
  std::uint8_t version = kVersion;
  std::uint8_t flags = 0;
  std::uint16_t credits = 0;           // receives posted: the peer's first sequence limit
  std::uint8_t target_iomap_size = 0;  // scaled (scale_of): entries the peer may fill
  Sge target_sgl;                      // where the peer writes SGEs; length = entry count
  Sge data_buf;                        // the first half of the receive buffer
};

inline constexpr bool host_is_big_endian() { return std::endian::native == std::endian::big; }

// The iomap table size travels as 8 bits: up to 128 as is, above as 0x80 | (value >> 8).
inline constexpr int scale_of(int value) { return value <= 128 ? value : 0x80 | (value >> 8); }
inline constexpr int value_of(int scaled) { return scaled <= 128 ? scaled : (scaled & ~0x80) << 8; }

namespace detail {
// std::byteswap is C++23.
inline std::uint16_t swap(std::uint16_t v) { return __builtin_bswap16(v); }
inline std::uint32_t swap(std::uint32_t v) { return __builtin_bswap32(v); }
inline std::uint64_t swap(std::uint64_t v) { return __builtin_bswap64(v); }
template <class T>
T to_big(T v) {
  return host_is_big_endian() ? v : swap(v);
}
template <class T>
void put(std::uint8_t* p, T v) {
  std::memcpy(p, &v, sizeof v);
}
template <class T>
T get(const std::uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
// An SGE as 16 bytes, big-endian when `big`, else little-endian.
inline void put_sge(std::uint8_t* p, const Sge& s, bool big) {
  const auto order = [big](auto v) { return big == host_is_big_endian() ? v : swap(v); };
  put(p, order(s.addr));
  put(p + 8, order(s.key));
  put(p + 12, order(s.length));
}
inline Sge get_sge(const std::uint8_t* p, bool big) {
  const auto order = [big](auto v) { return big == host_is_big_endian() ? v : swap(v); };
  return {order(get<std::uint64_t>(p)), order(get<std::uint32_t>(p + 8)), order(get<std::uint32_t>(p + 12))};
}
}  // namespace detail

inline void emit(const ConnData& c, std::span<std::uint8_t, kConnDataSize> out) {
  std::uint8_t* p = out.data();
  std::memset(p, 0, kConnDataSize);
  p[0] = c.version;
  p[1] = c.flags;
  detail::put(p + 2, detail::to_big(c.credits));
  p[7] = c.target_iomap_size;  // bytes 4..6 reserved
  detail::put_sge(p + 8, c.target_sgl, true);
  detail::put_sge(p + 24, c.data_buf, true);
}

inline ConnData parse(std::span<const std::uint8_t, kConnDataSize> in) {
  const std::uint8_t* p = in.data();
  ConnData c;
  c.version = p[0];
  c.flags = p[1];
  c.credits = detail::to_big(detail::get<std::uint16_t>(p + 2));
  c.target_iomap_size = p[7];
  c.target_sgl = detail::get_sge(p + 8, true);
  c.data_buf = detail::get_sge(p + 24, true);
  return c;
}

// SGEs and iomap entries go into the peer's memory in its host order (kFlagNet of its
// connection data); we read ours in our own.
inline void emit_sge(const Sge& s, bool peer_big, std::span<std::uint8_t, kSgeSize> out) {
  detail::put_sge(out.data(), s, peer_big);
}
inline Sge parse_sge(std::span<const std::uint8_t, kSgeSize> in) {
  return detail::get_sge(in.data(), host_is_big_endian());
}
inline void emit_iomap(const Iomap& m, bool peer_big, std::span<std::uint8_t, kIomapSize> out) {
  const std::uint64_t off = peer_big == host_is_big_endian() ? m.offset : detail::swap(m.offset);
  detail::put(out.data(), off);
  detail::put_sge(out.data() + 8, m.sge, peer_big);
}
inline Iomap parse_iomap(std::span<const std::uint8_t, kIomapSize> in) {
  return {detail::get<std::uint64_t>(in.data()), detail::get_sge(in.data() + 8, host_is_big_endian())};
}

}  // namespace softrdma::rsockets::wire
