// EthernetLink, the dpdk backend's ARP and frame sorting (net/ethernet_link.hpp), driven with
// frames built here byte by byte: no port, no clock. An IPv4 link; ethernet_link_nd_test.cpp
// has the IPv6 one.
#include "emulator/net/ethernet_link.hpp"

#include <catch2/catch.hpp>
#include <cstdint>
#include <vector>

#include "emulator/net/roce_encapsulation.hpp"
#include "emulator/net/udp_gid.hpp"
#include "wire/arp.hpp"
#include "wire/ipv4.hpp"
#include "wire/udp.hpp"

using namespace softrdma;

namespace {

const wire::MacAddress kOurMac{0x02, 0x00, 0x00, 0x00, 0x00, 0x01};
const wire::MacAddress kPeerMac{0x02, 0x00, 0x00, 0x00, 0x00, 0x02};
const wire::MacAddress kBroadcast{0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
const wire::Ipv4Address kOurIp{10, 77, 1, 1};
const wire::Ipv4Address kPeerIp{10, 77, 1, 2};

std::vector<std::uint8_t> arp_frame(std::uint16_t op, const wire::MacAddress& dst_mac,
                                    const wire::MacAddress& sender_mac, const wire::Ipv4Address& sender_ip,
                                    const wire::Ipv4Address& target_ip) {
  std::vector<std::uint8_t> f(60);
  wire::EthernetRepr{dst_mac, sender_mac, -1}.emit(f.data(), wire::ethertype::arp);
  wire::ArpRepr{op, sender_mac, sender_ip, op == wire::Arp::reply ? kOurMac : wire::MacAddress{}, target_ip}.emit(
      f.data() + wire::Ethernet::length);
  return f;
}

// A RoCEv2 frame from the peer to `dst_ip` carrying `payload` (its contents do not matter to
// the link), with IPv4 ID `id`.
std::vector<std::uint8_t> roce_frame(const wire::MacAddress& dst_mac, const wire::Ipv4Address& dst_ip, std::uint16_t id,
                                     const std::vector<std::uint8_t>& payload,
                                     const wire::Ipv4Address& src_ip = kPeerIp,
                                     const wire::MacAddress& src_mac = kPeerMac) {
  const wire::EthernetRepr eth{dst_mac, src_mac, -1};
  core::Endpoints route;
  route.src = net::gid_of(src_ip);
  route.dst = net::gid_of(dst_ip);
  route.src_port = 0xC123;
  route.ipv4_id = id;
  const std::size_t headers = net::roce_headers_length(eth, route);
  std::vector<std::uint8_t> f(headers + payload.size());
  net::write_roce_headers(eth, route, wire::kRoceV2Port, payload, f.data());
  std::copy(payload.begin(), payload.end(), f.begin() + static_cast<std::ptrdiff_t>(headers));
  return f;
}

core::TxPacket packet_to(const wire::Ipv4Address& ip, std::uint8_t tag) {
  core::TxPacket p;
  p.route.src = net::gid_of(kOurIp);
  p.route.dst = net::gid_of(ip);
  p.bytes = {tag, 1, 2, 3};
  return p;
}

const std::vector<std::uint8_t> kPayload(40, 0xab);
constexpr std::size_t kIpOffset = wire::Ethernet::length;

}  // namespace

TEST_CASE("a RoCEv2 frame for our MAC and IP is handed on with its addresses, port and IPv4 ID", "[ethernet_link]") {
  net::EthernetLink link(kOurMac, net::gid_of(kOurIp));
  const std::vector<std::uint8_t> f = roce_frame(kOurMac, kOurIp, 0x1234, kPayload);
  const auto p = link.receive(f);
  REQUIRE(p);
  CHECK(std::vector<std::uint8_t>(p->bytes.begin(), p->bytes.end()) == kPayload);
  CHECK(p->src_gid == net::gid_of(kPeerIp));
  CHECK(p->dst_gid == net::gid_of(kOurIp));
  CHECK(p->src_port == 0xC123);
  CHECK(p->ipv4_id == 0x1234);
  CHECK(link.counters().rx_roce == 1);
}

TEST_CASE("frames for another MAC, IP or port, and other protocols, are counted and dropped", "[ethernet_link]") {
  net::EthernetLink link(kOurMac, net::gid_of(kOurIp));
  CHECK_FALSE(link.receive(roce_frame(kPeerMac, kOurIp, 0, kPayload)));  // promiscuous port: not our MAC
  CHECK_FALSE(link.receive(roce_frame(kOurMac, kPeerIp, 0, kPayload)));  // our MAC, another IP
  std::vector<std::uint8_t> other_port = roce_frame(kOurMac, kOurIp, 0, kPayload);
  wire::Udp::dst_port::set(other_port.data() + kIpOffset + wire::Ipv4::min_length, 4792);
  CHECK_FALSE(link.receive(other_port));
  std::vector<std::uint8_t> lldp(60);
  wire::EthernetRepr{kOurMac, kPeerMac, -1}.emit(lldp.data(), 0x88cc);
  CHECK_FALSE(link.receive(lldp));
  // RoCEv2 over IPv6: well formed, but this link serves one IPv4 address (the IPv6 cases are
  // in ethernet_link_nd_test.cpp).
  const wire::EthernetRepr eth{kOurMac, kPeerMac, -1};
  core::Endpoints v6;
  v6.src = core::Gid{0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2};
  v6.dst = core::Gid{0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
  std::vector<std::uint8_t> ipv6(net::roce_headers_length(eth, v6) + kPayload.size());
  net::write_roce_headers(eth, v6, wire::kRoceV2Port, kPayload, ipv6.data());
  CHECK_FALSE(link.receive(ipv6));
  CHECK(link.counters().rx_not_ours == 5);
  CHECK(link.counters().rx_malformed == 0);
  CHECK(link.counters().rx_roce == 0);
}

TEST_CASE("truncated frames, bad IPv4 checksums and fragments are counted as malformed (RFC 791, annex A17.4.3)",
          "[ethernet_link]") {
  net::EthernetLink link(kOurMac, net::gid_of(kOurIp));
  const std::vector<std::uint8_t> good = roce_frame(kOurMac, kOurIp, 0, kPayload);
  CHECK_FALSE(link.receive(std::span(good).first(10)));
  std::vector<std::uint8_t> bad_sum = good;
  bad_sum[kIpOffset + 10] ^= 0x01;
  CHECK_FALSE(link.receive(bad_sum));
  std::vector<std::uint8_t> fragment = good;
  wire::Ipv4::more_fragments::set(fragment.data() + kIpOffset, true);
  wire::Ipv4::checksum::set(fragment.data() + kIpOffset, 0);
  wire::Ipv4::checksum::set(fragment.data() + kIpOffset, wire::inet_checksum({fragment.data() + kIpOffset, 20}));
  CHECK_FALSE(link.receive(fragment));
  std::vector<std::uint8_t> short_ip = good;
  wire::Ipv4::total_length::set(short_ip.data() + kIpOffset, 2000);  // longer than the frame
  CHECK_FALSE(link.receive(short_ip));
  CHECK(link.counters().rx_malformed == 4);
  CHECK(link.counters().rx_roce == 0);
  CHECK(link.receive(good));  // and the good one still passes
}

TEST_CASE("RoCEv2 from an IPv4 source that cannot send is malformed (RFC 1122 s3.2.1.3, RFC 1112 s6)",
          "[ethernet_link]") {
  net::EthernetLink link(kOurMac, net::gid_of(kOurIp));
  CHECK_FALSE(link.receive(roce_frame(kOurMac, kOurIp, 0, kPayload, {224, 0, 0, 1})));
  CHECK_FALSE(link.receive(roce_frame(kOurMac, kOurIp, 0, kPayload, {239, 255, 255, 255})));
  CHECK_FALSE(link.receive(roce_frame(kOurMac, kOurIp, 0, kPayload, {255, 255, 255, 255})));
  CHECK_FALSE(link.receive(roce_frame(kOurMac, kOurIp, 0, kPayload, {0, 0, 0, 0})));
  CHECK(link.counters().rx_malformed == 4);
  CHECK(link.counters().rx_roce == 0);
  // Just below 224.0.0.0/4 is an ordinary unicast source. A group-bit source MAC is let
  // through: real sniffer captures carry them on good frames, and answers go to the MAC that
  // ARP resolves.
  CHECK(link.receive(roce_frame(kOurMac, kOurIp, 0, kPayload, {223, 255, 255, 254})));
  CHECK(link.receive(roce_frame(kOurMac, kOurIp, 0, kPayload, kPeerIp, {0x11, 0x7c, 0x32, 0xef, 0x44, 0xde})));
  CHECK(link.counters().rx_roce == 2);
}

TEST_CASE("an ARP request for our IP is answered to its sender, who is learnt (RFC 826)", "[ethernet_link]") {
  net::EthernetLink link(kOurMac, net::gid_of(kOurIp));
  CHECK_FALSE(link.receive(arp_frame(wire::Arp::request, kBroadcast, kPeerMac, kPeerIp, kOurIp)));
  const auto frames = link.take_frames();
  REQUIRE(frames.size() == 1);
  REQUIRE(frames[0].size() == 60);  // padded to Ethernet's minimum
  const auto eth = wire::EthernetView::check(frames[0]);
  REQUIRE(eth);
  CHECK(eth->dst() == kPeerMac);
  CHECK(eth->src() == kOurMac);
  CHECK(eth->type() == wire::ethertype::arp);
  const auto reply = wire::ArpRepr::parse(eth->payload());
  REQUIRE(reply);
  CHECK(reply->operation == wire::Arp::reply);
  CHECK(reply->sender_mac == kOurMac);
  CHECK(reply->sender_ip == kOurIp);
  CHECK(reply->target_mac == kPeerMac);
  CHECK(reply->target_ip == kPeerIp);
  CHECK(link.counters().arp_replies_sent == 1);
  // Learnt: a packet to the peer goes out at once, with no request of our own.
  core::TxPacket p = packet_to(kPeerIp, 1);
  CHECK(link.route(p, 0) == kPeerMac);
  CHECK(link.take_frames().empty());
}

TEST_CASE("ARP for other addresses is neither answered nor learnt", "[ethernet_link]") {
  net::EthernetLink link(kOurMac, net::gid_of(kOurIp));
  link.receive(arp_frame(wire::Arp::request, kBroadcast, kPeerMac, kPeerIp, wire::Ipv4Address{10, 77, 1, 9}));
  CHECK(link.take_frames().empty());
  core::TxPacket p = packet_to(kPeerIp, 1);
  CHECK_FALSE(link.route(p, 0));  // unknown: held, and a request goes out
  CHECK(link.take_frames().size() == 1);
  CHECK(link.counters().rx_arp == 1);
}

TEST_CASE("packets to an unknown neighbour wait for its ARP reply and leave in order", "[ethernet_link]") {
  net::EthernetLink link(kOurMac, net::gid_of(kOurIp));
  for (std::uint8_t tag = 0; tag < 3; ++tag) {
    core::TxPacket p = packet_to(kPeerIp, tag);
    CHECK_FALSE(link.route(p, 1000));
    CHECK(p.bytes.size() == 4);  // a copy was kept: the caller's packet is whole
  }
  const auto requests = link.take_frames();
  REQUIRE(requests.size() == 1);  // one request for the three
  const auto eth = wire::EthernetView::check(requests[0]);
  REQUIRE(eth);
  CHECK(eth->dst() == kBroadcast);
  const auto request = wire::ArpRepr::parse(eth->payload());
  REQUIRE(request);
  CHECK(request->operation == wire::Arp::request);
  CHECK(request->target_ip == kPeerIp);
  CHECK(request->sender_ip == kOurIp);
  CHECK(link.next_deadline() == 1000 + net::EthernetLink::kResolveRetryNs);

  link.receive(arp_frame(wire::Arp::reply, kOurMac, kPeerMac, kPeerIp, kOurIp));
  const auto released = link.take_released();
  REQUIRE(released.size() == 3);
  for (std::uint8_t tag = 0; tag < 3; ++tag) {
    CHECK(released[tag].first == kPeerMac);
    CHECK(released[tag].second.bytes[0] == tag);
  }
  CHECK_FALSE(link.next_deadline());
  CHECK(link.counters().tx_held == 3);
}

TEST_CASE("an unanswered neighbour is asked kResolveTries times, then its packets are dropped and counted",
          "[ethernet_link]") {
  net::EthernetLink link(kOurMac, net::gid_of(kOurIp));
  core::TxPacket p = packet_to(kPeerIp, 7);
  std::uint64_t now = 0;
  link.route(p, now);
  for (int i = 0; i < net::EthernetLink::kResolveTries + 2; ++i) {
    now += net::EthernetLink::kResolveRetryNs;
    link.advance(now);
  }
  CHECK(link.counters().arp_requests_sent == static_cast<std::uint64_t>(net::EthernetLink::kResolveTries));
  CHECK(link.counters().tx_unresolved == 1);
  CHECK_FALSE(link.next_deadline());
  CHECK(link.take_released().empty());
  // The next packet starts over with a new request.
  link.take_frames();
  link.route(p, now);
  CHECK(link.take_frames().size() == 1);
}

TEST_CASE("at most kHeldPerNeighbour packets wait, and packets to IPv6 GIDs are refused by an IPv4 link",
          "[ethernet_link]") {
  net::EthernetLink link(kOurMac, net::gid_of(kOurIp));
  for (std::size_t i = 0; i < net::EthernetLink::kHeldPerNeighbour + 5; ++i) {
    core::TxPacket p = packet_to(kPeerIp, 0);
    link.route(p, 0);
  }
  CHECK(link.counters().tx_held == net::EthernetLink::kHeldPerNeighbour);
  CHECK(link.counters().tx_unresolved == 5);
  core::TxPacket v6 = packet_to(kPeerIp, 0);
  v6.route.dst = core::Gid{0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
  CHECK_FALSE(link.route(v6, 0));
  CHECK(link.counters().tx_wrong_family == 1);
}

TEST_CASE("with a prefix, packets off the link go to the gateway's MAC, or without one nowhere", "[ethernet_link]") {
  const wire::Ipv4Address gateway{10, 77, 1, 254}, far{10, 99, 0, 5}, near{10, 77, 1, 200};
  const wire::MacAddress gateway_mac{0x02, 0x00, 0x00, 0x00, 0x00, 0xfe};
  net::EthernetLink link(kOurMac, net::gid_of(kOurIp), {24, net::gid_of(gateway)});
  core::TxPacket off = packet_to(far, 1);
  CHECK_FALSE(link.route(off, 0));  // held while the gateway is asked for, not the far address
  auto frames = link.take_frames();
  REQUIRE(frames.size() == 1);
  auto request = wire::ArpRepr::parse(wire::EthernetView::check(frames[0])->payload());
  REQUIRE(request);
  CHECK(request->target_ip == gateway);
  // The gateway's answer releases the far packet to its MAC, and later ones leave at once.
  link.receive(arp_frame(wire::Arp::reply, kOurMac, gateway_mac, gateway, kOurIp));
  const auto released = link.take_released();
  REQUIRE(released.size() == 1);
  CHECK(released[0].first == gateway_mac);
  CHECK(released[0].second.route.dst == net::gid_of(far));
  CHECK(link.route(off, 0) == gateway_mac);
  // An address inside 10.77.1.0/24 is asked for itself.
  core::TxPacket on = packet_to(near, 2);
  CHECK_FALSE(link.route(on, 0));
  frames = link.take_frames();
  REQUIRE(frames.size() == 1);
  request = wire::ArpRepr::parse(wire::EthernetView::check(frames[0])->payload());
  REQUIRE(request);
  CHECK(request->target_ip == near);

  // /25 puts .200 off the link; with no gateway it cannot be reached: dropped and counted.
  net::EthernetLink alone(kOurMac, net::gid_of(kOurIp), {25, std::nullopt});
  CHECK_FALSE(alone.route(on, 0));
  CHECK(alone.take_frames().empty());
  CHECK(alone.counters().tx_no_route == 1);
  CHECK(alone.counters().tx_held == 0);
  core::TxPacket inside = packet_to(wire::Ipv4Address{10, 77, 1, 100}, 3);
  CHECK_FALSE(alone.route(inside, 0));
  CHECK(alone.take_frames().size() == 1);  // on the link: asked for
}

TEST_CASE("on_link compares the prefix's bits of the IPv4 or IPv6 address", "[ethernet_link]") {
  const core::Gid v4 = net::gid_of(wire::Ipv4Address{10, 77, 1, 1});
  CHECK(net::EthernetLink::on_link(v4, {}, net::gid_of(wire::Ipv4Address{192, 0, 2, 1})));  // no prefix: all
  CHECK(net::EthernetLink::on_link(v4, {20, {}}, net::gid_of(wire::Ipv4Address{10, 77, 15, 1})));
  CHECK_FALSE(net::EthernetLink::on_link(v4, {20, {}}, net::gid_of(wire::Ipv4Address{10, 77, 16, 1})));
  CHECK(net::EthernetLink::on_link(v4, {0, {}}, net::gid_of(wire::Ipv4Address{192, 0, 2, 1})));
  CHECK(net::EthernetLink::on_link(v4, {32, {}}, v4));
  CHECK_FALSE(net::EthernetLink::on_link(v4, {32, {}}, net::gid_of(wire::Ipv4Address{10, 77, 1, 2})));
  core::Gid a{0xfd, 0x77, 0, 1}, b{0xfd, 0x77, 0, 1}, c{0xfd, 0x77, 0, 2};
  a[15] = 1;
  b[15] = 2;
  CHECK(net::EthernetLink::on_link(a, {64, {}}, b));
  CHECK_FALSE(net::EthernetLink::on_link(a, {64, {}}, c));
  CHECK(net::EthernetLink::on_link(a, {30, {}}, c));  // fd77:1:: and fd77:2:: share their first 30 bits
  CHECK_FALSE(net::EthernetLink::on_link(a, {31, {}}, c));
}
