// 24-bit packet sequence numbers (IBTA vol. 1 s9.7.1): arithmetic modulo 2^24, and ordering
// by the signed distance, valid while two PSNs are less than 2^23 apart.
#pragma once

#include <cstdint>

namespace softrdma::core {

inline constexpr std::uint32_t kPsnMask = 0xFFFFFF;

constexpr std::uint32_t psn_add(std::uint32_t psn, std::uint32_t n) { return (psn + n) & kPsnMask; }

// a - b as a signed distance in [-2^23, 2^23).
constexpr std::int32_t psn_diff(std::uint32_t a, std::uint32_t b) {
  const std::uint32_t d = (a - b) & kPsnMask;
  return d >= 0x800000 ? static_cast<std::int32_t>(d) - 0x1000000 : static_cast<std::int32_t>(d);
}

}  // namespace softrdma::core
