// Scenario tests as timelines (in the style of smoltcp's tcp.rs tests): one engine with one RC
// QP whose peer is played by the test. The peer is a QPN and a GID that no engine owns; the
// test delivers the peer's packets at chosen virtual times and asserts, packet by packet, what
// the engine sends back, or that it sends nothing.
//
//   Timeline tl;                          // one RC QP in RTS; its peer is kPeerQpn at kPeerGid
//   const std::uint32_t e = tl.epsn();    // the PSN the engine expects from the peer
//   tl.post_recv(1, 0, 4096);
//   tl.deliver(10, send_only(e, bytes(100, 1)).ackreq());
//   tl.expect(20, ack(e, 1));             // exactly this packet, at t = 20 ns
//   tl.expect_nothing(30);
//
// Every step takes the virtual time it happens at (nanoseconds, never decreasing). expect()
// and expect_nothing() first fire the timers due at that time (Device::advance), then ask the
// engine for one packet (Device::transmit). deliver() only receives: a timer due at that time
// fires at the next expect. Packets the engine sends are checked at the wire level (IbPacket
// check, ICRC over the addresses they carry) before they are compared field by field.
#pragma once

#include <catch2/catch.hpp>
#include <cstdint>
#include <cstring>
#include <iomanip>
#include <memory>
#include <optional>
#include <source_location>
#include <sstream>
#include <string>
#include <vector>

#include "emulator/core/psn.hpp"
#include "emulator/core/rnr_timer.hpp"
#include "emulator/core/roce_headers.hpp"
#include "tests/core/engine_fixture.hpp"
#include "wire/ib_packet.hpp"
#include "wire/icrc.hpp"

namespace test::timeline {

using core::Time;
using wire::NakCode;
using wire::Operation;

// The fake peer: no engine owns this QPN or GID.
inline constexpr std::uint32_t kPeerQpn = 0x00ABCD;
inline constexpr core::Gid kPeerGid = ipv4_gid(9);
inline constexpr std::uint16_t kPeerUdpPort = 0xC0DE;
inline constexpr std::uint8_t kNoCredit = 0x1F;  // AETH credit field "no credit information"

// ---------------------------------------------------------------------------------------------
// Packets as values.

// One packet, either direction: every header field (wire::IbRepr) and its payload, which the
// packet owns (copies share it). dest_qp is filled in by deliver()/expect(), so the helpers
// below never name a QPN.
struct Pkt {
  wire::IbRepr h;
  std::shared_ptr<const std::vector<std::uint8_t>> data;

  Pkt() { h.mig_req = true; }  // M=1 (path migrated), as the engine sends every packet
  Pkt(wire::Transport t, Operation op, std::uint32_t psn) : Pkt() {
    h.opcode = wire::opcode(t, op);
    h.psn = psn & core::kPsnMask;
  }

  Pkt ackreq(bool on = true) const {
    Pkt p = *this;
    p.h.ack_req = on;
    return p;
  }
  Pkt with_payload(std::vector<std::uint8_t> bytes) const {
    Pkt p = *this;
    p.data = std::make_shared<const std::vector<std::uint8_t>>(std::move(bytes));
    p.h.payload = *p.data;
    return p;
  }
  // Another opcode of the same transport (e.g. send_last -> send_last_imm), headers kept.
  Pkt as(Operation op) const {
    Pkt p = *this;
    p.h.opcode = wire::opcode(wire::transport_of(h.opcode), op);
    return p;
  }
  Pkt imm(std::uint32_t v) const {
    Pkt p = *this;
    p.h.imm = v;
    return p;
  }
  Pkt se(bool on = true) const {
    Pkt p = *this;
    p.h.solicited_event = on;
    return p;
  }
  std::vector<std::uint8_t> payload() const { return {h.payload.begin(), h.payload.end()}; }
  Operation op() const { return wire::operation_of(h.opcode); }

