#include "emulator/net/ethernet_link.hpp"

#include <algorithm>

#include "emulator/core/roce_headers.hpp"
#include "emulator/net/udp_gid.hpp"
#include "wire/roce_frame.hpp"

namespace softrdma::net {
namespace {

constexpr wire::MacAddress kBroadcast{0xff, 0xff, 0xff, 0xff, 0xff, 0xff};

wire::Ipv4Address ipv4_of(const core::Gid& gid) { return {gid[12], gid[13], gid[14], gid[15]}; }

}  // namespace

EthernetLink::EthernetLink(wire::MacAddress mac, wire::Ipv4Address ip) : mac_(mac), ip_(ip), gid_(gid_of(ip)) {}

std::optional<core::RxPacket> EthernetLink::receive(std::span<const std::uint8_t> frame) {
  const auto eth = wire::EthernetView::check(frame);
  if (!eth) {
    ++counters_.rx_malformed;
    return std::nullopt;
  }
  if (eth->type() == wire::ethertype::arp) {
    take_arp(eth->payload(), *eth);
    return std::nullopt;
  }
  if (eth->dst() != mac_) {  // the port may be promiscuous (af_packet makes it so)
    ++counters_.rx_not_ours;
    return std::nullopt;
  }
  const auto layers = wire::RoceLayers::locate(frame);
  if (!layers) {
    ++(layers.error() == wire::Error::not_roce ? counters_.rx_not_ours : counters_.rx_malformed);
    return std::nullopt;
  }
  if (layers->encapsulation != wire::Encapsulation::rocev2_ipv4) {  // IPv6 and RoCEv1: not served (see header)
    ++counters_.rx_not_ours;
    return std::nullopt;
  }
  const auto view = wire::Ipv4View::check(eth->payload());
  if (!view || !view->checksum_ok()) {  // RFC 791 s3.1: a header with a bad checksum is discarded
    ++counters_.rx_malformed;
    return std::nullopt;
  }
  if (view->dst() != ip_) {
    ++counters_.rx_not_ours;
    return std::nullopt;
  }
  ++counters_.rx_roce;
  core::RxPacket p;
  p.bytes = layers->ib;
  p.src_gid = gid_of(view->src());
  p.dst_gid = gid_;
  p.src_port = wire::Udp::src_port::get(layers->udp.data());
  p.ipv4_id = wire::Ipv4::identification::get(layers->network.data());
  return p;
}

void EthernetLink::take_arp(std::span<const std::uint8_t> payload, const wire::EthernetView& eth) {
  const auto arp = wire::ArpRepr::parse(payload);
  if (!arp || (arp->operation != wire::Arp::request && arp->operation != wire::Arp::reply)) {
    ++counters_.rx_malformed;
    return;
  }
  ++counters_.rx_arp;
  // RFC 826 "Packet Reception": only an exchange that names our address teaches us anything
  // (and a gratuitous ARP from a neighbour we know updates it).
  const bool for_us = arp->target_ip == ip_;
  if (for_us || neighbours_.count(arp->sender_ip) != 0) learn(arp->sender_ip, arp->sender_mac);
  if (for_us && arp->operation == wire::Arp::request) queue_arp(wire::Arp::reply, eth.src(), arp->sender_ip);
}

void EthernetLink::learn(const wire::Ipv4Address& ip, const wire::MacAddress& mac) {
  if (mac == kBroadcast || (mac[0] & 1) != 0) return;  // a multicast sender MAC is bogus
  neighbours_[ip] = mac;
  const auto waiting = pending_.find(ip);
  if (waiting == pending_.end()) return;
  for (core::TxPacket& p : waiting->second.held) released_.emplace_back(mac, std::move(p));
  pending_.erase(waiting);
}

std::optional<wire::MacAddress> EthernetLink::route(const core::TxPacket& packet, std::uint64_t now_ns) {
  if (!core::is_ipv4_mapped(packet.route.dst)) {
    ++counters_.tx_not_ipv4;
    return std::nullopt;
  }
  const wire::Ipv4Address dst = ipv4_of(packet.route.dst);
  if (const auto known = neighbours_.find(dst); known != neighbours_.end()) return known->second;
  Pending& pending = pending_[dst];
  if (pending.held.size() >= kHeldPerNeighbour) {
    ++counters_.tx_unresolved;
    return std::nullopt;
  }
  ++counters_.tx_held;
  pending.held.push_back(packet);  // a copy: the caller still records and recycles its packet
  if (pending.tries == 0) {
    queue_arp(wire::Arp::request, kBroadcast, dst);
    pending.tries = 1;
    pending.next_try_ns = now_ns + kArpRetryNs;
  }
  return std::nullopt;
}

void EthernetLink::advance(std::uint64_t now_ns) {
  for (auto it = pending_.begin(); it != pending_.end();) {
    Pending& p = it->second;
    if (p.next_try_ns > now_ns) {
      ++it;
    } else if (p.tries >= kArpTries) {
      counters_.tx_unresolved += p.held.size();
      it = pending_.erase(it);
    } else {
      queue_arp(wire::Arp::request, kBroadcast, it->first);
      ++p.tries;
      p.next_try_ns = now_ns + kArpRetryNs;
      ++it;
    }
  }
}

std::optional<std::uint64_t> EthernetLink::next_deadline() const {
  std::optional<std::uint64_t> t;
  for (const auto& [ip, p] : pending_) {
    if (!t || p.next_try_ns < *t) t = p.next_try_ns;
  }
  return t;
}

void EthernetLink::queue_arp(std::uint16_t operation, const wire::MacAddress& to_mac, const wire::Ipv4Address& to_ip) {
  // Padded to Ethernet's minimum frame (60 bytes without the FCS, IEEE 802.3 s3.2.8).
  std::vector<std::uint8_t>& f = frames_.emplace_back(std::max<std::size_t>(wire::Ethernet::length + wire::Arp::length, 60));
  wire::EthernetRepr{to_mac, mac_, -1}.emit(f.data(), wire::ethertype::arp);
  // A request's target MAC is unknown: RFC 826 leaves it open, and zeros are the custom.
  const wire::MacAddress target = operation == wire::Arp::request ? wire::MacAddress{} : to_mac;
  wire::ArpRepr{operation, mac_, ip_, target, to_ip}.emit(f.data() + wire::Ethernet::length);
  ++(operation == wire::Arp::request ? counters_.arp_requests_sent : counters_.arp_replies_sent);
}

std::vector<std::vector<std::uint8_t>> EthernetLink::take_frames() { return std::exchange(frames_, {}); }

std::vector<std::pair<wire::MacAddress, core::TxPacket>> EthernetLink::take_released() {
  return std::exchange(released_, {});
}

}  // namespace softrdma::net
