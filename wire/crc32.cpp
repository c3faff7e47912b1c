// The CRC engines, generic over the reflected 32-bit polynomial, and crc32()'s dispatch.
// crc32c.cpp adds the SSE4.2 crc32-instruction path and crc32c()'s dispatch.
//
// Engines, the best one the CPU has, capped by cap_crc_tier() (see detail::crc_tier()):
//  - "pclmul": carry-less multiplication folding, the method of Intel's "Fast CRC
//    Computation for Generic Polynomials Using PCLMULQDQ Instruction" (2009): four 128-bit
//    lanes folded 64 bytes at a time, folded into one, then reduced to 32 bits with two
//    more folds and a Barrett reduction.
//  - "vpclmul": the same folding with AVX-512 VPCLMULQDQ, four lanes per instruction, 128
//    bytes a step. Where PCLMULQDQ issues only every other cycle (Zen 4) this is what
//    reaches memory speed: 16 bytes a cycle against 4.
//  - "vpclmul256": VPCLMULQDQ on 256-bit registers, two lanes per instruction, for CPUs with
//    VPCLMULQDQ and AVX2 but no AVX-512 (Zen 3): 4 KiB at 2x "pclmul" on such an EPYC.
//  - "slice8": slicing-by-8 tables, for any CPU.
// The fast paths are compiled with per-function target attributes, so the library needs no
// global -m flags and runs on any x86-64 (or other) CPU.
#include "wire/crc32.hpp"

#include <array>
#include <atomic>
#include <string_view>