  bool operator==(const Pkt& o) const { return h == o.h; }
};

// `n` bytes of a pattern that differs with `seed`.
inline std::vector<std::uint8_t> bytes(std::size_t n, std::uint8_t seed) {
  std::vector<std::uint8_t> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<std::uint8_t>(seed + i * 13 + (i >> 8));
  return v;
}
inline std::vector<std::uint8_t> slice(const std::vector<std::uint8_t>& v, std::size_t from, std::size_t n) {
  return {v.begin() + static_cast<std::ptrdiff_t>(from), v.begin() + static_cast<std::ptrdiff_t>(from + n)};
}

inline std::uint8_t ack_syndrome(std::uint8_t credits = kNoCredit) {
  return wire::make_syndrome(wire::AckKind::ack, credits);
}

// Requests (RC).
inline Pkt rc(Operation op, std::uint32_t psn) { return Pkt(wire::Transport::rc, op, psn); }
inline Pkt send_first(std::uint32_t psn, std::vector<std::uint8_t> d) {
  return rc(Operation::send_first, psn).with_payload(std::move(d));
}
inline Pkt send_middle(std::uint32_t psn, std::vector<std::uint8_t> d) {
  return rc(Operation::send_middle, psn).with_payload(std::move(d));
}
inline Pkt send_last(std::uint32_t psn, std::vector<std::uint8_t> d) {
  return rc(Operation::send_last, psn).with_payload(std::move(d));
}
inline Pkt send_only(std::uint32_t psn, std::vector<std::uint8_t> d) {
  return rc(Operation::send_only, psn).with_payload(std::move(d));
}
inline Pkt write_first(std::uint32_t psn, std::uint64_t va, std::uint32_t rkey, std::uint32_t dma_length,
                       std::vector<std::uint8_t> d) {
  Pkt p = rc(Operation::write_first, psn).with_payload(std::move(d));
  p.h.va = va;
  p.h.rkey = rkey;
  p.h.dma_length = dma_length;
  return p;
}
inline Pkt write_middle(std::uint32_t psn, std::vector<std::uint8_t> d) {
  return rc(Operation::write_middle, psn).with_payload(std::move(d));
}
inline Pkt write_last(std::uint32_t psn, std::vector<std::uint8_t> d) {
  return rc(Operation::write_last, psn).with_payload(std::move(d));
}
inline Pkt write_only(std::uint32_t psn, std::uint64_t va, std::uint32_t rkey, std::vector<std::uint8_t> d) {
  const auto n = static_cast<std::uint32_t>(d.size());
  Pkt p = write_first(psn, va, rkey, n, std::move(d));
  p.h.opcode = wire::opcode(wire::Transport::rc, Operation::write_only);
  return p;
}
inline Pkt atomic_write(std::uint32_t psn, std::uint64_t va, std::uint32_t rkey, std::vector<std::uint8_t> d) {
  Pkt p = write_only(psn, va, rkey, std::move(d));
  p.h.opcode = wire::opcode(wire::Transport::rc, Operation::atomic_write);
  return p;
}
inline Pkt read_request(std::uint32_t psn, std::uint64_t va, std::uint32_t rkey, std::uint32_t dma_length) {
  Pkt p = rc(Operation::read_request, psn);
  p.h.va = va;
  p.h.rkey = rkey;
  p.h.dma_length = dma_length;
  return p;
}
inline Pkt fetch_add(std::uint32_t psn, std::uint64_t va, std::uint32_t rkey, std::uint64_t add) {
  Pkt p = rc(Operation::fetch_add, psn);
  p.h.va = va;
  p.h.rkey = rkey;
  p.h.swap_add = add;
  return p;
}
inline Pkt compare_swap(std::uint32_t psn, std::uint64_t va, std::uint32_t rkey, std::uint64_t compare,
                        std::uint64_t swap) {
  Pkt p = rc(Operation::compare_swap, psn);
  p.h.va = va;
  p.h.rkey = rkey;
  p.h.compare = compare;
  p.h.swap_add = swap;
  return p;
}

// Responses (RC). A plain ACK carries credit code 31, "no credit information", as rxe sends.
inline Pkt aeth(Operation op, std::uint32_t psn, std::uint8_t syndrome, std::uint32_t msn) {
  Pkt p = rc(op, psn);
  p.h.syndrome = syndrome;
  p.h.msn = msn & core::kPsnMask;
  return p;
}
inline Pkt ack(std::uint32_t psn, std::uint32_t msn) { return aeth(Operation::ack, psn, ack_syndrome(), msn); }
inline Pkt nak(std::uint32_t psn, NakCode code, std::uint32_t msn = 0) {
  return aeth(Operation::ack, psn, wire::make_syndrome(wire::AckKind::nak, static_cast<std::uint8_t>(code)), msn);
}
inline Pkt rnr_nak(std::uint32_t psn, std::uint8_t timer_code, std::uint32_t msn = 0) {
  return aeth(Operation::ack, psn, wire::make_syndrome(wire::AckKind::rnr_nak, timer_code), msn);
}
// READ responses: `op` is read_response_first/_middle/_last/_only (MIDDLE carries no AETH).
inline Pkt read_response(Operation op, std::uint32_t psn, std::uint32_t msn, std::vector<std::uint8_t> d) {
  Pkt p = rc(op, psn).with_payload(std::move(d));
  if (op != Operation::read_response_middle) {
    p.h.syndrome = ack_syndrome();
    p.h.msn = msn & core::kPsnMask;
  }
  return p;
}
inline Pkt read_first(std::uint32_t psn, std::uint32_t msn, std::vector<std::uint8_t> d) {
  return read_response(Operation::read_response_first, psn, msn, std::move(d));
}
inline Pkt read_middle(std::uint32_t psn, std::vector<std::uint8_t> d) {
  return read_response(Operation::read_response_middle, psn, 0, std::move(d));
}
inline Pkt read_last(std::uint32_t psn, std::uint32_t msn, std::vector<std::uint8_t> d) {
  return read_response(Operation::read_response_last, psn, msn, std::move(d));
}
inline Pkt read_only(std::uint32_t psn, std::uint32_t msn, std::vector<std::uint8_t> d) {
  return read_response(Operation::read_response_only, psn, msn, std::move(d));
}
inline Pkt atomic_ack(std::uint32_t psn, std::uint32_t msn, std::uint64_t original) {
  Pkt p = aeth(Operation::atomic_ack, psn, ack_syndrome(), msn);
  p.h.original_data = original;
  return p;
}

// "RC_SEND_ONLY psn=0x000100 A dqp=0x00abcd payload[100]=01 0e ...": what a failed comparison
// prints for each side.
inline std::string describe(const Pkt& p) {
  const wire::IbRepr& h = p.h;
  const wire::OpcodeInfo& oi = wire::info(h.opcode);
  std::ostringstream o;
  o << std::hex << std::setfill('0');
  o << wire::opcode_name(h.opcode) << " psn=0x" << std::setw(6) << h.psn << (h.ack_req ? " A" : "")
    << (h.solicited_event ? " SE" : "") << (h.mig_req ? "" : " M=0") << " dqp=0x" << std::setw(6) << h.dest_qp;
  if (h.pkey != 0xFFFF) o << " pkey=0x" << h.pkey;
  if (h.fecn || h.becn || h.resv6 || h.resv7) o << " [fecn/becn/resv set]";
  if (oi.has(wire::Ext::reth) || oi.has(wire::Ext::atomiceth)) o << " va=0x" << h.va << " rkey=0x" << h.rkey;
  if (oi.has(wire::Ext::reth)) o << std::dec << " len=" << h.dma_length << std::hex;
  if (oi.has(wire::Ext::atomiceth)) o << " swap_add=0x" << h.swap_add << " compare=0x" << h.compare;
  if (oi.has(wire::Ext::aeth)) {
    static constexpr const char* kinds[] = {"ACK", "RNR_NAK", "RESERVED", "NAK"};
    o << " aeth=" << kinds[static_cast<int>(wire::ack_kind(h.syndrome))] << "/" << std::dec
      << int{wire::syndrome_value(h.syndrome)} << std::hex << " msn=0x" << h.msn;
  }
  if (oi.has(wire::Ext::atomicacketh)) o << " orig=0x" << h.original_data;
  if (oi.has(wire::Ext::immdt)) o << " imm=0x" << h.imm;
  if (oi.has(wire::Ext::ieth)) o << " inv_rkey=0x" << h.invalidate_rkey;
  if (oi.is(wire::OpFlag::payload)) {
    o << " payload[" << std::dec << h.payload.size() << "]=" << std::hex;
    std::uint32_t fnv = 2166136261u;
    for (std::uint8_t b : h.payload) fnv = (fnv ^ b) * 16777619u;
    for (std::size_t i = 0; i < h.payload.size() && i < 8; ++i) o << std::setw(2) << int{h.payload[i]} << ' ';
    o << "fnv=" << fnv;
  }
  return o.str();
}

inline std::string describe(const std::optional<Pkt>& p) { return p ? describe(*p) : std::string("(nothing)"); }

}  // namespace test::timeline

