// The Ethernet side of a backend that owns a port (the dpdk backend): the neighbour
// resolution a host's kernel would otherwise do for its one address, ARP for IPv4 (RFC 826)
// or neighbour discovery for IPv6 (RFC 4861), and the sorting of received frames.
// Sans-I/O, like the engine: it takes frames, packets to send and the current time, and
// gives back received RoCE packets, frames to send and the MAC each packet goes to.
//
// The address is a GID: IPv4-mapped (::ffff:a.b.c.d) for IPv4, the address itself for IPv6.
// Neighbours are GIDs too, so both families share the table, the held packets and the retries.
//
// - Receive: a frame is a RoCEv2 packet for us when its destination MAC is ours, it holds an
//   IP header addressed to our address, and UDP to port 4791. IPv4: a good header checksum
//   (RFC 791), not a fragment (annex A17.4.3: RoCEv2 sets DF); its Identification goes to the
//   engine (RxPacket::ipv4_id), which then checks the ICRC over the real header in one try.
//   IPv6: a UDP checksum that is not 0 (RFC 8200 s8.1; its value is left to the ICRC, which
//   covers the same bytes). A packet from an IP address that cannot send (a multicast group,
//   a broadcast, the unspecified address) is malformed: the engine would
//   answer it to a group. Everything else is counted and dropped, except ARP and ND of our
//   family; those of the other family are not ours.
// - ARP: a request for our IP is answered; the sender of any request or reply addressed to
//   us is learnt (RFC 826's "merge"), so the peer that asks for us is reachable at once.
// - ND: frames to our MAC, our solicited-node group's MAC or all-nodes' (RFC 2464 s7) that
//   are Neighbor Solicitations or Advertisements valid by RFC 4861 s7.1 are taken in; any
//   other IPv6 (MLD, router solicitations, other ICMPv6) is not ours. A solicitation for our
//   address is answered (s7.2.4) and teaches us its sender (s7.2.3); an advertisement teaches
//   us its target when we asked about it, or replaces a known one's MAC when it says Override
//   (s7.2.5).
// - Send: a packet to an address whose MAC is known goes out at once. One to an unknown
//   address waits (up to kHeldPerNeighbour per neighbour; RC retransmits anything dropped)
//   while we ask (an ARP request broadcast, or an NS to the target's solicited-node group)
//   every kResolveRetryNs, at most kResolveTries times; then the held packets are dropped and
//   counted (tx_unresolved), and the next packet starts over. A packet to the other family
//   than our address's is dropped (tx_wrong_family); one to an IPv6 multicast group goes to the
//   group's MAC (RFC 2464 s7).
// - Routing (OnLink): without a prefix every peer is on the link. With one, a packet to an
//   address outside it goes to the gateway's MAC (resolved like any neighbour: RoCEv2 is
//   routed IP, annex A17), or, with no gateway, is dropped (tx_no_route).
// Not done: router discovery (the gateway is configured), ageing of learnt entries (RFC 4861's
// reachability states), a link-local address, duplicate address detection of our own, VLANs.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <span>
#include <vector>

#include "emulator/core/device.hpp"
#include "wire/ethernet.hpp"
#include "wire/icmpv6.hpp"
#include "wire/ipv6.hpp"

namespace softrdma::net {

struct LinkCounters {
  std::uint64_t rx_roce = 0;       // RoCEv2 packets for us, handed on
  std::uint64_t rx_arp = 0;        // ARP frames taken in
  std::uint64_t rx_nd = 0;         // Neighbor Solicitations and Advertisements taken in
  std::uint64_t rx_not_ours = 0;   // another MAC, IP or UDP port; other ethertypes and protocols
  std::uint64_t rx_malformed = 0;  // truncated, bad checksums or lengths, fragments, bad ARP or ND
  std::uint64_t arp_requests_sent = 0;
  std::uint64_t arp_replies_sent = 0;
  std::uint64_t nd_solicitations_sent = 0;
  std::uint64_t nd_advertisements_sent = 0;
  std::uint64_t tx_held = 0;          // packets that waited for a neighbour's MAC
  std::uint64_t tx_unresolved = 0;    // packets dropped: their neighbour never answered, or too many waited
  std::uint64_t tx_wrong_family = 0;  // packets to an IPv6 GID from an IPv4 address or the reverse, dropped
  std::uint64_t tx_no_route = 0;      // packets to an address off the link with no gateway, dropped
};

// Which addresses are on the link: those sharing the device address's first prefix_len bits
// (of its IPv4 or IPv6 address), every one when there is no prefix; the others are reached
// through the gateway, which must be on the link.
struct OnLink {
  std::optional<unsigned> prefix_len;
  std::optional<core::Gid> gateway;
};

class EthernetLink {
 public:
  static constexpr std::size_t kHeldPerNeighbour = 256;
  static constexpr std::uint64_t kResolveRetryNs = 200'000'000;
  static constexpr int kResolveTries = 5;

  // `gid` is the RoCEv2 GID of the device's address (udp_gid.hpp's gid_of): IPv4-mapped for
  // an IPv4 address, which this link then serves with ARP, else an IPv6 one served with ND.
  EthernetLink(wire::MacAddress mac, const core::Gid& gid, OnLink on_link = {});

  // Whether `address` (a GID of our family) is on the link by `on_link`'s prefix, for `gid`.
  static bool on_link(const core::Gid& gid, const OnLink& on_link, const core::Gid& address);

  const wire::MacAddress& mac() const { return mac_; }
  const core::Gid& gid() const { return gid_; }
  const LinkCounters& counters() const { return counters_; }

  // Sorts one received frame. A RoCEv2 packet for us comes back (its bytes point into
  // `frame`); an ARP or ND frame may queue a reply (take_frames()) and release held packets
  // (take_released()).
  std::optional<core::RxPacket> receive(std::span<const std::uint8_t> frame);

  // The MAC `packet` goes to; none when it must wait for ARP or ND (then a copy is kept, or it
  // is dropped and counted) or cannot be sent at all.
  std::optional<wire::MacAddress> route(const core::TxPacket& packet, std::uint64_t now_ns);

  // Retries ARP requests and solicitations that are due and gives up on neighbours that never
  // answered.
  void advance(std::uint64_t now_ns);
  std::optional<std::uint64_t> next_deadline() const;

  // Frames of our own to send (ARP and ND), oldest first; cleared by the call.
  std::vector<std::vector<std::uint8_t>> take_frames();
  // Held packets whose neighbour answered, with its MAC, in the order they were routed.
  std::vector<std::pair<wire::MacAddress, core::TxPacket>> take_released();

 private:
  struct Pending {
    std::deque<core::TxPacket> held;
    std::uint64_t next_try_ns = 0;
    int tries = 0;
  };

  bool ipv4() const;
  std::optional<core::RxPacket> take_roce(std::span<const std::uint8_t> frame, const wire::EthernetView& eth);
  void take_arp(const wire::EthernetView& eth);
  void take_nd(const wire::EthernetView& eth, const wire::Ipv6View& ip);
  void learn(const core::Gid& neighbour, const wire::MacAddress& mac);
  void solicit(const core::Gid& neighbour);  // one ARP request or NS

  wire::MacAddress mac_;
  core::Gid gid_;
  OnLink on_link_;
  std::map<core::Gid, wire::MacAddress> neighbours_;
  std::map<core::Gid, Pending> pending_;
  std::vector<std::vector<std::uint8_t>> frames_;
  std::vector<std::pair<wire::MacAddress, core::TxPacket>> released_;
  LinkCounters counters_;
};

}  // namespace softrdma::net
