// SOFTRDMA_CRC: "avx2", "sse" or "portable" caps the CRC code of wire/ at the 256-bit, the
// 128-bit or the table tier, so tests and benchmarks can compare the tiers on one machine.
// Unset, empty or any other value: no cap. Read here because wire/ reads no environment; each
// program that computes CRCs applies it as it starts (the shim, softrdmad, softrdma, wire_tests,
// the benchmarks).
#pragma once

#include <optional>
#include <string_view>

#include "wire/crc32.hpp"

namespace softrdma::host {

inline constexpr const char* kCrcVariable = "SOFTRDMA_CRC";

// The cap a value of SOFTRDMA_CRC names; nullopt for no cap.
std::optional<wire::CrcTier> parse_crc_cap(std::string_view value);

// Reads SOFTRDMA_CRC and passes its cap, if any, to wire::cap_crc_tier().
void apply_crc_variable();

}  // namespace softrdma::host