namespace Catch {
template <>
struct StringMaker<test::timeline::Pkt> {
  static std::string convert(const test::timeline::Pkt& p) { return test::timeline::describe(p); }
};
}  // namespace Catch

namespace test::timeline {

// ---------------------------------------------------------------------------------------------
// The timeline.

struct Config {
  core::Mtu mtu = core::Mtu::mtu256;
  std::uint32_t sq_psn = 0x000100;  // the engine's first request PSN
  std::uint32_t rq_psn = 0x000800;  // the peer's first request PSN: the engine's expected PSN
  std::uint8_t timeout = 10;        // 4.096 us << 10 = 4.194304 ms
  std::uint8_t retry_cnt = 7;
  std::uint8_t rnr_retry = 7;
  std::uint8_t min_rnr_timer = 12;  // 0.64 ms
  std::uint8_t rd_atomic = 4;       // max_rd_atomic and max_dest_rd_atomic
  std::size_t buffer_bytes = 64 * 1024;
};

class Timeline {
 public:
  using Loc = std::source_location;

  explicit Timeline(const Config& c = {}) : config(c), side(1, c.buffer_bytes) {
    QpOptions o;
    o.mtu = c.mtu;
    o.timeout = c.timeout;
    o.retry_cnt = c.retry_cnt;
    o.rnr_retry = c.rnr_retry;
    o.min_rnr_timer = c.min_rnr_timer;
    o.rd_atomic = c.rd_atomic;
    bring_up(side, kPeerQpn, kPeerGid, c.sq_psn, c.rq_psn, o);
  }

