#include "wire/icmpv6.hpp"

#include <catch2/catch.hpp>
#include <vector>

using namespace wire;

namespace {

// fd77:1::1 and fd77:1::2
constexpr Ipv6Address kA{0xfd, 0x77, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
constexpr Ipv6Address kB{0xfd, 0x77, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2};

// An IPv6 packet around `message` (hop limit 255, next header 58).
std::vector<std::uint8_t> packet(const Ipv6Address& src, const Ipv6Address& dst,
                                 const std::vector<std::uint8_t>& message, std::uint8_t hop_limit = 255) {
  std::vector<std::uint8_t> p(Ipv6::length + message.size());
  Ipv6Repr ip;
  ip.src = src;
  ip.dst = dst;
  ip.next_header = ip_proto::icmpv6;
  ip.hop_limit = hop_limit;
  ip.emit(p.data(), message.size());
  std::copy(message.begin(), message.end(), p.begin() + Ipv6::length);
  return p;
}

}  // namespace

TEST_CASE("solicited-node groups and their MACs follow RFC 4291 s2.7.1 and RFC 2464 s7", "[wire][icmpv6]") {
  // RFC 4291 s2.7.1's example: 4037::01:800:200E:8C6C belongs to FF02::1:FF0E:8C6C.
  constexpr Ipv6Address a{0x40, 0x37, 0, 0, 0, 0, 0, 0, 0, 0x01, 0x08, 0x00, 0x20, 0x0e, 0x8c, 0x6c};
  constexpr Ipv6Address group{0xff, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x01, 0xff, 0x0e, 0x8c, 0x6c};
  STATIC_REQUIRE(solicited_node(a) == group);
  STATIC_REQUIRE(multicast_mac(group) == MacAddress{0x33, 0x33, 0xff, 0x0e, 0x8c, 0x6c});
  STATIC_REQUIRE(multicast_mac(kAllNodes) == MacAddress{0x33, 0x33, 0, 0, 0, 1});
  STATIC_REQUIRE(is_multicast(group));
  STATIC_REQUIRE(!is_multicast(a));
  STATIC_REQUIRE(is_unspecified(Ipv6Address{}));
}

TEST_CASE("a Neighbor Advertisement round-trips with its flags, target and option (RFC 4861 s4.4)", "[wire][icmpv6]") {
  NdRepr na;
  na.type = icmpv6_type::neighbor_advertisement;
  na.solicited = true;
  na.override_flag = true;
  na.target = kA;
  na.link_layer = MacAddress{0x02, 0, 0, 0, 0, 1};
  std::vector<std::uint8_t> m(na.buffer_len(), 0xa5);
  REQUIRE(m.size() == 32);
  na.emit(kA, kB, m.data());
  CHECK(m[0] == 136);
  CHECK(m[1] == 0);
  CHECK(m[4] == 0x60);  // S and O; R clear
  CHECK(m[5] == 0);
  CHECK(m[24] == 2);  // Target Link-Layer Address, one 8-byte unit
  CHECK(m[25] == 1);
  CHECK(m[31] == 1);
  CHECK(icmpv6_checksum(kA, kB, m) == 0);
  const std::vector<std::uint8_t> p = packet(kA, kB, m);
  const auto back = NdRepr::parse(*Ipv6View::check(p));
  REQUIRE(back.ok());
  CHECK(*back == na);
}

TEST_CASE("NdRepr::parse refuses what RFC 4861 s7.1 calls invalid, and skips unknown options", "[wire][icmpv6]") {
  NdRepr ns;
  ns.target = kB;
  ns.link_layer = MacAddress{0x02, 0, 0, 0, 0, 1};
  const Ipv6Address group = solicited_node(kB);
  std::vector<std::uint8_t> m(ns.buffer_len());
  ns.emit(kA, group, m.data());
  const auto parse = [](const std::vector<std::uint8_t>& p) { return NdRepr::parse(*Ipv6View::check(p)); };
  REQUIRE(parse(packet(kA, group, m)).ok());

  CHECK(parse(packet(kA, group, m, 64)).error() == Error::invalid_field);
  std::vector<std::uint8_t> bad = m;
  bad[2] ^= 0x80;
  CHECK(parse(packet(kA, group, bad)).error() == Error::bad_checksum);
  CHECK(parse(packet(kB, group, m)).error() == Error::bad_checksum);  // the pseudo-header counts
  // From a multicast address (RFC 4291 s2.7), with a checksum good for that source.
  std::vector<std::uint8_t> from_group(m.size());
  ns.emit(group, group, from_group.data());
  CHECK(parse(packet(group, group, from_group)).error() == Error::invalid_field);
  // From :: (duplicate address detection) an NS may not carry a source address option.
  const NdRepr probe{icmpv6_type::neighbor_solicitation, false, false, false, kB, std::nullopt};
  std::vector<std::uint8_t> dad(NeighborMessage::length);
  probe.emit({}, group, dad.data());
  CHECK(parse(packet({}, group, dad)).ok());
  std::vector<std::uint8_t> dad_with_option(m.size());
  ns.emit({}, group, dad_with_option.data());
  CHECK(parse(packet({}, group, dad_with_option)).error() == Error::invalid_field);
  probe.emit({}, kB, dad.data());  // and it goes to the target's group, not the target
  CHECK(parse(packet({}, kB, dad)).error() == Error::invalid_field);

  // An unknown option (type 99, one unit) before ours is skipped; a zero-length one is invalid.
  std::vector<std::uint8_t> more(m.begin(), m.begin() + NeighborMessage::length);
  more.insert(more.end(), {99, 1, 0, 0, 0, 0, 0, 0});
  more.insert(more.end(), m.begin() + NeighborMessage::length, m.end());
  more[2] = more[3] = 0;
  Icmpv6::checksum::set(more.data(), icmpv6_checksum(kA, group, more));
  const auto skipped = parse(packet(kA, group, more));
  REQUIRE(skipped.ok());
  CHECK(skipped->link_layer == ns.link_layer);
  more[NeighborMessage::length + 1] = 0;
  more[2] = more[3] = 0;
  Icmpv6::checksum::set(more.data(), icmpv6_checksum(kA, group, more));
  CHECK(parse(packet(kA, group, more)).error() == Error::bad_length);

  // Another ICMPv6 message (an echo request) is not ND.
  std::vector<std::uint8_t> echo{128, 0, 0, 0, 0, 1, 0, 1};
  Icmpv6::checksum::set(echo.data(), icmpv6_checksum(kA, kB, echo));
  CHECK(parse(packet(kA, kB, echo)).error() == Error::unknown_opcode);
}
