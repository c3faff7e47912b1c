// Solving for the IPv4 Identification from the ICRC (wire/icrc_ipv4_id.hpp): on Linux rxe's
// packets with their ID forgotten, on built frames of every length class with random IDs,
// and against corrupted packets, which must not be explained by an ID.
#include "wire/icrc_ipv4_id.hpp"

#include <catch2/catch.hpp>
#include <random>
#include <string>
#include <vector>

#include "tests/wire/data_frames.hpp"
#include "wire/inet_checksum.hpp"
#include "wire/ipv4.hpp"

using namespace wire;
using test::read_frames;

namespace {

// Overwrites the frame's IPv4 ID as a UDP receiver must guess it, keeping the header checksum
// right so the frame still checks (the ICRC masks that checksum anyway).
void set_ipv4_id(std::vector<std::uint8_t>& frame, std::uint16_t id) {
  std::uint8_t* ip = frame.data() + Ethernet::length;
  Ipv4::identification::set(ip, id);
  Ipv4::checksum::set(ip, 0);
  Ipv4::checksum::set(ip, inet_checksum({ip, Ipv4::min_length}));
}

std::uint16_t ipv4_id_of(const std::vector<std::uint8_t>& frame) {
  return Ipv4::identification::get(frame.data() + Ethernet::length);
}

std::vector<std::uint8_t> send_frame(std::uint16_t id, const std::vector<std::uint8_t>& payload) {
  RoceFrameRepr r;
  Ipv4Repr ip;
  ip.src = {10, 99, 0, 2};
  ip.dst = {10, 99, 0, 1};
  ip.identification = id;
  r.network = ip;
  r.src_port = 0xC123;
  r.ib.opcode = opcode(Transport::rc, Operation::send_only);
  r.ib.dest_qp = 0x11;
  r.ib.psn = 0x123456;
  r.ib.payload = payload;
  std::vector<std::uint8_t> b(r.buffer_len());
  REQUIRE(r.emit(b.data()) == b.size());
  return b;
}

}  // namespace

TEST_CASE("rxe packets with their IPv4 ID forgotten: the solved ID is the one rxe sent", "[wire][icrc][golden]") {
  std::size_t nonzero_ids = 0;
  for (const char* name : {"rxe-rdmaops.pcap", "rxe-atomic-cas.pcap", "rxe-ud-pingpong.pcap"}) {
    INFO(name);
    for (auto bytes : read_frames(name)) {
      const std::uint16_t sent = ipv4_id_of(bytes);
      nonzero_ids += sent != 0;
      for (std::uint16_t guess : {std::uint16_t{0}, std::uint16_t{0xFFFF}}) {
        INFO("rxe ID " << sent << ", guessed " << guess);
        set_ipv4_id(bytes, guess);
        const auto frame = RoceFrame::check(bytes);
        REQUIRE(frame.ok());
        CHECK(frame->icrc_ok() == (sent == guess));
        CHECK(solve_ipv4_identification(*frame) == sent);
      }
    }
  }
  CHECK(nonzero_ids > 10);  // the captures do exercise the solver
}

TEST_CASE("built frames of many lengths and random IDs: the solver finds each ID", "[wire][icrc]") {
  std::mt19937 rng(8);
  for (std::size_t len : {0u, 1u, 3u, 4u, 100u, 1020u, 1024u, 4095u, 4096u}) {
    std::vector<std::uint8_t> payload(len);
    for (auto& b : payload) b = static_cast<std::uint8_t>(rng());
    for (int i = 0; i < 20; ++i) {
      const auto id = static_cast<std::uint16_t>(rng());
      auto bytes = send_frame(id, payload);
      set_ipv4_id(bytes, 0);
      const auto frame = RoceFrame::check(bytes);
      REQUIRE(frame.ok());
      INFO("payload " << len << " ID " << id);
      CHECK(solve_ipv4_identification(*frame) == id);
    }
  }
}

TEST_CASE("an ICRC that matches needs no correction", "[wire][icrc]") {
  CHECK(ipv4_identification_correction(0, 0) == std::uint16_t{0});
  CHECK(ipv4_identification_correction(0, 70000) == std::uint16_t{0});
  const auto bytes = send_frame(4242, {1, 2, 3, 4});
  const auto frame = RoceFrame::check(bytes);
  REQUIRE(frame.ok());
  CHECK(solve_ipv4_identification(*frame) == 4242);
}