  core::Device& dev() { return *side.dev; }
  const core::Qp& qp() const { return *side.dev->qp(side.qpn); }
  core::QpState state() const { return qp().state(); }
  std::uint32_t qpn() const { return side.qpn; }
  // The responder's expected PSN now.
  std::uint32_t epsn() const { return qp().epsn; }
  Time now() const { return now_; }

  // --- the peer's side -----------------------------------------------------------------------

  // The peer's packet `p` arrives at `t`, with a correct ICRC.
  void deliver(Time t, Pkt p, const Loc& loc = Loc::current()) {
    INFO("deliver at t=" << t << " (line " << loc.line() << "): " << describe(p));
    step_to(t);
    p.h.dest_qp = side.qpn;
    std::vector<std::uint8_t> wire_bytes(p.h.buffer_len());
    p.h.emit(wire_bytes.data());
    const std::size_t covered = wire_bytes.size() - wire::kIcrcLength;
    const core::Endpoints e{kPeerGid, my_gid(), kPeerUdpPort, 0, 0, 64};
    wire::store_icrc(wire_bytes.data() + covered, core::icrc_between(e, {wire_bytes.data(), covered}));
    const auto before = side.dev->counters();
    side.dev->receive(t, core::RxPacket{wire_bytes, kPeerGid, my_gid(), kPeerUdpPort, false});
    // The harness builds only well-formed packets: the engine must have taken it in.
    REQUIRE(side.dev->counters().malformed == before.malformed);
    REQUIRE(side.dev->counters().icrc_err == before.icrc_err);
    REQUIRE(side.dev->counters().unknown_qp == before.unknown_qp);
  }

  // The engine's next packet at `t` (timers due by `t` fired first); fails if there is none.
  Pkt expect(Time t, const Loc& loc = Loc::current()) {
    auto got = next(t, loc);
    INFO("expect at t=" << t << " (line " << loc.line() << ")");
    REQUIRE(got.has_value());
    return *got;
  }

  // The engine's next packet at `t` is exactly `want` (dest_qp: the peer's QPN).
  Pkt expect(Time t, Pkt want, const Loc& loc = Loc::current()) {
    want.h.dest_qp = kPeerQpn;
    auto got = next(t, loc);
    INFO("expect at t=" << t << " (line " << loc.line() << ")");
    INFO("want: " << describe(want));
    REQUIRE(got.has_value());
    REQUIRE(*got == want);
    return *got;
  }

