// The Ethernet, IP and UDP headers below a RoCEv2 packet, as a sender puts them on the wire
// (IBTA vol. 1 annex A17.2, A17.4): written by the capture stage, which synthesises what the
// kernel sent, and by the dpdk backend, which sends them itself.
#pragma once

#include <cstdint>
#include <span>

#include "emulator/core/roce_headers.hpp"
#include "wire/ethernet.hpp"

namespace softrdma::net {

// Ethernet + IPv4 or IPv6 (as core::write_ip_header chooses by `route.dst`) + UDP.
std::size_t roce_headers_length(const wire::EthernetRepr& eth, const core::Endpoints& route);

// Writes roce_headers_length() bytes for `payload` (BTH through ICRC) from route.src_port to
// `dst_port`. IPv4: checksum 0 in the UDP header, as rxe sends; IPv6: the UDP checksum over
// `payload`, which RFC 8200 s8.1 requires. The IP header is the one the ICRC covers.
void write_roce_headers(const wire::EthernetRepr& eth, const core::Endpoints& route, std::uint16_t dst_port,
                        std::span<const std::uint8_t> payload, std::uint8_t* out);

}  // namespace softrdma::net
