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
// everywhere when the tier is capped at portable (cap_crc_tier()).
std::uint32_t crc32_portable(std::span<const std::uint8_t> data, std::uint32_t prev = 0);
std::uint32_t crc32c_portable(std::span<const std::uint8_t> data, std::uint32_t prev = 0);

// The widest code crc32()/crc32c() may use: the tables; SSE4.2 and PCLMULQDQ; also AVX2 and
// VPCLMULQDQ; also AVX-512F.
enum class CrcTier : std::uint8_t { portable, sse, avx2, avx512 };

// Caps the tier from the next call on (avx512: no cap, the CPU's best), so tests and benchmarks
// can compare the tiers on one machine. wire/ reads no configuration: the program passes it
// in (SOFTRDMA_CRC, emulator/host/crc_setting.hpp). Every tier gives the same CRCs, so a cap
// set while other threads compute them changes only their speed.
void cap_crc_tier(CrcTier cap);

// Which implementation crc32()/crc32c() use: crc32 "vpclmul" (AVX-512), "vpclmul256",
// "pclmul" or "slice8"; crc32c "vpclmul+sse4.2", "sse4.2" or "slice8".
std::string_view crc32_implementation();
std::string_view crc32c_implementation();

}  // namespace wire
