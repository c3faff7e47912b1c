// RoCE frames: golden packets from Linux rxe (tests/data, copied from the interop guests'
// captures), builders checked against themselves, and every named error for bad input.
#include "wire/roce_frame.hpp"

#include <algorithm>
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "tests/wire/data_frames.hpp"

using namespace wire;
using test::read_frames;

namespace {

// A small valid RC SEND ONLY with 5 payload bytes (pad 3) over IPv4.
RoceFrameRepr send_only() {
  static const std::uint8_t payload[5] = {'h', 'e', 'l', 'l', 'o'};
  RoceFrameRepr r;
  Ipv4Repr ip;
  ip.src = {127, 0, 0, 1};
  ip.dst = {127, 0, 0, 2};
  r.network = ip;
  r.ib.opcode = opcode(Transport::rc, Operation::send_only);
  r.ib.dest_qp = 0x11;
  r.ib.psn = 0xFFFFFF;
  r.ib.ack_req = true;
  r.ib.payload = payload;
  return r;
}

std::vector<std::uint8_t> emit(const RoceFrameRepr& r) {
  std::vector<std::uint8_t> b(r.buffer_len(), 0xA5);  // poisoned: a byte emit forgets shows up
  REQUIRE(r.emit(b.data()) == b.size());
  return b;
}

Error error_of(const std::vector<std::uint8_t>& bytes) {
  const auto f = RoceFrame::check(bytes);
  REQUIRE_FALSE(f.ok());
  return f.error();
}

constexpr std::size_t kIp = Ethernet::length, kUdp = kIp + Ipv4::min_length, kBth = kUdp + Udp::length;

}  // namespace

TEST_CASE("rxe golden captures: every packet checks, verifies and rebuilds byte-exactly", "[wire][roce][golden]") {
  for (const char* name : {"rxe-rdmaops.pcap", "rxe-atomic-cas.pcap", "rxe-ud-pingpong.pcap"}) {
    INFO(name);
    const auto frames = read_frames(name);
    REQUIRE_FALSE(frames.empty());
    for (const auto& bytes : frames) {
      const auto f = RoceFrame::check(bytes);
      REQUIRE(f.ok());
      CHECK(f->icrc_ok());
      CHECK(emit(RoceFrameRepr::parse(*f)) == bytes);
    }
  }
}

TEST_CASE("rxe golden captures: field values match what tshark shows", "[wire][roce][golden]") {
  const auto cas = read_frames("rxe-atomic-cas.pcap");
  const auto req = RoceFrame::check(cas[0]);
  REQUIRE(req.ok());
  const IbRepr r = IbRepr::parse(req->ib());
  CHECK(opcode_name(r.opcode) == "RC_COMPARE_SWAP");
  CHECK(r.dest_qp == 0x1c);
  CHECK(r.psn == 3257426);
  CHECK(r.va == 0x000055851bb29000ull);
  CHECK(r.rkey == 0x00000d9cu);

  const auto ack = RoceFrame::check(cas[2]);
  REQUIRE(ack.ok());
  const IbRepr a = IbRepr::parse(ack->ib());
  CHECK(opcode_name(a.opcode) == "RC_ATOMIC_ACKNOWLEDGE");
  CHECK(ack_kind(a.syndrome) == AckKind::ack);
  CHECK(syndrome_value(a.syndrome) == 31);  // rxe: "no credit information"
  CHECK(a.msn == 1);
  CHECK(a.original_data == 5127106829878049394ull);

  const auto ud_frames = read_frames("rxe-ud-pingpong.pcap");  // the views below point into it
  const auto ud = RoceFrame::check(ud_frames[0]);
  REQUIRE(ud.ok());
  const IbRepr u = IbRepr::parse(ud->ib());
  CHECK(opcode_name(u.opcode) == "UD_SEND_ONLY");
  CHECK(u.qkey == 0x11111111u);
  CHECK(u.src_qp == 0x13);

  const auto ops = read_frames("rxe-rdmaops.pcap");
  const IbRepr imm = IbRepr::parse(RoceFrame::check(ops[13])->ib());
  CHECK(opcode_name(imm.opcode) == "RC_RDMA_WRITE_LAST_WITH_IMMEDIATE");
  CHECK(imm.imm == 0xcafe0001u);
}

TEST_CASE("builders: a built frame checks, verifies and parses back to its fields", "[wire][roce][build]") {
  for (bool v6 : {false, true}) {
    RoceFrameRepr r = send_only();
    if (v6)
      r.network = Ipv6Repr{{0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1},
                           {0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2}};
    const auto bytes = emit(r);
    const auto f = RoceFrame::check(bytes);
    REQUIRE(f.ok());
    CHECK(f->encapsulation() == (v6 ? Encapsulation::rocev2_ipv6 : Encapsulation::rocev2_ipv4));
    CHECK(f->icrc_ok());
    CHECK(f->ib().pad_count() == 3);
    CHECK(IbRepr::parse(f->ib()) == r.ib);
    const auto back = RoceFrameRepr::parse(*f);
    CHECK(back.src_port == r.src_port);
    // IPv6 always carries a UDP checksum (RFC 8200 s8.1); IPv4 sends zero, as rxe does.
    CHECK(back.udp_checksum == (v6 ? RoceFrameRepr::UdpChecksum::computed : RoceFrameRepr::UdpChecksum::zero));
  }
}

