// The RoCE Invariant CRC (IBTA vol. 1 s7.8.1; RoCEv2 annex A17.4.2, RoCEv1 annex A16.4).
//
// ICRC = CRC-32 (as zlib computes it) over: eight 0xFF bytes standing in for the LRH, then
// the network header with its variant fields set to all ones (IPv4: TOS, TTL, header
// checksum; IPv6 and GRH: traffic class, flow label, hop limit), the UDP header with its
// checksum set to all ones (RoCEv2 only), the BTH with its byte 4 (FECN/BECN/reserved) set
// to all ones, and everything after up to the ICRC. The four ICRC bytes on the wire are
// that CRC value stored little-endian. Verified against 2,083 RoCEv2 and 2,791 RoCEv1
// packets from real NICs (docs/interop.md, "NICs and captures").
#pragma once

#include <cstdint>
#include <span>

namespace wire {

enum class NetworkHeader : std::uint8_t { ipv4, ipv6, grh };

// `network` is the IPv4 header (with any options), the IPv6 fixed header or the GRH; `udp`
// the 8-byte UDP header (empty for RoCEv1); `covered` the BTH through the pad.
std::uint32_t compute_icrc(NetworkHeader kind, std::span<const std::uint8_t> network, std::span<const std::uint8_t> udp,
                           std::span<const std::uint8_t> covered);

inline void store_icrc(std::uint8_t* out, std::uint32_t icrc) {
  for (int i = 0; i < 4; ++i) out[i] = static_cast<std::uint8_t>(icrc >> (8 * i));
}

// The ICRC value whose four bytes (little-endian) start at `in`.
inline std::uint32_t load_icrc(const std::uint8_t* in) {
  return std::uint32_t{in[0]} | std::uint32_t{in[1]} << 8 | std::uint32_t{in[2]} << 16 | std::uint32_t{in[3]} << 24;
}

}  // namespace wire
