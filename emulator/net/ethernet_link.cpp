#include "emulator/net/ethernet_link.hpp"

#include <algorithm>

#include "emulator/core/roce_headers.hpp"
#include "emulator/net/neighbour_frames.hpp"
#include "emulator/net/udp_gid.hpp"
#include "wire/roce_frame.hpp"

namespace softrdma::net {
namespace {

constexpr wire::MacAddress kBroadcast{0xff, 0xff, 0xff, 0xff, 0xff, 0xff};

wire::Ipv4Address ipv4_of(const core::Gid& gid) { return {gid[12], gid[13], gid[14], gid[15]}; }

// Whether a packet may come from this IP address. The engine answers a request's source
// (its ACKs and READ responses go there), so one from a group would be answered to a group.
// IPv4: RFC 1122 s3.2.1.3 (0.0.0.0 only while a host starts up, never 255.255.255.255; "MUST
// silently discard" others) and RFC 1112 s6 (a host group never appears as a source). IPv6:
// RFC 4291 s2.7 (multicast) and s2.5.2 (:: only before a host has an address, which a RoCE
// peer does). The source MAC is not judged: answers go to the MAC that ARP or ND resolve, and
// real captures from a NIC's sniffer carry group-bit source MACs on good frames
// (m3_soft-roce__rdma-ping__uc__uc_sg_send__uc-sg.pcap).
bool unicast_source(const wire::Ipv4Address& a) {
  const bool unspecified = a == wire::Ipv4Address{0, 0, 0, 0};
  const bool broadcast = a == wire::Ipv4Address{255, 255, 255, 255};
  const bool multicast = (a[0] & 0xf0) == 0xe0;  // 224.0.0.0/4
  return !unspecified && !broadcast && !multicast;
}

bool unicast_source(const wire::Ipv6Address& a) { return !wire::is_multicast(a) && a != wire::Ipv6Address{}; }

}  // namespace

EthernetLink::EthernetLink(wire::MacAddress mac, const core::Gid& gid, OnLink on_link)
    : mac_(mac), gid_(gid), on_link_(std::move(on_link)) {}

bool EthernetLink::on_link(const core::Gid& gid, const OnLink& on_link, const core::Gid& address) {
  if (!on_link.prefix_len) return true;
  // An IPv4 prefix counts from the IPv4 address, the last 32 bits of its mapped GID.
  const unsigned bits = std::min(std::min(*on_link.prefix_len, 128u) + (core::is_ipv4_mapped(gid) ? 96u : 0u), 128u);
  const unsigned whole = bits / 8, rest = bits % 8;
  if (!std::equal(gid.begin(), gid.begin() + whole, address.begin())) return false;
  const auto mask = static_cast<std::uint8_t>(0xFF00u >> rest);
  return rest == 0 || (gid[whole] & mask) == (address[whole] & mask);
}

bool EthernetLink::ipv4() const { return core::is_ipv4_mapped(gid_); }

std::optional<core::RxPacket> EthernetLink::receive(std::span<const std::uint8_t> frame) {
  const auto eth = wire::EthernetView::check(frame);
  if (!eth) {
    ++counters_.rx_malformed;
    return std::nullopt;
  }
  if (eth->type() == wire::ethertype::arp) {
    if (ipv4()) {
      take_arp(*eth);
    } else {
      ++counters_.rx_not_ours;  // ARP resolves IPv4 addresses only, and we have none
    }
    return std::nullopt;
  }
  if (eth->type() == wire::ethertype::ipv6) {
    const auto ip = wire::Ipv6View::check(eth->payload());
    if (!ip) {
      ++counters_.rx_malformed;
      return std::nullopt;
    }
    if (ip->next_header() == wire::ip_proto::icmpv6) {
      if (ipv4()) {
        ++counters_.rx_not_ours;  // the kernel's own IPv6 on the port: nothing we answer for
      } else {
        take_nd(*eth, *ip);
      }
      return std::nullopt;
    }
  }
  return take_roce(frame, *eth);
}

std::optional<core::RxPacket> EthernetLink::take_roce(std::span<const std::uint8_t> frame,
                                                      const wire::EthernetView& eth) {
  if (eth.dst() != mac_) {  // the port may be promiscuous (af_packet makes it so)
    ++counters_.rx_not_ours;
    return std::nullopt;
  }
  const auto layers = wire::RoceLayers::locate(frame);
  if (!layers) {
    ++(layers.error() == wire::Error::not_roce ? counters_.rx_not_ours : counters_.rx_malformed);
    return std::nullopt;
  }
  // RoCEv1, and RoCEv2 in the family our address is not in, cannot be for us.
  const bool v4 = layers->encapsulation == wire::Encapsulation::rocev2_ipv4;
  if (layers->encapsulation == wire::Encapsulation::rocev1 || v4 != ipv4()) {
    ++counters_.rx_not_ours;
    return std::nullopt;
  }
  core::RxPacket p;
  if (v4) {
    const auto view = wire::Ipv4View::check(eth.payload());
    if (!view || !view->checksum_ok()) {  // RFC 791 s3.1: a header with a bad checksum is discarded
      ++counters_.rx_malformed;
      return std::nullopt;
    }
    if (view->dst() != ipv4_of(gid_)) {
      ++counters_.rx_not_ours;
      return std::nullopt;
    }
    if (!unicast_source(view->src())) {
      ++counters_.rx_malformed;
      return std::nullopt;
    }
    p.src_gid = gid_of(view->src());
    p.ipv4_id = wire::Ipv4::identification::get(layers->network.data());
  } else {
    const auto view = wire::Ipv6View::check(eth.payload());
    // RFC 8200 s8.1: IPv6 receivers discard UDP packets with a zero checksum. A non-zero one
    // is not summed here: the engine's ICRC covers the same payload and both addresses.
    if (!view || wire::Udp::checksum::get(layers->udp.data()) == 0) {
      ++counters_.rx_malformed;
      return std::nullopt;
    }
    if (view->dst() != gid_) {
      ++counters_.rx_not_ours;
      return std::nullopt;
    }
    if (!unicast_source(view->src())) {
      ++counters_.rx_malformed;
      return std::nullopt;
    }
    p.src_gid = view->src();
  }
  ++counters_.rx_roce;
  p.bytes = layers->ib;
  p.dst_gid = gid_;
  p.src_port = wire::Udp::src_port::get(layers->udp.data());
  return p;
}

void EthernetLink::take_arp(const wire::EthernetView& eth) {
  const auto arp = wire::ArpRepr::parse(eth.payload());
  if (!arp || (arp->operation != wire::Arp::request && arp->operation != wire::Arp::reply)) {
    ++counters_.rx_malformed;
    return;
  }
  ++counters_.rx_arp;
  // RFC 826 "Packet Reception": only an exchange that names our address teaches us anything
  // (and a gratuitous ARP from a neighbour we know updates it).
  const wire::Ipv4Address our_ip = ipv4_of(gid_);
  const bool for_us = arp->target_ip == our_ip;
  const core::Gid sender = gid_of(arp->sender_ip);
  if (for_us || neighbours_.count(sender) != 0) learn(sender, arp->sender_mac);
  if (for_us && arp->operation == wire::Arp::request) {
    frames_.push_back(arp_frame(eth.src(), mac_, {wire::Arp::reply, mac_, our_ip, eth.src(), arp->sender_ip}));
    ++counters_.arp_replies_sent;
  }
}

void EthernetLink::take_nd(const wire::EthernetView& eth, const wire::Ipv6View& ip) {
  // ND reaches us at our address or our solicited-node group (RFC 4861 s7.2.1-7.2.2), or at
  // all nodes (unsolicited advertisements, s7.2.6), each on its own MAC (RFC 2464 s7). What
  // goes to other groups (MLD, routers, other nodes' solicitations) is not ours.
  const wire::Ipv6Address group = wire::solicited_node(gid_);
  const wire::MacAddress to_mac = eth.dst();
  const wire::Ipv6Address to = ip.dst();
  if (!(to_mac == mac_ || to_mac == wire::multicast_mac(group) || to_mac == wire::multicast_mac(wire::kAllNodes)) ||
      !(to == gid_ || to == group || to == wire::kAllNodes)) {
    ++counters_.rx_not_ours;
    return;
  }
  const auto nd = wire::NdRepr::parse(ip);
  if (!nd) {  // another ICMPv6 message is not ours; an invalid NS or NA is malformed (s7.1)
    ++(nd.error() == wire::Error::unknown_opcode ? counters_.rx_not_ours : counters_.rx_malformed);
    return;
  }
  ++counters_.rx_nd;
  if (nd->type == wire::icmpv6_type::neighbor_advertisement) {
    // s7.2.5: an answer teaches us a neighbour we asked about; for one we know, only an
    // advertisement that says Override replaces its MAC. Without a Target Link-Layer Address
    // option there is nothing to learn.
    const bool asked = pending_.count(nd->target) != 0;
    const bool known = neighbours_.count(nd->target) != 0;
    if (nd->link_layer && (asked || (known && nd->override_flag))) learn(nd->target, *nd->link_layer);
    return;
  }
  if (nd->target != gid_) return;  // s7.2.3: a solicitation for another address is discarded
  wire::NdRepr na;
  na.type = wire::icmpv6_type::neighbor_advertisement;
  na.override_flag = true;  // s7.2.4: set for a unicast (not anycast) target
  na.target = gid_;
  na.link_layer = mac_;
  if (wire::is_unspecified(ip.src())) {
    // s7.2.4: a duplicate address detection probe has no address to answer to: all nodes
    // hear that the address is taken, and the answer is not marked solicited.
    frames_.push_back(nd_frame(wire::multicast_mac(wire::kAllNodes), mac_, gid_, wire::kAllNodes, na));
  } else {
    // s7.2.3: the solicitor's Source Link-Layer Address option creates or updates its entry.
    // A unicast probe may leave the option out (s4.3); the answer then goes to the frame's
    // sender.
    if (nd->link_layer) learn(ip.src(), *nd->link_layer);
    na.solicited = true;
    frames_.push_back(nd_frame(nd->link_layer.value_or(eth.src()), mac_, gid_, ip.src(), na));
  }
  ++counters_.nd_advertisements_sent;
}

void EthernetLink::learn(const core::Gid& neighbour, const wire::MacAddress& mac) {
  if ((mac[0] & 1) != 0) return;  // a multicast (or broadcast) sender MAC is bogus
  neighbours_[neighbour] = mac;
  const auto waiting = pending_.find(neighbour);
  if (waiting == pending_.end()) return;
  for (core::TxPacket& p : waiting->second.held) released_.emplace_back(mac, std::move(p));
  pending_.erase(waiting);
}

std::optional<wire::MacAddress> EthernetLink::route(const core::TxPacket& packet, std::uint64_t now_ns) {
  if (core::is_ipv4_mapped(packet.route.dst) != ipv4()) {
    ++counters_.tx_wrong_family;
    return std::nullopt;
  }
  // The neighbour the frame goes to: the destination itself on the link, else the gateway.
  const bool direct = on_link(gid_, on_link_, packet.route.dst) || (!ipv4() && wire::is_multicast(packet.route.dst));
  if (!direct && !on_link_.gateway) {
    ++counters_.tx_no_route;
    return std::nullopt;
  }
  const core::Gid& dst = direct ? packet.route.dst : *on_link_.gateway;
  if (const auto known = neighbours_.find(dst); known != neighbours_.end()) return known->second;
  // RFC 2464 s7: an IPv6 group's MAC follows from its address; ND never asks for one (s7.1).
  if (!ipv4() && wire::is_multicast(dst)) return wire::multicast_mac(dst);
  Pending& pending = pending_[dst];
  if (pending.held.size() >= kHeldPerNeighbour) {
    ++counters_.tx_unresolved;
    return std::nullopt;
  }
  ++counters_.tx_held;
  pending.held.push_back(packet);  // a copy: the caller still records and recycles its packet
  if (pending.tries == 0) {
    solicit(dst);
    pending.tries = 1;
    pending.next_try_ns = now_ns + kResolveRetryNs;
  }
  return std::nullopt;
}

void EthernetLink::solicit(const core::Gid& neighbour) {
  if (ipv4()) {
    // A request's target MAC is unknown: RFC 826 leaves it open, and zeros are the custom.
    frames_.push_back(arp_frame(kBroadcast, mac_, {wire::Arp::request, mac_, ipv4_of(gid_), {}, ipv4_of(neighbour)}));
    ++counters_.arp_requests_sent;
    return;
  }
  // RFC 4861 s7.2.2: to the target's solicited-node group, from our address, with our
  // Source Link-Layer Address option so that the answer can come straight back.
  wire::NdRepr ns;
  ns.target = neighbour;
  ns.link_layer = mac_;
  const wire::Ipv6Address group = wire::solicited_node(neighbour);
  frames_.push_back(nd_frame(wire::multicast_mac(group), mac_, gid_, group, ns));
  ++counters_.nd_solicitations_sent;
}

void EthernetLink::advance(std::uint64_t now_ns) {
  for (auto it = pending_.begin(); it != pending_.end();) {
    Pending& p = it->second;
    if (p.next_try_ns > now_ns) {
      ++it;
    } else if (p.tries >= kResolveTries) {
      counters_.tx_unresolved += p.held.size();
      it = pending_.erase(it);
    } else {
      solicit(it->first);
      ++p.tries;
      p.next_try_ns = now_ns + kResolveRetryNs;
      ++it;
    }
  }
}

std::optional<std::uint64_t> EthernetLink::next_deadline() const {
  std::optional<std::uint64_t> t;
  for (const auto& [neighbour, p] : pending_) {
    if (!t || p.next_try_ns < *t) t = p.next_try_ns;
  }
  return t;
}

std::vector<std::vector<std::uint8_t>> EthernetLink::take_frames() { return std::exchange(frames_, {}); }

std::vector<std::pair<wire::MacAddress, core::TxPacket>> EthernetLink::take_released() {
  return std::exchange(released_, {});
}

}  // namespace softrdma::net
