// The Ethernet side of a backend that owns a port (the dpdk backend): the ARP a host's
// kernel would otherwise do for its address (RFC 826), and the sorting of received frames.
// Sans-I/O, like the engine: it takes frames, packets to send and the current time, and
// gives back received RoCE packets, frames to send and the MAC each packet goes to.
//
// - Receive: a frame is a RoCEv2 packet for us when its destination MAC is ours, it holds an
//   IPv4 header with a good checksum (RFC 791) addressed to our IP, not a fragment (annex
//   A17.4.3: RoCEv2 sets DF), and UDP to port 4791. Its IPv4 Identification goes to the engine
//   (RxPacket::ipv4_id), which then checks the ICRC over the real header in one try.
//   Everything else is counted and dropped, except ARP.
// - ARP: a request for our IP is answered; the sender of any request or reply addressed to
//   us is learnt (RFC 826's "merge"), so the peer that asks for us is reachable at once.
// - Send: a packet to an IP whose MAC is known goes out at once. One to an unknown IP waits
//   (up to kHeldPerNeighbour per neighbour; RC retransmits anything dropped) while requests
//   are broadcast every kArpRetryNs, at most kArpTries times; then the held packets are
//   dropped and counted (tx_unresolved), and the next packet starts over.
// Not done: IPv6 (neighbour discovery), routing through a gateway (every peer is on-link),
// ageing of learnt entries, VLANs.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <span>
#include <vector>

#include "emulator/core/device.hpp"
#include "wire/arp.hpp"
#include "wire/ethernet.hpp"
#include "wire/ipv4.hpp"

namespace softrdma::net {

struct LinkCounters {
  std::uint64_t rx_roce = 0;           // RoCEv2 packets for us, handed on
  std::uint64_t rx_arp = 0;            // ARP frames taken in
  std::uint64_t rx_not_ours = 0;       // another MAC, IP or UDP port; other ethertypes and protocols
  std::uint64_t rx_malformed = 0;      // truncated, bad IPv4 checksum or length, fragments, bad ARP
  std::uint64_t arp_requests_sent = 0;
  std::uint64_t arp_replies_sent = 0;
  std::uint64_t tx_held = 0;           // packets that waited for a neighbour's MAC
  std::uint64_t tx_unresolved = 0;     // packets dropped: their neighbour never answered, or too many waited
  std::uint64_t tx_not_ipv4 = 0;       // packets to an IPv6 GID, dropped
};

class EthernetLink {
 public:
  static constexpr std::size_t kHeldPerNeighbour = 256;
  static constexpr std::uint64_t kArpRetryNs = 200'000'000;
  static constexpr int kArpTries = 5;

  EthernetLink(wire::MacAddress mac, wire::Ipv4Address ip);

  const wire::MacAddress& mac() const { return mac_; }
  const wire::Ipv4Address& ip() const { return ip_; }
  const core::Gid& gid() const { return gid_; }  // the RoCEv2 GID of ip()
  const LinkCounters& counters() const { return counters_; }

  // Sorts one received frame. A RoCEv2 packet for us comes back (its bytes point into
  // `frame`); an ARP frame may queue a reply (take_frames()) and release held packets
  // (take_released()).
  std::optional<core::RxPacket> receive(std::span<const std::uint8_t> frame);

  // The MAC `packet` goes to; none when it must wait for ARP (then a copy is kept, or it is
  // dropped and counted) or cannot be sent at all.
  std::optional<wire::MacAddress> route(const core::TxPacket& packet, std::uint64_t now_ns);

  // Retries ARP requests that are due and gives up on neighbours that never answered.
  void advance(std::uint64_t now_ns);
  std::optional<std::uint64_t> next_deadline() const;

  // Frames of our own to send (ARP requests and replies), oldest first; cleared by the call.
  std::vector<std::vector<std::uint8_t>> take_frames();
  // Held packets whose neighbour answered, with its MAC, in the order they were routed.
  std::vector<std::pair<wire::MacAddress, core::TxPacket>> take_released();

 private:
  struct Pending {
    std::deque<core::TxPacket> held;
    std::uint64_t next_try_ns = 0;
    int tries = 0;
  };

  void take_arp(std::span<const std::uint8_t> payload, const wire::EthernetView& eth);
  void learn(const wire::Ipv4Address& ip, const wire::MacAddress& mac);
  void queue_arp(std::uint16_t operation, const wire::MacAddress& to_mac, const wire::Ipv4Address& to_ip);

  wire::MacAddress mac_;
  wire::Ipv4Address ip_;
  core::Gid gid_{};
  std::map<wire::Ipv4Address, wire::MacAddress> neighbours_;
  std::map<wire::Ipv4Address, Pending> pending_;
  std::vector<std::vector<std::uint8_t>> frames_;
  std::vector<std::pair<wire::MacAddress, core::TxPacket>> released_;
  LinkCounters counters_;
};

}  // namespace softrdma::net