#include "wire/crc_engine.hpp"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace wire {
namespace {

constexpr std::uint32_t kCrc32Poly = 0xEDB88320u;
constexpr std::uint32_t kCrc32cPoly = 0x82F63B78u;

// The CRC register multiplied by x^bits modulo the polynomial, one bit at a time. In the
// reflected representation bit 31 is the coefficient of x^0 and bit 0 that of x^31.
template <std::uint32_t Poly>
constexpr std::uint32_t mul_xpow(std::uint32_t c, std::size_t bits) {
  for (; bits > 0; --bits) c = (c & 1) ? (c >> 1) ^ Poly : c >> 1;
  return c;
}

// Slicing-by-8: kTables[k][b] is the register after byte b followed by k zero bytes, so one
// step folds 8 input bytes with 8 independent lookups.
using Tables = std::array<std::array<std::uint32_t, 256>, 8>;
template <std::uint32_t Poly>
constexpr Tables make_tables() {
  Tables t{};
  for (std::uint32_t b = 0; b < 256; ++b) t[0][b] = mul_xpow<Poly>(b, 8);
  for (std::size_t k = 1; k < 8; ++k)
    for (std::size_t b = 0; b < 256; ++b) t[k][b] = (t[k - 1][b] >> 8) ^ t[0][t[k - 1][b] & 0xFF];
  return t;
}
template <std::uint32_t Poly>
constexpr Tables kTables = make_tables<Poly>();

// Registers here are the complemented CRC values, as the polynomial arithmetic sees them.
template <std::uint32_t Poly>
std::uint32_t slice8(const std::uint8_t* p, std::size_t n, std::uint32_t c) {
  const Tables& t = kTables<Poly>;
  for (; n >= 8; p += 8, n -= 8) {
    c ^= std::uint32_t{p[0]} | std::uint32_t{p[1]} << 8 | std::uint32_t{p[2]} << 16 | std::uint32_t{p[3]} << 24;
    c = t[7][c & 0xFF] ^ t[6][(c >> 8) & 0xFF] ^ t[5][(c >> 16) & 0xFF] ^ t[4][c >> 24] ^ t[3][p[4]] ^ t[2][p[5]] ^
        t[1][p[6]] ^ t[0][p[7]];
  }
  for (; n > 0; ++p, --n) c = t[0][(c ^ *p) & 0xFF] ^ (c >> 8);
  return c;
}

#if defined(__x86_64__)

// A 16-byte lane loaded little-endian is a polynomial whose bit k is the coefficient of
// x^(127-k) (reflected: the first byte's low bit is the highest power). The register after
// a message M is M x^32 mod P, so a lane lying D bits before another may be replaced by its
// product with x^D, reduced to fewer bits modulo P, and XORed into that one: a fold.
//
// For a 64-bit half h (bit i the coefficient of x^(63-i)) and a multiplier holding a
// reflected 32-bit g in its top half, the 128-bit carry-less product read as a lane is
// h g x, of degree < 96. multiplier(m) holds g = x^(m-1) mod P, making the product
// congruent to h x^m.
template <std::uint32_t Poly>
consteval std::uint64_t multiplier(std::size_t m) {
  return std::uint64_t{mul_xpow<Poly>(0x80000000u, m - 1)} << 32;
}

// Multipliers for a lane's low half (its first 8 bytes, weight x^64 within the lane) and
// its high half, which the clmul selectors 0x00 and 0x11 pair with them.
struct LaneMultipliers {
  std::uint64_t lo, hi;
};
template <std::uint32_t Poly>
consteval LaneMultipliers fold_by(std::size_t bits) {
  return {multiplier<Poly>(bits + 64), multiplier<Poly>(bits)};
}

// Barrett reduction of a 64-bit R to R mod P uses P and mu = floor(x^64 / P), both of
// degree 32, here as reflected 33-bit values (bit j the coefficient of x^(32-j)).
constexpr std::uint64_t reflect33(std::uint64_t v) {
  std::uint64_t r = 0;
  for (int i = 0; i < 33; ++i) r |= ((v >> i) & 1) << (32 - i);
  return r;
}
template <std::uint32_t Poly>
constexpr std::uint64_t kP33 = std::uint64_t{Poly} << 1 | 1;
template <std::uint32_t Poly>
constexpr std::uint64_t kMu33 = [] {
  const std::uint64_t p = reflect33(kP33<Poly>);  // normal order: bit d is x^d
  std::uint64_t q = std::uint64_t{1} << 32;       // x^64 = x^32 P + (P - x^32) x^32
  std::uint64_t rem = (p & 0xFFFFFFFFu) << 32;
  for (int d = 63; d >= 32; --d) {
    if ((rem >> d) & 1) {
      q |= std::uint64_t{1} << (d - 32);
      rem ^= p << (d - 32);
    }
  }
  return reflect33(q);
}();
static_assert(kP33<kCrc32Poly> == 0x1DB710641u && kMu33<kCrc32Poly> == 0x1F7011641u,
              "CRC-32's P' and mu' as the Intel paper lists them");

#define SOFTRDMA_SSE [[gnu::target("sse4.2,pclmul")]]
#define SOFTRDMA_AVX512 [[gnu::target("avx512f,vpclmulqdq,sse4.2,pclmul")]]
#define SOFTRDMA_AVX2 [[gnu::target("avx2,vpclmulqdq,sse4.2,pclmul")]]

SOFTRDMA_SSE __m128i load(const std::uint8_t* p) { return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p)); }

SOFTRDMA_SSE __m128i to_m128(LaneMultipliers k) {
  return _mm_set_epi64x(static_cast<long long>(k.hi), static_cast<long long>(k.lo));
}

// x moved forward by the distance k was made for, XORed into the lane found there.
SOFTRDMA_SSE __m128i fold(__m128i x, __m128i k, __m128i there) {
  return _mm_xor_si128(_mm_xor_si128(_mm_clmulepi64_si128(x, k, 0x00), _mm_clmulepi64_si128(x, k, 0x11)), there);
}

SOFTRDMA_SSE std::uint64_t clmul(std::uint64_t a, std::uint64_t b) {
  const __m128i r = _mm_clmulepi64_si128(_mm_cvtsi64_si128(static_cast<long long>(a)),
                                         _mm_cvtsi64_si128(static_cast<long long>(b)), 0x00);
  return static_cast<std::uint64_t>(_mm_cvtsi128_si64(r));
}