TEST_CASE("builders: RoCEv1 frames (GRH) rebuild too", "[wire][roce][build]") {
  RoceFrameRepr r = send_only();
  r.network = GrhRepr{0, 0, 64, ipv4_mapped({10, 0, 0, 1}), ipv4_mapped({10, 0, 0, 2})};
  const auto bytes = emit(r);
  const auto f = RoceFrame::check(bytes);
  REQUIRE(f.ok());
  CHECK(f->encapsulation() == Encapsulation::rocev1);
  CHECK(f->icrc_ok());
  CHECK(emit(RoceFrameRepr::parse(*f)) == bytes);
}

TEST_CASE("a flipped bit anywhere the ICRC covers fails it", "[wire][roce][icrc]") {
  const auto good = emit(send_only());
  // Variant fields are masked out of the ICRC (IPv4 TOS, TTL, checksum; UDP checksum; BTH
  // byte 4): flipping those must keep it valid.
  const std::size_t variant[] = {kIp + 1, kIp + 8, kIp + 10, kIp + 11, kUdp + 6, kUdp + 7, kBth + 4};
  for (std::size_t i = kIp; i < good.size() - kIcrcLength; ++i) {
    auto bad = good;
    bad[i] ^= 0x01;
    const auto f = RoceFrame::check(bad);
    if (!f) continue;  // a length or version byte: refused before the ICRC
    const bool masked = std::find(std::begin(variant), std::end(variant), i) != std::end(variant);
    INFO("byte " << i);
    CHECK(f->icrc_ok() == masked);
  }
}

TEST_CASE("bad input gets a named error", "[wire][roce][errors]") {
  const auto good = emit(send_only());

  SECTION("every truncation is refused") {
    for (std::size_t n = 0; n < good.size(); ++n) {
      const auto f = RoceFrame::check({good.data(), n});
      CHECK_FALSE(f.ok());
    }
    CHECK(error_of({good.begin(), good.begin() + kIp + 10}) == Error::truncated);
    CHECK(error_of({good.begin(), good.end() - 1}) == Error::truncated);
  }
  SECTION("IP version") {
    auto b = good;
    b[kIp] = 0x55;
    CHECK(error_of(b) == Error::bad_version);
  }
  SECTION("IPv4 header length below 5 words") {
    auto b = good;
    b[kIp] = 0x44;
    CHECK(error_of(b) == Error::bad_header_length);
  }
  SECTION("IPv4 fragment") {
    auto b = good;
    b[kIp + 6] |= 0x20;  // more fragments
    CHECK(error_of(b) == Error::fragmented);
  }
  SECTION("not UDP port 4791") {
    auto b = good;
    b[kUdp + 3] ^= 1;
    CHECK(error_of(b) == Error::not_roce);
  }
  SECTION("UDP length shorter than its header") {
    auto b = good;
    b[kUdp + 4] = 0;
    b[kUdp + 5] = 4;
    CHECK(error_of(b) == Error::bad_length);
  }
  SECTION("BTH transport header version") {
    auto b = good;
    b[kBth + 1] |= 0x01;
    CHECK(error_of(b) == Error::bad_version);
  }
  SECTION("reserved and vendor opcodes") {
    for (int op : {0x15, 0x18, 0x1F, 0x2C, 0x60, 0x80, 0x82, 0xB5, 0xC0, 0xFF}) {
      auto b = good;
      b[kBth] = static_cast<std::uint8_t>(op);
      INFO("opcode " << op);
      CHECK(error_of(b) == Error::unknown_opcode);
    }
  }
  SECTION("pad count larger than the payload") {
    RoceFrameRepr r = send_only();
    r.ib.payload = {};
    auto b = emit(r);
    b[kBth + 1] |= 0x10;  // pad count 1 with no payload
    CHECK(error_of(b) == Error::bad_pad_count);
  }
  SECTION("payload on an opcode that has none, or not a multiple of 4") {
    RoceFrameRepr ack = send_only();
    ack.ib.opcode = opcode(Transport::rc, Operation::ack);
    ack.ib.payload = {};
    auto b = emit(ack);
    b.insert(b.end() - kIcrcLength, {0, 0, 0, 0});
    b[kIp + 3] += 4;   // IPv4 total length
    b[kUdp + 5] += 4;  // UDP length
    CHECK(error_of(b) == Error::bad_length);

    auto odd = good;
    odd.insert(odd.end() - kIcrcLength, std::uint8_t{0});
    odd[kIp + 3] += 1;
    odd[kUdp + 5] += 1;
    CHECK(error_of(odd) == Error::bad_length);
  }
  SECTION("payload larger than the largest path MTU") {
    static const std::vector<std::uint8_t> big(4100, 0x42);
    RoceFrameRepr r = send_only();
    r.ib.payload = big;
    CHECK(error_of(emit(r)) == Error::oversized);
  }
}
