// What crc32.cpp and crc32c.cpp share: the CPU check that picks a tier, the AVX-512
// folding engine crc32c borrows from crc32.cpp, and the shape of a chosen implementation.
// Internal to wire/ (tests and the benchmark use it to compare tiers).
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

#include "wire/crc32.hpp"

namespace wire::detail {

using wire::CrcTier;

// What the CPU offers, capped by cap_crc_tier().
CrcTier crc_tier();

// CRC32c by AVX-512 carry-less multiplication folding; only when crc_tier() is avx512.
std::uint32_t crc32c_vpclmul(std::span<const std::uint8_t> data, std::uint32_t prev);

// The implementation crc32() or crc32c() chose, and its name for *_implementation().
struct CrcImplementation {
  std::uint32_t (*fn)(std::span<const std::uint8_t>, std::uint32_t);
  std::string_view name;
};

}  // namespace wire::detail
