// RoCEv2 GIDs and the socket addresses they stand for. A RoCEv2 GID is an IPv6 address; an
// IPv4 address is carried as the IPv4-mapped IPv6 address ::ffff:a.b.c.d (IBTA vol. 1 annex
// A17.4.5.1, RFC 4291 s2.5.5.2), which is what `-g 0` selects on a softrdma device.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>

#include <array>
#include <cstdint>
#include <optional>
#include <string>

#include "emulator/core/verbs_types.hpp"

namespace softrdma::net {

core::Gid gid_of(const in_addr& ipv4);
core::Gid gid_of(const std::array<std::uint8_t, 4>& ipv4);  // network order, as wire::Ipv4Address
core::Gid gid_of(const in6_addr& ipv6);

// The GID of an address as inet_pton reads it, IPv4 ("10.0.0.1") or IPv6 ("fd00::1"); none
// for anything else.
std::optional<core::Gid> parse_gid(const std::string& address);

// The GID a datagram's source (or a socket's local) address stands for; nullopt for a
// family other than AF_INET / AF_INET6.
std::optional<core::Gid> gid_of(const sockaddr_storage& address);

// The port of an AF_INET / AF_INET6 address, in host order.
std::uint16_t port_of(const sockaddr_storage& address);

// The sockaddr_in (IPv4-mapped GID) or sockaddr_in6 (any other GID) for `gid`:`port`;
// returns its length.
socklen_t socket_address_of(const core::Gid& gid, std::uint16_t port, sockaddr_storage& out);

}  // namespace softrdma::net
