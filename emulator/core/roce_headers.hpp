// The IP and UDP headers a RoCEv2 packet travels in, as the engine's hosts send them: IPv4
// with ID 0 and DF (what an unconnected UDP socket with IP_PMTUDISC_DO sends, docs/backends.md),
// or IPv6; UDP to port 4791. The engine needs them for two things only: the ICRC, which
// covers them (IBTA vol. 1 annex A17.4.2), and the GRH a UD receive buffer starts with
// (s11.4.1.2: 40 bytes; for IPv4 the header sits in the last 20 of them).
#pragma once

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <span>

#include "emulator/core/verbs_types.hpp"

namespace softrdma::core {

struct Endpoints {
  Gid src{};
  Gid dst{};
  std::uint16_t src_port = 0;
  std::uint8_t traffic_class = 0;
  std::uint32_t flow_label = 0;
  std::uint8_t hop_limit = 64;
  // IPv4 only: the Identification the packet leaves with. The engine sends 0 (DF,
  // docs/backends.md); a host that lets the kernel number a GSO send's segments 0, 1, 2, ...
  // records them here, and a receiver its guess of the sender's.
  std::uint16_t ipv4_id = 0;
};

// Whether `gid` is an IPv4 address in IPv4-mapped form (::ffff:a.b.c.d). Inline, so that code
// without the engine (the verbs shim's identity, librdmacm) asks the same question.
inline bool is_ipv4_mapped(const Gid& gid) {
  static constexpr std::uint8_t prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF};
  return std::equal(std::begin(prefix), std::end(prefix), gid.begin());
}

// Whether `gid` is a multicast GID: an MGID (first byte 0xFF, IBTA vol. 1 s4.1.1, which IPv6
// multicast addresses share), or an IPv4 multicast address (224.0.0.0/4) in IPv4-mapped form,
// the MGID a RoCEv2 group of IPv4 has.
inline bool is_multicast_gid(const Gid& gid) {
  return gid[0] == 0xFF || (is_ipv4_mapped(gid) && (gid[12] & 0xF0) == 0xE0);
}

// Writes the IP header of a RoCEv2 packet between `e` carrying a `udp_len`-byte UDP datagram,
// as the ICRC assumes it: IPv4 (ID e.ipv4_id, DF) when `e.dst` is IPv4-mapped, IPv6 otherwise.
// Returns its length. The capture stage writes the same header into its frames.
std::size_t write_ip_header(const Endpoints& e, std::size_t udp_len, std::uint8_t* out);

// The ICRC of `covered` (BTH through pad) sent between `e`.
std::uint32_t icrc_between(const Endpoints& e, std::span<const std::uint8_t> covered);

// Writes the 40-byte GRH area of a UD receive for a `ib_length`-byte packet between `e`.
void write_grh(const Endpoints& e, std::size_t ib_length, std::uint8_t* out40);

}  // namespace softrdma::core
