// CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), computed as in RFC 3720 B.4:
// crc32c()'s dispatch and its SSE4.2 path. The slicing-by-8 crc32c_portable and the folding
// engine are shared with CRC-32 in crc32.cpp.
//
// Implementations, the best one the CPU has, capped by cap_crc_tier() (see detail::crc_tier()):
//  - "vpclmul+sse4.2": AVX-512 carry-less multiplication folding (16 bytes a cycle where
//    the crc32 instruction does 8) from kFoldFrom bytes on, the crc32 instruction below.
//  - "sse4.2": the SSE4.2 crc32 instruction, 8 bytes at a time. It has a latency of 3
//    cycles but a throughput of one per cycle, so a long input is cut into three equal
//    streams computed interleaved, whose CRCs are then recombined with two carry-less
//    multiplications (the method of Intel's "Fast CRC Computation for iSCSI Polynomial
//    Using CRC32 Instruction"). Compiled with a per-function target attribute, so the
//    library needs no global -m flags.
//  - "slice8": crc32c_portable.
#include <algorithm>
#include <array>
#include <cstring>
#include <string_view>

#include "wire/crc32.hpp"
#include "wire/crc_engine.hpp"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace wire {
namespace {

#if defined(__x86_64__)

constexpr std::uint32_t kPoly = 0x82F63B78u;

// Below this the recombination (about 15 cycles) eats most of what three streams gain;
// streams are capped so the shift-constant table stays small (2 KiB) and in cache.
constexpr std::size_t kMinStreamWords = 8;
constexpr std::size_t kMaxStreamWords = 256;
// Where AVX-512 folding overtakes the crc32 instruction (measured on Zen 4: about even from
// 64 to 127 bytes, then 12.5 vs 9.5 GB/s at 128, 33 vs 19 at 256, 50 vs 25 at 1 KiB).
constexpr std::size_t kFoldFrom = 128;

// The register multiplied by x^bits modulo the polynomial, one bit at a time. In the
// reflected representation bit 31 is the coefficient of x^0 and bit 0 that of x^31.
constexpr std::uint32_t mul_xpow(std::uint32_t c, std::size_t bits) {
  for (; bits > 0; --bits) c = (c & 1) ? (c >> 1) ^ kPoly : c >> 1;
  return c;
}

// kShift[w] moves a register over w 8-byte words: for a register a,
// crc32_u64(0, clmul(a, kShift[w])) == a x^(64 w) mod P. The carry-less product of two
// reflected 32-bit values is the product times x in reflected 64-bit form, and crc32_u64
// multiplies by x^32, hence the constant x^(64 w - 33).
constexpr auto kShift = [] {
  std::array<std::uint32_t, 2 * kMaxStreamWords + 1> k{};
  k[1] = mul_xpow(0x80000000u, 64 - 33);
  for (std::size_t w = 2; w < k.size(); ++w) k[w] = mul_xpow(k[w - 1], 64);
  return k;
}();

// Registers are kept 64 bits wide, as crc32_u64 takes and returns them, so the dependency
// chain has no zero-extending moves in it.
[[gnu::target("sse4.2,pclmul")]] std::uint64_t crc_word(std::uint64_t c, const std::uint8_t* p) {
  std::uint64_t v;
  std::memcpy(&v, p, sizeof v);
  return _mm_crc32_u64(c, v);
}

[[gnu::target("sse4.2,pclmul")]] std::uint64_t clmul(std::uint64_t a, std::uint32_t b) {
  const __m128i r =
      _mm_clmulepi64_si128(_mm_cvtsi64_si128(static_cast<long long>(a)), _mm_cvtsi32_si128(static_cast<int>(b)), 0x00);
  return static_cast<std::uint64_t>(_mm_cvtsi128_si64(r));
}

[[gnu::target("sse4.2,pclmul")]] std::uint32_t crc32c_sse42(std::span<const std::uint8_t> data, std::uint32_t prev) {
  const std::uint8_t* p = data.data();
  std::size_t n = data.size();
  std::uint64_t c = ~prev;
  while (n >= 3 * 8 * kMinStreamWords) {
    const std::size_t words = std::min(n / 24, kMaxStreamWords);
    const std::size_t stride = 8 * words;
    std::uint64_t c1 = 0, c2 = 0;
    for (const std::uint8_t* end = p + stride; p != end; p += 8) {
      c = crc_word(c, p);
      c1 = crc_word(c1, p + stride);
      c2 = crc_word(c2, p + 2 * stride);
    }
    // The register is linear: CRC(s0 s1 s2) = c0 x^(2 stride) + c1 x^(stride) + c2.
    c = _mm_crc32_u64(0, clmul(c, kShift[2 * words]) ^ clmul(c1, kShift[words])) ^ c2;
    p += 2 * stride;
    n -= 3 * stride;
  }
  for (; n >= 8; p += 8, n -= 8) c = crc_word(c, p);
  auto c32 = static_cast<std::uint32_t>(c);
  for (; n > 0; ++p, --n) c32 = _mm_crc32_u8(c32, *p);
  return ~c32;
}

std::uint32_t crc32c_wide(std::span<const std::uint8_t> data, std::uint32_t prev) {
  return data.size() < kFoldFrom ? crc32c_sse42(data, prev) : detail::crc32c_vpclmul(data, prev);
}

#endif

// By tier, looked up on every call since cap_crc_tier() may change the tier (constant, as in
// crc32.cpp, for callers during static initialisation).
const detail::CrcImplementation& chosen() {
  static constexpr detail::CrcImplementation kByTier[] = {
    {crc32c_portable, "slice8"},
#if defined(__x86_64__)
    {crc32c_sse42, "sse4.2"},
    {crc32c_sse42, "sse4.2"},  // avx2: the three crc32-instruction streams match 256-bit folding there
    {crc32c_wide, "vpclmul+sse4.2"},
#endif
  };
  return kByTier[static_cast<std::size_t>(detail::crc_tier())];  // always portable on other CPUs
}

}  // namespace

std::uint32_t crc32c(std::span<const std::uint8_t> data, std::uint32_t prev) { return chosen().fn(data, prev); }
std::string_view crc32c_implementation() { return chosen().name; }

}  // namespace wire
