#include "emulator/net/udp_gid.hpp"

#include <arpa/inet.h>

#include <algorithm>
#include <cstring>

#include "emulator/core/roce_headers.hpp"

namespace softrdma::net {

core::Gid gid_of(const std::array<std::uint8_t, 4>& ipv4) {
  core::Gid gid{};
  gid[10] = 0xFF;
  gid[11] = 0xFF;
  std::memcpy(gid.data() + 12, ipv4.data(), 4);
  return gid;
}

core::Gid gid_of(const in_addr& ipv4) {
  std::array<std::uint8_t, 4> bytes{};
  std::memcpy(bytes.data(), &ipv4.s_addr, 4);  // s_addr is in network order already
  return gid_of(bytes);
}

core::Gid gid_of(const in6_addr& ipv6) {
  core::Gid gid{};
  std::memcpy(gid.data(), ipv6.s6_addr, 16);
  return gid;
}

std::optional<core::Gid> parse_gid(const std::string& address) {
  in_addr v4{};
  if (inet_pton(AF_INET, address.c_str(), &v4) == 1) return gid_of(v4);
  in6_addr v6{};
  if (inet_pton(AF_INET6, address.c_str(), &v6) == 1) return gid_of(v6);
  return std::nullopt;
}

std::optional<core::Gid> gid_of(const sockaddr_storage& address) {
  if (address.ss_family == AF_INET) return gid_of(reinterpret_cast<const sockaddr_in&>(address).sin_addr);
  if (address.ss_family == AF_INET6) return gid_of(reinterpret_cast<const sockaddr_in6&>(address).sin6_addr);
  return std::nullopt;
}

std::uint16_t port_of(const sockaddr_storage& address) {
  return ntohs(address.ss_family == AF_INET ? reinterpret_cast<const sockaddr_in&>(address).sin_port
                                            : reinterpret_cast<const sockaddr_in6&>(address).sin6_port);
}

socklen_t socket_address_of(const core::Gid& gid, std::uint16_t port, sockaddr_storage& out) {
  std::memset(&out, 0, sizeof out);
  if (core::is_ipv4_mapped(gid)) {
    auto& in = reinterpret_cast<sockaddr_in&>(out);
    in.sin_family = AF_INET;
    in.sin_port = htons(port);
    std::memcpy(&in.sin_addr.s_addr, gid.data() + 12, 4);
    return sizeof(sockaddr_in);
  }
  auto& in6 = reinterpret_cast<sockaddr_in6&>(out);
  in6.sin6_family = AF_INET6;
  in6.sin6_port = htons(port);
  std::copy(gid.begin(), gid.end(), in6.sin6_addr.s6_addr);
  return sizeof(sockaddr_in6);
}

}  // namespace softrdma::net