// The register for a message ending with lane x: x x^32 mod P.
template <std::uint32_t Poly>
SOFTRDMA_SSE std::uint32_t reduce(__m128i x) {
  if constexpr (Poly == kCrc32cPoly) {  // the crc32 instruction does it in two steps
    const auto lo = static_cast<std::uint64_t>(_mm_cvtsi128_si64(x));
    const auto hi = static_cast<std::uint64_t>(_mm_extract_epi64(x, 1));
    return static_cast<std::uint32_t>(_mm_crc32_u64(_mm_crc32_u64(0, lo), hi));
  }
  const __m128i k = to_m128({multiplier<Poly>(96), multiplier<Poly>(64)});
  // x x^32 = lo x^96 + hi x^32: lo folds by 96 bits, hi moves to bits 32..95. Degree < 96.
  __m128i v = _mm_xor_si128(_mm_clmulepi64_si128(x, k, 0x00), _mm_slli_si128(_mm_srli_si128(x, 8), 4));
  // v = t x^64 + r with t in bits 32..63: t folds by 64 bits into r, the high half.
  v = _mm_xor_si128(_mm_clmulepi64_si128(v, k, 0x10), v);
  const auto r = static_cast<std::uint64_t>(_mm_extract_epi64(v, 1));
  // Barrett: the quotient r / P is the top 32 bits of (r / x^32) mu; r mod P = r - q P.
  const std::uint64_t q = clmul(r & 0xFFFFFFFFu, kMu33<Poly>) & 0xFFFFFFFFu;
  return static_cast<std::uint32_t>((r ^ clmul(q, kP33<Poly>)) >> 32);
}

// Folds the remaining 16-byte blocks into x, reduces, and runs the last bytes through the
// tables.
template <std::uint32_t Poly>
SOFTRDMA_SSE std::uint32_t finish(__m128i x, const std::uint8_t* p, std::size_t n) {
  const __m128i k128 = to_m128(fold_by<Poly>(128));
  for (; n >= 16; p += 16, n -= 16) x = fold(x, k128, load(p));
  return slice8<Poly>(p, n, reduce<Poly>(x));
}

template <std::uint32_t Poly>
SOFTRDMA_SSE std::uint32_t crc_pclmul(std::span<const std::uint8_t> data, std::uint32_t prev) {
  const std::uint8_t* p = data.data();
  std::size_t n = data.size();
  if (n < 16) return ~slice8<Poly>(p, n, ~prev);

  // XORing the starting register into the first 4 bytes is the same as starting from it.
  __m128i x = _mm_xor_si128(load(p), _mm_cvtsi32_si128(static_cast<int>(~prev)));
  p += 16;
  n -= 16;
  if (n >= 48) {
    // Four independent lanes hide PCLMULQDQ's latency.
    const __m128i k512 = to_m128(fold_by<Poly>(512)), k128 = to_m128(fold_by<Poly>(128));
    __m128i x1 = load(p), x2 = load(p + 16), x3 = load(p + 32);
    p += 48;
    n -= 48;
    for (; n >= 64; p += 64, n -= 64) {
      x = fold(x, k512, load(p));
      x1 = fold(x1, k512, load(p + 16));
      x2 = fold(x2, k512, load(p + 32));
      x3 = fold(x3, k512, load(p + 48));
    }
    x = fold(fold(fold(x, k128, x1), k128, x2), k128, x3);
  }
  return ~finish<Poly>(x, p, n);
}

SOFTRDMA_AVX512 __m512i broadcast(LaneMultipliers k) {
  const auto lo = static_cast<long long>(k.lo), hi = static_cast<long long>(k.hi);
  return _mm512_set_epi64(hi, lo, hi, lo, hi, lo, hi, lo);
}

// The 128-bit lane I of v. The zero-masking form with all lanes selected is the plain
// instruction; GCC 12's unmasked extract and cast intrinsics trip -Wmaybe-uninitialized.
template <int I>
SOFTRDMA_AVX512 __m128i lane(__m512i v) {
  return _mm512_maskz_extracti32x4_epi32(0xF, v, I);
}

SOFTRDMA_AVX512 __m512i fold(__m512i x, __m512i k, __m512i there) {
  return _mm512_ternarylogic_epi64(_mm512_clmulepi64_epi128(x, k, 0x00), _mm512_clmulepi64_epi128(x, k, 0x11), there,
                                   0x96);  // a ^ b ^ c
}

