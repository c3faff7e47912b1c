// The Internet checksum (RFC 1071): IPv4 header checksum, and the UDP/TCP checksums over
// the IPv4 (RFC 768) or IPv6 (RFC 8200 s8.1) pseudo-header.
#pragma once

#include <cstdint>
#include <span>

namespace wire {

// Adds `data` to a running one's-complement sum as big-endian 16-bit words; an odd final
// byte is padded with zero. Pieces must have even length except the last.
constexpr std::uint32_t inet_sum(std::span<const std::uint8_t> data, std::uint32_t sum = 0) {
  std::size_t i = 0;
  for (; i + 1 < data.size(); i += 2) sum += static_cast<std::uint32_t>(data[i] << 8 | data[i + 1]);
  if (i < data.size()) sum += static_cast<std::uint32_t>(data[i] << 8);
  return sum;
}

constexpr std::uint16_t inet_fold(std::uint32_t sum) {
  while (sum >> 16) sum = (sum & 0xFFFF) + (sum >> 16);
  return static_cast<std::uint16_t>(~sum & 0xFFFF);
}

constexpr std::uint16_t inet_checksum(std::span<const std::uint8_t> data) { return inet_fold(inet_sum(data)); }

// Pseudo-header sum for a transport segment of `length` bytes and IP protocol `proto`.
// `src`/`dst` are 4 bytes (IPv4) or 16 bytes (IPv6).
constexpr std::uint32_t pseudo_header_sum(std::span<const std::uint8_t> src, std::span<const std::uint8_t> dst,
                                          std::uint8_t proto, std::uint32_t length) {
  std::uint32_t sum = inet_sum(src, inet_sum(dst));
  sum += proto;
  sum += length >> 16;
  sum += length & 0xFFFF;
  return sum;
}

}  // namespace wire
