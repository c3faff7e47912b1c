// The frames a link sends to resolve neighbours and to be resolved: ARP requests and replies
// (RFC 826) and IPv6 Neighbor Solicitations and Advertisements (RFC 4861 s4.3, s4.4), whole
// Ethernet frames ready for the port. EthernetLink decides when; this builds the bytes.
#pragma once

#include <cstdint>
#include <vector>

#include "wire/arp.hpp"
#include "wire/ethernet.hpp"
#include "wire/icmpv6.hpp"
#include "wire/ipv6.hpp"

namespace softrdma::net {

// An ARP frame from `from_mac`; padded to Ethernet's minimum frame.
std::vector<std::uint8_t> arp_frame(const wire::MacAddress& to_mac, const wire::MacAddress& from_mac,
                                    const wire::ArpRepr& arp);

// `nd` in an IPv6 packet from `src` to `dst` with hop limit 255 (RFC 4861 s7.1), framed from
// `from_mac` to `to_mac`.
std::vector<std::uint8_t> nd_frame(const wire::MacAddress& to_mac, const wire::MacAddress& from_mac,
                                   const wire::Ipv6Address& src, const wire::Ipv6Address& dst, const wire::NdRepr& nd);

}  // namespace softrdma::net