// The same folding, each instruction on the four lanes of a 512-bit register, 64 bytes a
// register. Inputs under 64 bytes go to crc_pclmul.
template <std::uint32_t Poly>
SOFTRDMA_AVX512 std::uint32_t crc_vpclmul(std::span<const std::uint8_t> data, std::uint32_t prev) {
  const std::uint8_t* p = data.data();
  std::size_t n = data.size();
  if (n < 64) return crc_pclmul<Poly>(data, prev);

  const __m512i k512 = broadcast(fold_by<Poly>(512));
  __m512i x =
      _mm512_xor_si512(_mm512_loadu_si512(p), _mm512_zextsi128_si512(_mm_cvtsi32_si128(static_cast<int>(~prev))));
  p += 64;
  n -= 64;
  if (n >= 128) {
    // Two independent registers hide VPCLMULQDQ's latency.
    const __m512i k1024 = broadcast(fold_by<Poly>(1024));
    __m512i x1 = _mm512_loadu_si512(p);
    p += 64;
    n -= 64;
    for (; n >= 128; p += 128, n -= 128) {
      x = fold(x, k1024, _mm512_loadu_si512(p));
      x1 = fold(x1, k1024, _mm512_loadu_si512(p + 64));
    }
    x = fold(x, k512, x1);
  }
  for (; n >= 64; p += 64, n -= 64) x = fold(x, k512, _mm512_loadu_si512(p));

  // x's four lanes lie 384, 256, 128 and 0 bits before the end of the last: fold the first
  // three by those distances (the last one's multipliers are zero) and XOR all four.
  constexpr LaneMultipliers k384 = fold_by<Poly>(384), k256 = fold_by<Poly>(256), k128 = fold_by<Poly>(128);
  const __m512i k = _mm512_set_epi64(0, 0, static_cast<long long>(k128.hi), static_cast<long long>(k128.lo),
                                     static_cast<long long>(k256.hi), static_cast<long long>(k256.lo),
                                     static_cast<long long>(k384.hi), static_cast<long long>(k384.lo));
  const __m512i y = fold(x, k, _mm512_maskz_mov_epi64(0xC0, x));
  const __m128i last = _mm_xor_si128(_mm_xor_si128(lane<0>(y), lane<1>(y)), _mm_xor_si128(lane<2>(y), lane<3>(y)));
  return ~finish<Poly>(last, p, n);
}

SOFTRDMA_AVX2 __m256i broadcast256(LaneMultipliers k) {
  return _mm256_set_epi64x(static_cast<long long>(k.hi), static_cast<long long>(k.lo), static_cast<long long>(k.hi),
                           static_cast<long long>(k.lo));
}

SOFTRDMA_AVX2 __m256i load256(const std::uint8_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }

SOFTRDMA_AVX2 __m256i fold(__m256i x, __m256i k, __m256i there) {
  return _mm256_xor_si256(_mm256_xor_si256(_mm256_clmulepi64_epi128(x, k, 0x00), _mm256_clmulepi64_epi128(x, k, 0x11)),
                          there);
}

// The same folding on the two lanes of a 256-bit register, four registers (128 bytes) a
// step to hide the latency. Inputs under 128 bytes go to crc_pclmul.
template <std::uint32_t Poly>
SOFTRDMA_AVX2 std::uint32_t crc_vpclmul256(std::span<const std::uint8_t> data, std::uint32_t prev) {
  const std::uint8_t* p = data.data();
  std::size_t n = data.size();
  if (n < 128) return crc_pclmul<Poly>(data, prev);

  const __m256i k1024 = broadcast256(fold_by<Poly>(1024)), k256 = broadcast256(fold_by<Poly>(256));
  __m256i x0 = _mm256_xor_si256(load256(p), _mm256_zextsi128_si256(_mm_cvtsi32_si128(static_cast<int>(~prev))));
  __m256i x1 = load256(p + 32), x2 = load256(p + 64), x3 = load256(p + 96);
  p += 128;
  n -= 128;
  for (; n >= 128; p += 128, n -= 128) {
    x0 = fold(x0, k1024, load256(p));
    x1 = fold(x1, k1024, load256(p + 32));
    x2 = fold(x2, k1024, load256(p + 64));
    x3 = fold(x3, k1024, load256(p + 96));
  }
  __m256i x = fold(fold(fold(x0, k256, x1), k256, x2), k256, x3);
  for (; n >= 32; p += 32, n -= 32) x = fold(x, k256, load256(p));
  // The low lane lies 128 bits before the high one.
  const __m128i last = fold(_mm256_castsi256_si128(x), to_m128(fold_by<Poly>(128)), _mm256_extracti128_si256(x, 1));
  // GCC emits no vzeroupper for a per-function AVX2 target: without one, the SSE code after
  // this (the tail here, the caller's) ran with dirty upper halves, and an ICRC of 1 KiB took
  // 210 ns instead of 60.
  _mm256_zeroupper();
  return ~finish<Poly>(last, p, n);
}

