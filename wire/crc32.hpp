// The two CRCs RDMA wire formats use, at memory speed where the CPU allows.
//
// crc32:  CRC-32 of IEEE 802.3 / zlib (reflected polynomial 0xEDB88320). The RoCE ICRC is
//         this CRC (IBTA vol. 1 s7.8.1; the masking is in icrc.hpp).
// crc32c: CRC-32C Castagnoli (reflected polynomial 0x82F63B78), the MPA FPDU CRC
//         (RFC 5044 s4.4, computed as in RFC 3720 B.4).
//
// Both chain like zlib's crc32(): crc32(b, crc32(a)) == crc32(a ++ b), starting from 0.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

namespace wire {

std::uint32_t crc32(std::span<const std::uint8_t> data, std::uint32_t prev = 0);
std::uint32_t crc32c(std::span<const std::uint8_t> data, std::uint32_t prev = 0);

// The table-driven (slicing-by-8) versions: what runs on CPUs without the instructions, or
// everywhere when the environment has SOFTRDMA_CRC=portable (see detail::crc_tier()).
std::uint32_t crc32_portable(std::span<const std::uint8_t> data, std::uint32_t prev = 0);
std::uint32_t crc32c_portable(std::span<const std::uint8_t> data, std::uint32_t prev = 0);

// Which implementation crc32()/crc32c() chose at first use: crc32 "vpclmul" (AVX-512),
// "pclmul" or "slice8"; crc32c "vpclmul+sse4.2", "sse4.2" or "slice8".
std::string_view crc32_implementation();
std::string_view crc32c_implementation();

// Internal to crc32.cpp and crc32c.cpp, which share the CPU check and the folding engine.
namespace detail {

enum class CrcTier : std::uint8_t { portable, sse, avx512 };

// What the CPU offers (sse: SSE4.2 and PCLMULQDQ; avx512: also AVX-512F and VPCLMULQDQ),
// capped by the environment variable SOFTRDMA_CRC, read once: "portable" (the tables) or
// "sse" (no AVX-512), so tests and benchmarks can compare the implementations.
CrcTier crc_tier();

// CRC32c by AVX-512 carry-less multiplication folding; only when crc_tier() is avx512.
std::uint32_t crc32c_vpclmul(std::span<const std::uint8_t> data, std::uint32_t prev);

}  // namespace detail

}  // namespace wire