TEST_CASE("corrupted packets are not explained by any IPv4 ID", "[wire][icrc]") {
  // A flip of payload bits changes the ICRC by a value that is, for all but 1 in 2^16 of
  // them, outside the space the 16 ID bits reach. Deterministic inputs, so no flakiness.
  std::mt19937 rng(88);
  std::vector<std::uint8_t> payload(1024);
  for (auto& b : payload) b = static_cast<std::uint8_t>(rng());
  const auto clean = send_frame(17430, payload);
  const std::size_t payload_at = clean.size() - kIcrcLength - payload.size();
  std::size_t explained = 0;
  for (int i = 0; i < 2000; ++i) {
    auto bytes = clean;
    set_ipv4_id(bytes, 0);
    bytes[payload_at + rng() % payload.size()] ^= static_cast<std::uint8_t>(1u << (rng() % 8));
    if (i % 2) bytes[payload_at + rng() % payload.size()] ^= static_cast<std::uint8_t>(rng() | 1);
    const auto frame = RoceFrame::check(bytes);
    REQUIRE(frame.ok());
    explained += solve_ipv4_identification(*frame).has_value();
  }
  CHECK(explained == 0);
  // The ICRC bytes themselves damaged: likewise.
  auto bytes = clean;
  bytes[bytes.size() - 1] ^= 0x01;
  const auto frame = RoceFrame::check(bytes);
  REQUIRE(frame.ok());
  CHECK_FALSE(solve_ipv4_identification(*frame).has_value());
}

TEST_CASE("RoCEv2 over IPv6 has no ID to solve for", "[wire][icrc]") {
  RoceFrameRepr r;
  r.network = Ipv6Repr{};
  r.ib.opcode = opcode(Transport::rc, Operation::send_only);
  std::vector<std::uint8_t> b(r.buffer_len());
  REQUIRE(r.emit(b.data()) == b.size());
  const auto frame = RoceFrame::check(b);
  REQUIRE(frame.ok());
  CHECK_FALSE(solve_ipv4_identification(*frame).has_value());
}

TEST_CASE("the ICRC shift of an ID change: rxe's ICRCs from ours computed with ID 0", "[wire][icrc][golden]") {
  // What a GSO sender does for segment k (ICRC for ID 0, XOR syndrome(k)), checked against
  // the ICRCs rxe computed with its real IDs.
  std::size_t checked = 0;
  for (auto bytes : read_frames("rxe-rdmaops.pcap")) {
    const std::uint16_t sent = ipv4_id_of(bytes);
    const auto as_sent = RoceFrame::check(bytes);
    REQUIRE(as_sent.ok());
    const std::uint32_t rxe_icrc = as_sent->ib().icrc();
    const std::size_t trailing =
        kIpv4BytesAfterIdentification + as_sent->udp_header().size() + as_sent->ib().covered().size();
    set_ipv4_id(bytes, 0);
    const auto with_zero = RoceFrame::check(bytes);
    REQUIRE(with_zero.ok());
    INFO("rxe ID " << sent);
    CHECK((with_zero->computed_icrc() ^ Ipv4IdentificationShift(trailing).syndrome(sent)) == rxe_icrc);
    checked += sent != 0;
  }
  CHECK(checked > 10);
}

TEST_CASE("the ICRC shift and the solver are inverses for every ID bit and GSO segment number", "[wire][icrc]") {
  for (std::size_t len : {0u, 4u, 1024u, 4096u}) {
    const std::vector<std::uint8_t> payload(len, 0x5A);
    const auto zero_bytes = send_frame(0, payload);
    const auto zero = RoceFrame::check(zero_bytes);
    REQUIRE(zero.ok());
    const std::size_t trailing =
        kIpv4BytesAfterIdentification + zero->udp_header().size() + zero->ib().covered().size();
    const Ipv4IdentificationShift shift(trailing);
    std::vector<std::uint16_t> ids;
    for (int b = 0; b < 16; ++b) ids.push_back(static_cast<std::uint16_t>(1u << b));
    for (std::uint16_t k = 0; k < 64; ++k) ids.push_back(k);
    for (const std::uint16_t id : ids) {
      const auto bytes = send_frame(id, payload);
      const auto frame = RoceFrame::check(bytes);
      REQUIRE(frame.ok());
      INFO("payload " << len << " ID " << id);
      CHECK((zero->ib().icrc() ^ shift.syndrome(id)) == frame->ib().icrc());
      CHECK(ipv4_identification_correction(shift.syndrome(id), trailing) == id);
    }
  }
}
