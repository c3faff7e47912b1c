#include "emulator/net/neighbour_frames.hpp"

#include <algorithm>

namespace softrdma::net {
namespace {

constexpr std::size_t kMinFrame = 60;  // without the FCS (IEEE 802.3 s3.2.8)

}  // namespace

std::vector<std::uint8_t> arp_frame(const wire::MacAddress& to_mac, const wire::MacAddress& from_mac,
                                    const wire::ArpRepr& arp) {
  std::vector<std::uint8_t> f(std::max<std::size_t>(wire::Ethernet::length + wire::Arp::length, kMinFrame));
  wire::EthernetRepr{to_mac, from_mac, -1}.emit(f.data(), wire::ethertype::arp);
  arp.emit(f.data() + wire::Ethernet::length);
  return f;
}

std::vector<std::uint8_t> nd_frame(const wire::MacAddress& to_mac, const wire::MacAddress& from_mac,
                                   const wire::Ipv6Address& src, const wire::Ipv6Address& dst, const wire::NdRepr& nd) {
  // 14 + 40 + at least 24: never under the minimum frame.
  std::vector<std::uint8_t> f(wire::Ethernet::length + wire::Ipv6::length + nd.buffer_len());
  wire::EthernetRepr{to_mac, from_mac, -1}.emit(f.data(), wire::ethertype::ipv6);
  wire::Ipv6Repr ip;
  ip.src = src;
  ip.dst = dst;
  ip.next_header = wire::ip_proto::icmpv6;
  ip.hop_limit = wire::NeighborMessage::hop_limit;
  ip.emit(f.data() + wire::Ethernet::length, nd.buffer_len());
  nd.emit(src, dst, f.data() + wire::Ethernet::length + wire::Ipv6::length);
  return f;
}

}  // namespace softrdma::net
