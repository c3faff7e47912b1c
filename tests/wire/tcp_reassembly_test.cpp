// TCP reassembly for capture decoding (tools/dump/tcp_reassembly.hpp).
#include "tools/dump/tcp_reassembly.hpp"

#include <catch2/catch.hpp>
#include <string>

#include "wire/tcp.hpp"

using softrdma::dump::TcpDirection;
using softrdma::dump::TcpEndpoint;
using softrdma::dump::TcpReassembler;
using softrdma::dump::TcpSegment;
using softrdma::dump::TcpStreamReassembler;

namespace {

constexpr std::uint8_t kSyn = wire::Tcp::syn, kFin = wire::Tcp::fin, kRst = wire::Tcp::rst;

// One direction, collecting what it delivers.
struct Stream {
  explicit Stream(std::size_t max_held = 1 << 20) : r(max_held) {}
  TcpStreamReassembler r;
  std::string out;
  void add(std::uint32_t seq, const std::string& data, std::uint8_t flags = 0) {
    r.add(seq, flags, {reinterpret_cast<const std::uint8_t*>(data.data()), data.size()},
          [&](std::span<const std::uint8_t> b) { out.append(b.begin(), b.end()); });
  }
};

}  // namespace

TEST_CASE("TCP reassembly: SYN, duplicates and overlaps", "[tools][tcp]") {
  Stream s;
  s.add(100, "", kSyn);  // data starts at 101
  s.add(101, "abc");
  s.add(101, "abc");   // retransmitted
  s.add(102, "bcde");  // overlaps: only "de" is new
  s.add(50, "old");    // long before
  CHECK(s.out == "abcde");
  CHECK(s.r.delivered() == 5);
  CHECK_FALSE(s.r.closed());
}

TEST_CASE("TCP reassembly: a segment after a gap waits for it", "[tools][tcp]") {
  Stream s;
  s.add(1000, "0123");
  s.add(1010, "abc");  // gap 1004..1009
  s.add(1010, "abc");  // held twice: kept once
  CHECK(s.out == "0123");
  CHECK(s.r.held_bytes() == 3);
  s.add(1004, "456789");
  CHECK(s.out == "0123456789abc");
  CHECK(s.r.held_bytes() == 0);

  Stream small(4);  // holds at most 4 bytes behind a gap
  small.add(0, "a");
  small.add(5, "12345");
  CHECK(small.r.refused_bytes() == 5);
  CHECK(small.r.held_bytes() == 0);
  small.add(2, "cd");
  small.add(1, "b");
  CHECK(small.out == "abcd");
}

TEST_CASE("TCP reassembly: FIN in order ends the stream, RST at once", "[tools][tcp]") {
  Stream s;
  s.add(7, "", kSyn);
  s.add(12, "fgh", kFin);  // FIN ahead of a gap: not the end yet
  CHECK_FALSE(s.r.closed());
  s.add(8, "bcde");
  CHECK(s.out == "bcdefgh");
  CHECK(s.r.closed());
  s.add(15, "late");
  CHECK(s.out == "bcdefgh");

  Stream r;
  r.add(1, "ab");
  r.add(10, "held");
  r.add(3, "", kRst);
  CHECK(r.r.closed());
  CHECK(r.r.held_bytes() == 0);
  r.add(3, "cd");
  CHECK(r.out == "ab");
}

TEST_CASE("TCP reassembly: sequence numbers wrap", "[tools][tcp]") {
  Stream s;
  s.add(0xFFFFFFFE, "", kSyn);  // data from 0xFFFFFFFF
  s.add(0x00000002, "de");      // ahead, across the wrap
  s.add(0xFFFFFFFF, "abc");     // 0xFFFFFFFF, 0, 1
  CHECK(s.out == "abcde");
  s.add(0x00000000, "bc");  // old
  CHECK(s.out == "abcde");
}

TEST_CASE("TCP reassembly keys connections by 4-tuple", "[tools][tcp]") {
  TcpEndpoint a, b, c;
  a.address = {10, 0, 0, 1};
  a.port = 1000;
  b.address = {10, 0, 0, 2};
  b.port = 2000;
  c.address = {10, 0, 0, 3};
  c.port = 1000;
  CHECK(softrdma::dump::to_string(a) == "10.0.0.1:1000");
  TcpEndpoint v6;
  v6.address = {0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
  v6.address_length = 16;
  v6.port = 7;
  CHECK(softrdma::dump::to_string(v6) == "[fe80:0:0:0:0:0:0:1]:7");

  TcpReassembler tcp;
  std::string got;
  auto deliver = [&](TcpDirection d, std::span<const std::uint8_t> bytes) {
    got += std::to_string(d.connection) + ":" + std::to_string(d.side) + ":" + std::string(bytes.begin(), bytes.end()) +
           " ";
  };
  const std::string x = "x", y = "y", z = "z";
  auto seg = [](const TcpEndpoint& from, const TcpEndpoint& to, std::uint32_t seq, const std::string& data) {
    return TcpSegment{from, to, seq, 0, {reinterpret_cast<const std::uint8_t*>(data.data()), data.size()}};
  };
  const TcpDirection ab = tcp.add(seg(a, b, 1, x), deliver);
  const TcpDirection ba = tcp.add(seg(b, a, 9, y), deliver);
  const TcpDirection cb = tcp.add(seg(c, b, 5, z), deliver);
  CHECK(got == "0:0:x 0:1:y 1:0:z ");
  CHECK(ab.connection == ba.connection);
  CHECK(ab.side != ba.side);
  CHECK(cb.connection == 1);
  CHECK(tcp.connections() == 2);
  CHECK(tcp.source(ba) == b);
  CHECK(tcp.stream(ab).delivered() == 1);
}