#undef SOFTRDMA_SSE
#undef SOFTRDMA_AVX512
#undef SOFTRDMA_AVX2
#endif

// By tier, looked up on every call since cap_crc_tier() may change the tier. Constant, like the
// tier's atomic, so a caller running during another file's static initialisation finds them set.
const detail::CrcImplementation& chosen() {
  static constexpr detail::CrcImplementation kByTier[] = {
    {crc32_portable, "slice8"},
#if defined(__x86_64__)
    {crc_pclmul<kCrc32Poly>, "pclmul"},
    {crc_vpclmul256<kCrc32Poly>, "vpclmul256"},
    {crc_vpclmul<kCrc32Poly>, "vpclmul"},
#endif
  };
  return kByTier[static_cast<std::size_t>(detail::crc_tier())];  // always portable on other CPUs
}

// What the CPU offers up to `cap`.
CrcTier tier_under(CrcTier cap) {
  if (cap == CrcTier::portable) return CrcTier::portable;
#if defined(__x86_64__)
  __builtin_cpu_init();
  if (!__builtin_cpu_supports("sse4.2") || !__builtin_cpu_supports("pclmul")) return CrcTier::portable;
  if (cap == CrcTier::sse || !__builtin_cpu_supports("vpclmulqdq")) return CrcTier::sse;
  if (cap == CrcTier::avx2 || !__builtin_cpu_supports("avx512f")) {
    return __builtin_cpu_supports("avx2") ? CrcTier::avx2 : CrcTier::sse;
  }
  return CrcTier::avx512;
#else
  return CrcTier::portable;
#endif
}

// The tier in use; -1 until the first CRC or cap_crc_tier(), whichever comes first, sets it.
std::atomic<int> the_tier{-1};

}  // namespace

void cap_crc_tier(CrcTier cap) { the_tier.store(static_cast<int>(tier_under(cap)), std::memory_order_relaxed); }

namespace detail {

CrcTier crc_tier() {
  int tier = the_tier.load(std::memory_order_relaxed);
  if (tier < 0) {
    const int best = static_cast<int>(tier_under(CrcTier::avx512));
    // On failure `tier` becomes what a cap_crc_tier() in another thread set meanwhile, which wins.
    if (the_tier.compare_exchange_strong(tier, best, std::memory_order_relaxed)) tier = best;
  }
  return static_cast<CrcTier>(tier);
}

#if defined(__x86_64__)
std::uint32_t crc32c_vpclmul(std::span<const std::uint8_t> data, std::uint32_t prev) {
  return crc_vpclmul<kCrc32cPoly>(data, prev);
}
#endif

}  // namespace detail

std::uint32_t crc32_portable(std::span<const std::uint8_t> data, std::uint32_t prev) {
  return ~slice8<kCrc32Poly>(data.data(), data.size(), ~prev);
}
std::uint32_t crc32c_portable(std::span<const std::uint8_t> data, std::uint32_t prev) {
  return ~slice8<kCrc32cPoly>(data.data(), data.size(), ~prev);
}

std::uint32_t crc32(std::span<const std::uint8_t> data, std::uint32_t prev) { return chosen().fn(data, prev); }
std::string_view crc32_implementation() { return chosen().name; }

}  // namespace wire
