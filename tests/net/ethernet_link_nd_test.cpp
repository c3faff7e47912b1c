// EthernetLink serving an IPv6 address: neighbour discovery (RFC 4861) and RoCEv2 over IPv6.
// ND frames are built here byte by byte, and their ICMPv6 checksums computed by this file's own
// sum (not wire/inet_checksum.hpp), so a wrong checksum in the link cannot agree with itself.
#include <catch2/catch.hpp>
#include <cstdint>
#include <optional>
#include <vector>

#include "emulator/net/ethernet_link.hpp"
#include "emulator/net/roce_encapsulation.hpp"
#include "emulator/net/udp_gid.hpp"
#include "wire/udp.hpp"

using namespace softrdma;

namespace {

using Bytes = std::vector<std::uint8_t>;

const wire::MacAddress kOurMac{0x02, 0x00, 0x00, 0x00, 0x00, 0x01};
const wire::MacAddress kPeerMac{0x02, 0x00, 0x00, 0x00, 0x00, 0x02};
const wire::MacAddress kOtherMac{0x02, 0x00, 0x00, 0x00, 0x00, 0x03};
const core::Gid kOurIp{0xfd, 0x77, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};    // fd77:1::1
const core::Gid kPeerIp{0xfd, 0x77, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2};   // fd77:1::2
const core::Gid kOtherIp{0xfd, 0x77, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 9};  // fd77:1::9
const core::Gid kUnspecified{};
// Solicited-node groups (ff02::1:ffXX:XXXX, RFC 4291 s2.7.1) and their MACs (33:33 + the
// group's low 32 bits, RFC 2464 s7), written out by hand.
const core::Gid kOurGroup{0xff, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0xff, 0, 0, 1};
const core::Gid kPeerGroup{0xff, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0xff, 0, 0, 2};
const core::Gid kOtherGroup{0xff, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0xff, 0, 0, 9};
const core::Gid kAllNodes{0xff, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
const wire::MacAddress kOurGroupMac{0x33, 0x33, 0xff, 0, 0, 1};
const wire::MacAddress kPeerGroupMac{0x33, 0x33, 0xff, 0, 0, 2};
const wire::MacAddress kOtherGroupMac{0x33, 0x33, 0xff, 0, 0, 9};
const wire::MacAddress kAllNodesMac{0x33, 0x33, 0, 0, 0, 1};

constexpr std::uint8_t kNs = 135, kNa = 136, kIcmpv6 = 58;
constexpr std::uint8_t kSolicitedOverride = 0x60, kOverride = 0x20, kSolicited = 0x40;
constexpr std::size_t kIcmpOffset = 14 + 40;

void put(Bytes& out, const auto& bytes) { out.insert(out.end(), bytes.begin(), bytes.end()); }

// The Internet checksum of RFC 1071, written out again: 16-bit big-endian words, carries
// folded back, complemented.
std::uint16_t reference_sum(const Bytes& bytes) {
  std::uint32_t sum = 0;
  for (std::size_t i = 0; i < bytes.size(); i += 2)
    sum += static_cast<std::uint32_t>(bytes[i] << 8) | (i + 1 < bytes.size() ? bytes[i + 1] : 0u);
  while (sum > 0xffff) sum = (sum & 0xffff) + (sum >> 16);
  return static_cast<std::uint16_t>(~sum & 0xffff);
}

// The ICMPv6 checksum over RFC 8200 s8.1's pseudo-header laid out as bytes: source,
// destination, 32-bit length, three zero bytes and the next header.
std::uint16_t reference_icmpv6_sum(const core::Gid& src, const core::Gid& dst, const Bytes& message) {
  Bytes pseudo;
  put(pseudo, src);
  put(pseudo, dst);
  const auto n = static_cast<std::uint32_t>(message.size());
  put(pseudo, Bytes{static_cast<std::uint8_t>(n >> 24), static_cast<std::uint8_t>(n >> 16),
                    static_cast<std::uint8_t>(n >> 8), static_cast<std::uint8_t>(n), 0, 0, 0, kIcmpv6});
  put(pseudo, message);
  return reference_sum(pseudo);
}

// An ICMPv6 NS or NA: type, code, checksum 0, flags (NA) or reserved, target, and a
// link-layer address option (1 = source, 2 = target) when `option_mac` is given.
Bytes nd_message(std::uint8_t type, std::uint8_t flags, const core::Gid& target,
                 std::optional<wire::MacAddress> option_mac = std::nullopt) {
  Bytes m{type, 0, 0, 0, flags, 0, 0, 0};
  put(m, target);
  if (option_mac) {
    put(m, Bytes{static_cast<std::uint8_t>(type == kNs ? 1 : 2), 1});
    put(m, *option_mac);
  }
  return m;
}

// `payload` in an IPv6 packet in an Ethernet frame; for ICMPv6, the checksum is filled in
// unless `seal` is false.
Bytes ipv6_frame(const wire::MacAddress& dst_mac, const wire::MacAddress& src_mac, const core::Gid& src,
                 const core::Gid& dst, std::uint8_t hop_limit, std::uint8_t next_header, Bytes payload,
                 bool seal = true) {
  if (next_header == kIcmpv6 && seal && payload.size() >= 4) {
    const std::uint16_t sum = reference_icmpv6_sum(src, dst, payload);
    payload[2] = static_cast<std::uint8_t>(sum >> 8);
    payload[3] = static_cast<std::uint8_t>(sum);
  }
  Bytes f;
  put(f, dst_mac);
  put(f, src_mac);
  put(f, Bytes{0x86, 0xdd, 0x60, 0, 0, 0, static_cast<std::uint8_t>(payload.size() >> 8),
               static_cast<std::uint8_t>(payload.size()), next_header, hop_limit});
  put(f, src);
  put(f, dst);
  put(f, payload);
  return f;
}

Bytes icmpv6_frame(const wire::MacAddress& dst_mac, const wire::MacAddress& src_mac, const core::Gid& src,
                   const core::Gid& dst, Bytes message) {
  return ipv6_frame(dst_mac, src_mac, src, dst, 255, kIcmpv6, std::move(message));
}

// A RoCEv2-over-IPv6 frame from the peer to `dst` (its payload does not matter to the link).
Bytes roce_frame(const wire::MacAddress& dst_mac, const core::Gid& dst, const Bytes& payload,
                 const core::Gid& src = kPeerIp) {
  const wire::EthernetRepr eth{dst_mac, kPeerMac, -1};
  core::Endpoints route;
  route.src = src;
  route.dst = dst;
  route.src_port = 0xC123;
  const std::size_t headers = net::roce_headers_length(eth, route);
  Bytes f(headers + payload.size());
  net::write_roce_headers(eth, route, wire::kRoceV2Port, payload, f.data());
  std::copy(payload.begin(), payload.end(), f.begin() + static_cast<std::ptrdiff_t>(headers));
  return f;
}

core::TxPacket packet_to(const core::Gid& dst, std::uint8_t tag) {
  core::TxPacket p;
  p.route.src = kOurIp;
  p.route.dst = dst;
  p.bytes = {tag, 1, 2, 3};
  return p;
}

const Bytes kPayload(40, 0xab);

}  // namespace

TEST_CASE("a Neighbor Solicitation for our address gets exactly this advertisement (RFC 4861 s7.2.4)",
          "[ethernet_link]") {
  net::EthernetLink link(kOurMac, kOurIp);
  CHECK_FALSE(
      link.receive(icmpv6_frame(kOurGroupMac, kPeerMac, kPeerIp, kOurGroup, nd_message(kNs, 0, kOurIp, kPeerMac))));
  const auto frames = link.take_frames();
  REQUIRE(frames.size() == 1);
  // To the solicitor's MAC and address, from ours, hop limit 255, 32 bytes of ICMPv6: NA with
  // Solicited and Override, target our address, our MAC as Target Link-Layer Address.
  CHECK(frames[0] ==
        icmpv6_frame(kPeerMac, kOurMac, kOurIp, kPeerIp, nd_message(kNa, kSolicitedOverride, kOurIp, kOurMac)));
  // And its checksum adds up when summed over the frame as sent.
  CHECK(reference_icmpv6_sum(kOurIp, kPeerIp, Bytes(frames[0].begin() + kIcmpOffset, frames[0].end())) == 0);
  CHECK(link.counters().rx_nd == 1);
  CHECK(link.counters().nd_advertisements_sent == 1);
  // The Source Link-Layer Address option taught us the solicitor (s7.2.3).
  CHECK(link.route(packet_to(kPeerIp, 1), 0) == kPeerMac);
  CHECK(link.take_frames().empty());
}

TEST_CASE("a unicast solicitation without an option is answered to the frame's sender, DAD to all nodes",
          "[ethernet_link]") {
  net::EthernetLink link(kOurMac, kOurIp);
  link.receive(icmpv6_frame(kOurMac, kPeerMac, kPeerIp, kOurIp, nd_message(kNs, 0, kOurIp)));
  auto frames = link.take_frames();
  REQUIRE(frames.size() == 1);
  CHECK(Bytes(frames[0].begin(), frames[0].begin() + 6) == Bytes(kPeerMac.begin(), kPeerMac.end()));
  CHECK(Bytes(frames[0].begin() + 38, frames[0].begin() + 54) == Bytes(kPeerIp.begin(), kPeerIp.end()));
  CHECK(frames[0][kIcmpOffset + 4] == kSolicitedOverride);
  CHECK_FALSE(link.route(packet_to(kPeerIp, 1), 0));  // no option: nothing learnt

  // Duplicate address detection (source ::, s7.2.4): the answer goes to ff02::1, not solicited.
  link.take_frames();
  link.receive(icmpv6_frame(kOurGroupMac, kPeerMac, kUnspecified, kOurGroup, nd_message(kNs, 0, kOurIp)));
  frames = link.take_frames();
  REQUIRE(frames.size() == 1);
  CHECK(Bytes(frames[0].begin(), frames[0].begin() + 6) == Bytes(kAllNodesMac.begin(), kAllNodesMac.end()));
  CHECK(Bytes(frames[0].begin() + 38, frames[0].begin() + 54) == Bytes(kAllNodes.begin(), kAllNodes.end()));
  CHECK(frames[0][kIcmpOffset] == kNa);
  CHECK(frames[0][kIcmpOffset + 4] == kOverride);
  CHECK(reference_icmpv6_sum(kOurIp, kAllNodes, Bytes(frames[0].begin() + kIcmpOffset, frames[0].end())) == 0);
  CHECK(link.counters().nd_advertisements_sent == 2);
  CHECK(link.counters().rx_malformed == 0);
}

TEST_CASE("a solicitation for another address is neither answered nor learnt from", "[ethernet_link]") {
  net::EthernetLink link(kOurMac, kOurIp);
  // To us, valid, but for another target (s7.2.3: discarded).
  link.receive(icmpv6_frame(kOurMac, kPeerMac, kPeerIp, kOurIp, nd_message(kNs, 0, kOtherIp, kPeerMac)));
  // To another node's solicited-node group: not even ours to look at.
  link.receive(icmpv6_frame(kOtherGroupMac, kPeerMac, kPeerIp, kOtherGroup, nd_message(kNs, 0, kOtherIp, kPeerMac)));
  CHECK(link.take_frames().empty());
  CHECK(link.counters().rx_nd == 1);
  CHECK(link.counters().rx_not_ours == 1);
  CHECK_FALSE(link.route(packet_to(kPeerIp, 1), 0));  // still unknown: a solicitation goes out
  CHECK(link.counters().nd_solicitations_sent == 1);
}

TEST_CASE("ND that fails RFC 4861 s7.1's checks is malformed and unanswered", "[ethernet_link]") {
  net::EthernetLink link(kOurMac, kOurIp);
  const Bytes ns = nd_message(kNs, 0, kOurIp, kPeerMac);
  const Bytes good = icmpv6_frame(kOurGroupMac, kPeerMac, kPeerIp, kOurGroup, ns);
  std::vector<Bytes> bad;
  bad.push_back(ipv6_frame(kOurGroupMac, kPeerMac, kPeerIp, kOurGroup, 64, kIcmpv6, ns));  // hop limit not 255
  Bytes bad_sum = good;
  bad_sum[kIcmpOffset + 3] ^= 0x01;
  bad.push_back(bad_sum);
  Bytes code = ns;
  code[1] = 1;
  bad.push_back(icmpv6_frame(kOurGroupMac, kPeerMac, kPeerIp, kOurGroup, code));
  bad.push_back(icmpv6_frame(kOurGroupMac, kPeerMac, kPeerIp, kOurGroup, Bytes(ns.begin(), ns.begin() + 20)));  // < 24
  bad.push_back(
      icmpv6_frame(kOurGroupMac, kPeerMac, kPeerIp, kOurGroup, nd_message(kNs, 0, kAllNodes)));  // multicast target
  Bytes zero_option = ns;
  zero_option[25] = 0;  // the option's length
  bad.push_back(icmpv6_frame(kOurGroupMac, kPeerMac, kPeerIp, kOurGroup, zero_option));
  // DAD with a source link-layer address; an NA marked solicited sent to all nodes.
  bad.push_back(icmpv6_frame(kOurGroupMac, kPeerMac, kUnspecified, kOurGroup, ns));
  bad.push_back(
      icmpv6_frame(kAllNodesMac, kPeerMac, kPeerIp, kAllNodes, nd_message(kNa, kSolicitedOverride, kPeerIp, kPeerMac)));
  Bytes short_ip = good;
  short_ip[19] = 200;  // an IPv6 payload length beyond the frame
  bad.push_back(short_ip);
  for (const Bytes& f : bad) CHECK_FALSE(link.receive(f));
  CHECK(link.counters().rx_malformed == bad.size());
  CHECK(link.counters().rx_nd == 0);
  CHECK(link.take_frames().empty());
  link.receive(good);  // and the good one is answered
  CHECK(link.take_frames().size() == 1);
}

TEST_CASE("a packet to an unknown IPv6 neighbour sends this solicitation to its solicited-node group",
          "[ethernet_link]") {
  net::EthernetLink link(kOurMac, kOurIp);
  CHECK_FALSE(link.route(packet_to(kPeerIp, 1), 1000));
  const auto frames = link.take_frames();
  REQUIRE(frames.size() == 1);
  CHECK(frames[0] == icmpv6_frame(kPeerGroupMac, kOurMac, kOurIp, kPeerGroup, nd_message(kNs, 0, kPeerIp, kOurMac)));
  CHECK(link.next_deadline() == 1000 + net::EthernetLink::kResolveRetryNs);
  CHECK(link.counters().nd_solicitations_sent == 1);
  CHECK(link.counters().arp_requests_sent == 0);
}

TEST_CASE("an advertisement releases the packets held for its target, in order, with its MAC", "[ethernet_link]") {
  net::EthernetLink link(kOurMac, kOurIp);
  for (std::uint8_t tag = 0; tag < 3; ++tag) CHECK_FALSE(link.route(packet_to(kPeerIp, tag), 0));
  CHECK(link.take_frames().size() == 1);  // one solicitation for the three
  // An advertisement without a Target Link-Layer Address option teaches nothing (s7.2.5), nor
  // one for an address we never asked about.
  link.receive(icmpv6_frame(kOurMac, kPeerMac, kPeerIp, kOurIp, nd_message(kNa, kSolicitedOverride, kPeerIp)));
  link.receive(
      icmpv6_frame(kOurMac, kOtherMac, kOtherIp, kOurIp, nd_message(kNa, kSolicitedOverride, kOtherIp, kOtherMac)));
  CHECK(link.take_released().empty());
  link.receive(
      icmpv6_frame(kOurMac, kPeerMac, kPeerIp, kOurIp, nd_message(kNa, kSolicitedOverride, kPeerIp, kPeerMac)));
  const auto released = link.take_released();
  REQUIRE(released.size() == 3);
  for (std::uint8_t tag = 0; tag < 3; ++tag) {
    CHECK(released[tag].first == kPeerMac);
    CHECK(released[tag].second.bytes[0] == tag);
  }
  CHECK(link.counters().rx_nd == 3);
  CHECK_FALSE(link.next_deadline());
  CHECK_FALSE(link.route(packet_to(kOtherIp, 0), 0));  // the unasked one was not learnt
  // A known neighbour's MAC changes only with Override (s7.2.5); an unsolicited one to all
  // nodes is heard too.
  link.receive(icmpv6_frame(kOurMac, kOtherMac, kPeerIp, kOurIp, nd_message(kNa, kSolicited, kPeerIp, kOtherMac)));
  CHECK(link.route(packet_to(kPeerIp, 0), 0) == kPeerMac);
  link.receive(
      icmpv6_frame(kAllNodesMac, kOtherMac, kPeerIp, kAllNodes, nd_message(kNa, kOverride, kPeerIp, kOtherMac)));
  CHECK(link.route(packet_to(kPeerIp, 0), 0) == kOtherMac);
  CHECK(link.counters().rx_malformed == 0);
}

TEST_CASE("an unanswered IPv6 neighbour is solicited kResolveTries times, then its packets are dropped",
          "[ethernet_link]") {
  net::EthernetLink link(kOurMac, kOurIp);
  std::uint64_t now = 0;
  link.route(packet_to(kPeerIp, 7), now);
  for (int i = 0; i < net::EthernetLink::kResolveTries + 2; ++i) {
    now += net::EthernetLink::kResolveRetryNs;
    link.advance(now);
  }
  CHECK(link.counters().nd_solicitations_sent == static_cast<std::uint64_t>(net::EthernetLink::kResolveTries));
  CHECK(link.take_frames().size() == static_cast<std::size_t>(net::EthernetLink::kResolveTries));
  CHECK(link.counters().tx_unresolved == 1);
  CHECK_FALSE(link.next_deadline());
  CHECK(link.take_released().empty());
  link.route(packet_to(kPeerIp, 8), now);  // the next packet starts over
  CHECK(link.take_frames().size() == 1);
}

TEST_CASE("a RoCEv2-over-IPv6 frame for our MAC and address is handed on with both IPv6 GIDs", "[ethernet_link]") {
  net::EthernetLink link(kOurMac, kOurIp);
  const Bytes f = roce_frame(kOurMac, kOurIp, kPayload);
  const auto p = link.receive(f);
  REQUIRE(p);
  CHECK(Bytes(p->bytes.begin(), p->bytes.end()) == kPayload);
  CHECK(p->src_gid == kPeerIp);
  CHECK(p->dst_gid == kOurIp);
  CHECK(p->src_port == 0xC123);
  CHECK(p->ipv4_id == 0);
  CHECK(link.counters().rx_roce == 1);
}

TEST_CASE("an IPv6 link drops other addresses, zero UDP checksums, IPv4 and the kernel's own IPv6", "[ethernet_link]") {
  net::EthernetLink link(kOurMac, kOurIp);
  CHECK_FALSE(link.receive(roce_frame(kOurMac, kOtherIp, kPayload)));  // another IPv6 address
  CHECK_FALSE(link.receive(roce_frame(kPeerMac, kOurIp, kPayload)));   // another MAC
  // RoCEv2 over IPv4 to our MAC, and ARP: the other family.
  const wire::EthernetRepr eth{kOurMac, kPeerMac, -1};
  core::Endpoints v4;
  v4.src = net::gid_of(wire::Ipv4Address{10, 77, 1, 2});
  v4.dst = net::gid_of(wire::Ipv4Address{10, 77, 1, 1});
  Bytes ipv4(net::roce_headers_length(eth, v4) + kPayload.size());
  net::write_roce_headers(eth, v4, wire::kRoceV2Port, kPayload, ipv4.data());
  CHECK_FALSE(link.receive(ipv4));
  Bytes arp(60);
  wire::EthernetRepr{{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, kPeerMac, -1}.emit(arp.data(), wire::ethertype::arp);
  CHECK_FALSE(link.receive(arp));
  // What the kernel sends on the port from its link-local address: a router solicitation to
  // ff02::2, an MLDv2 report to ff02::16 (behind a hop-by-hop header), and an echo request to
  // us; a router advertisement to all nodes.
  const core::Gid link_local{0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 7};
  const core::Gid all_routers{0xff, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2};
  const core::Gid mld_routers{0xff, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x16};
  CHECK_FALSE(link.receive(
      icmpv6_frame({0x33, 0x33, 0, 0, 0, 2}, kPeerMac, link_local, all_routers, Bytes{133, 0, 0, 0, 0, 0, 0, 0})));
  CHECK_FALSE(link.receive(ipv6_frame({0x33, 0x33, 0, 0, 0, 0x16}, kPeerMac, link_local, mld_routers, 1, 0,
                                      Bytes{58, 0, 5, 2, 0, 0, 1, 0, 143, 0, 0, 0, 0, 0, 0, 0})));
  CHECK_FALSE(link.receive(icmpv6_frame(kOurMac, kPeerMac, kPeerIp, kOurIp, Bytes{128, 0, 0, 0, 0, 1, 0, 1})));
  Bytes router_advertisement(16, 0);
  router_advertisement[0] = 134;
  CHECK_FALSE(link.receive(icmpv6_frame(kAllNodesMac, kPeerMac, link_local, kAllNodes, router_advertisement)));
  CHECK(link.counters().rx_not_ours == 8);
  // A zero UDP checksum is refused over IPv6 (RFC 8200 s8.1).
  Bytes no_sum = roce_frame(kOurMac, kOurIp, kPayload);
  wire::Udp::checksum::set(no_sum.data() + 14 + 40, 0);
  CHECK_FALSE(link.receive(no_sum));
  CHECK(link.counters().rx_malformed == 1);
  CHECK(link.counters().rx_roce == 0);
  CHECK(link.counters().rx_nd == 0);
}

TEST_CASE("RoCEv2 over IPv6 from a multicast source or :: is malformed (RFC 4291 s2.7, s2.5.2)", "[ethernet_link]") {
  net::EthernetLink link(kOurMac, kOurIp);
  CHECK_FALSE(link.receive(roce_frame(kOurMac, kOurIp, kPayload, kAllNodes)));
  CHECK_FALSE(link.receive(roce_frame(kOurMac, kOurIp, kPayload, kUnspecified)));
  CHECK(link.counters().rx_malformed == 2);
  CHECK(link.counters().rx_roce == 0);
  CHECK(link.receive(roce_frame(kOurMac, kOurIp, kPayload)));  // the same from the peer passes
}

TEST_CASE("an IPv6 link refuses packets to IPv4-mapped GIDs and sends multicast to the group's MAC",
          "[ethernet_link]") {
  net::EthernetLink link(kOurMac, kOurIp);
  CHECK_FALSE(link.route(packet_to(net::gid_of(wire::Ipv4Address{10, 77, 1, 2}), 0), 0));
  CHECK(link.counters().tx_wrong_family == 1);
  // RFC 2464 s7: ff0e::1:2:3:4 goes to 33:33:00:03:00:04, unasked.
  const core::Gid group{0xff, 0x0e, 0, 0, 0, 0, 0, 0, 0, 1, 0, 2, 0, 3, 0, 4};
  CHECK(link.route(packet_to(group, 0), 0) == wire::MacAddress{0x33, 0x33, 0, 3, 0, 4});
  CHECK(link.take_frames().empty());
  CHECK(link.counters().tx_held == 0);
}