  // The engine has nothing to send at `t`.
  void expect_nothing(Time t, const Loc& loc = Loc::current()) {
    auto got = next(t, loc);
    INFO("expect nothing at t=" << t << " (line " << loc.line() << ")");
    INFO("got: " << describe(got));
    REQUIRE_FALSE(got.has_value());
  }

  // Fires the timers due at `t` without asking for a packet.
  void tick(Time t) {
    step_to(t);
    side.dev->advance(t);
  }

  std::optional<Time> deadline() const { return side.dev->next_deadline(); }

  // --- verbs on the engine's side ------------------------------------------------------------

  void post_send(Time t, const core::SendWr& wr, const Loc& loc = Loc::current()) {
    INFO("post_send at t=" << t << " (line " << loc.line() << ")");
    step_to(t);
    REQUIRE(side.dev->post_send(t, side.qpn, wr) == 0);
  }
  // A signaled WR of `op` over one SGE [offset, offset + length) of the engine's buffer.
  core::SendWr wr(core::WrOpcode op, std::uint64_t id, std::size_t offset, std::uint32_t length) const {
    core::SendWr w;
    w.wr_id = id;
    w.opcode = op;
    w.flags = core::send_flags::signaled;
    if (length) w.sg_list = {side.sge(offset, length)};
    return w;
  }
  void post_recv(std::uint64_t id, std::size_t offset, std::uint32_t length, const Loc& loc = Loc::current()) {
    INFO("post_recv (line " << loc.line() << ")");
    core::RecvWr r;
    r.wr_id = id;
    r.sg_list = {side.sge(offset, length)};
    REQUIRE(side.dev->post_recv(side.qpn, r) == 0);
  }
  void modify_state(Time t, core::QpState s) {
    step_to(t);
    core::QpAttr a;
    a.qp_state = s;
    REQUIRE(side.dev->modify_qp(t, side.qpn, a, core::qp_attr::state) == 0);
  }
  std::vector<core::Wc> send_wcs() { return side.poll(side.send_cq); }
  std::vector<core::Wc> recv_wcs() { return side.poll(side.recv_cq); }

  // --- the engine's memory (what the peer's RETHs point at) ----------------------------------

  std::uint64_t va(std::size_t offset) const { return side.addr(offset); }
  std::uint32_t rkey() const { return side.mr.rkey; }
  void put(std::size_t offset, const std::vector<std::uint8_t>& v) {
    std::memcpy(side.buffer.data() + offset, v.data(), v.size());
  }
  std::vector<std::uint8_t> get(std::size_t offset, std::size_t n) const { return slice(side.buffer, offset, n); }
  void put_u64(std::size_t offset, std::uint64_t v) { std::memcpy(side.buffer.data() + offset, &v, 8); }
  std::uint64_t get_u64(std::size_t offset) const {
    std::uint64_t v = 0;
    std::memcpy(&v, side.buffer.data() + offset, 8);
    return v;
  }

  Config config;
  Side side;

 private:
  const core::Gid& my_gid() const { return side.dev->config().gids.at(0); }

  void step_to(Time t) {
    REQUIRE(t >= now_);  // a timeline never goes back in time
    now_ = t;
  }

  std::optional<Pkt> next(Time t, const Loc& loc) {
    INFO("at t=" << t << " (line " << loc.line() << ")");
    step_to(t);
    side.dev->advance(t);
    auto tx = side.dev->transmit(t);
    if (!tx) return std::nullopt;
    // Addressed to the peer, well formed, with the ICRC a receiver computes from the
    // addresses the packet travels with.
    REQUIRE(tx->route.dst == kPeerGid);
    REQUIRE(tx->route.src == my_gid());
    const auto checked = wire::IbPacket::check(tx->bytes);
    REQUIRE(checked.ok());
    REQUIRE(core::icrc_between(tx->route, checked->covered()) == checked->icrc());
    const wire::IbRepr r = wire::IbRepr::parse(*checked);
    Pkt p;
    p.h = r;
    p = p.with_payload({r.payload.begin(), r.payload.end()});
    return p;
  }

  Time now_ = 0;
};

}  // namespace test::timeline
