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

// The byte-at-a-time versions: the reference the fast paths are tested against, and what
// runs on CPUs without the instructions.
std::uint32_t crc32_portable(std::span<const std::uint8_t> data, std::uint32_t prev = 0);
std::uint32_t crc32c_portable(std::span<const std::uint8_t> data, std::uint32_t prev = 0);

// Which implementation crc32()/crc32c() chose at start-up, e.g. "pclmul" or "portable".
std::string_view crc32_implementation();
std::string_view crc32c_implementation();

}  // namespace wire
