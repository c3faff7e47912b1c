#include "wire/arp.hpp"

#include <array>
#include <catch2/catch.hpp>

using namespace wire;

TEST_CASE("ARP request round-trips and refuses other hardware/protocol pairs", "[wire][arp]") {
  ArpRepr r;
  r.operation = Arp::request;
  r.sender_mac = {0x02, 0, 0, 0, 0, 0x01};
  r.sender_ip = {127, 0, 0, 1};
  r.target_ip = {127, 0, 0, 2};
  std::array<std::uint8_t, Arp::length> b;
  b.fill(0xA5);
  r.emit(b.data());
  // RFC 826 layout: htype 1, ptype 0x0800, hlen 6, plen 4, op 1.
  CHECK(b[0] == 0);
  CHECK(b[1] == 1);
  CHECK(b[2] == 0x08);
  CHECK(b[3] == 0x00);
  CHECK(b[4] == 6);
  CHECK(b[5] == 4);
  CHECK(b[7] == 1);
  CHECK(b[24] == 127);
  CHECK(b[27] == 2);
  const auto back = ArpRepr::parse(b);
  REQUIRE(back.ok());
  CHECK(*back == r);

  CHECK(ArpRepr::parse(std::span<const std::uint8_t>(b).first(27)).error() == Error::truncated);
  auto other = b;
  other[1] = 6;  // IEEE 802 hardware type
  CHECK(ArpRepr::parse(other).error() == Error::bad_version);
}
