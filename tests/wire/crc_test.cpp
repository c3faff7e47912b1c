// crc32/crc32c (whichever implementation was chosen) and the slicing-by-8 fallbacks against a
// bit-at-a-time reference that shares no code or tables with them. ctest runs these cases
// again with SOFTRDMA_CRC=avx2, =sse and =portable, which this binary applies as the programs do.
#include <catch2/catch.hpp>
#include <cstdint>
#include <cstdlib>
#include <random>
#include <span>
#include <string_view>
#include <vector>

#include "emulator/host/crc_setting.hpp"
#include "wire/crc32.hpp"
#include "wire/crc_engine.hpp"

namespace {

using Bytes = std::span<const std::uint8_t>;
using CrcFn = std::uint32_t (*)(Bytes, std::uint32_t);

constexpr std::uint32_t kCrc32Poly = 0xEDB88320u;
constexpr std::uint32_t kCrc32cPoly = 0x82F63B78u;

std::uint32_t reference(std::uint32_t poly, Bytes data, std::uint32_t prev = 0) {
  std::uint32_t c = ~prev;
  for (std::uint8_t b : data) {
    c ^= b;
    for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ poly : c >> 1;
  }
  return ~c;
}

struct Algorithm {
  const char* name;
  CrcFn fn;
  std::uint32_t poly;
};
// The public functions, and the AVX-512 CRC32c engine on its own where the CPU has it
// (crc32c() gives it only inputs of 128 bytes and more).
const std::vector<Algorithm> kAlgorithms = [] {
  softrdma::host::apply_crc_variable();  // before anything here reads the tier
  std::vector<Algorithm> v = {
      {"crc32", wire::crc32, kCrc32Poly},
      {"crc32_portable", wire::crc32_portable, kCrc32Poly},
      {"crc32c", wire::crc32c, kCrc32cPoly},
      {"crc32c_portable", wire::crc32c_portable, kCrc32cPoly},
  };
#if defined(__x86_64__)
  if (wire::detail::crc_tier() == wire::detail::CrcTier::avx512)
    v.push_back({"detail::crc32c_vpclmul", wire::detail::crc32c_vpclmul, kCrc32cPoly});
#endif
  return v;
}();

Bytes bytes(std::string_view s) { return {reinterpret_cast<const std::uint8_t*>(s.data()), s.size()}; }

std::vector<std::uint8_t> random_bytes(std::mt19937& rng, std::size_t n) {
  std::uniform_int_distribution<int> byte(0, 255);
  std::vector<std::uint8_t> v(n);
  for (auto& b : v) b = static_cast<std::uint8_t>(byte(rng));
  return v;
}

std::string_view crc_env() {
  const char* env = std::getenv("SOFTRDMA_CRC");
  return env != nullptr ? env : "";
}

}  // namespace

TEST_CASE("CRC check values of \"123456789\"", "[wire][crc]") {
  for (const auto& a : kAlgorithms) {
    INFO(a.name);
    const std::uint32_t want = a.poly == kCrc32Poly ? 0xCBF43926u : 0xE3069283u;
    CHECK(a.fn(bytes("123456789"), 0) == want);
    CHECK(reference(a.poly, bytes("123456789")) == want);
    CHECK(a.fn({}, 0) == 0);
    CHECK(a.fn({}, 0x12345678u) == 0x12345678u);
  }
}

TEST_CASE("CRC32c matches the RFC 3720 B.4 examples", "[wire][crc]") {
  std::vector<std::uint8_t> zeros(32, 0x00), ones(32, 0xFF), up(32), down(32);
  for (std::uint8_t i = 0; i < 32; ++i) {
    up[i] = i;
    down[i] = static_cast<std::uint8_t>(31 - i);
  }
  for (CrcFn fn : {wire::crc32c, wire::crc32c_portable}) {
    CHECK(fn(zeros, 0) == 0x8A9136AAu);
    CHECK(fn(ones, 0) == 0x62A8AB43u);
    CHECK(fn(up, 0) == 0x46DD794Eu);
    CHECK(fn(down, 0) == 0x113FDB5Cu);
  }
}

TEST_CASE("CRC implementations follow the CPU tier and SOFTRDMA_CRC", "[wire][crc]") {
  using wire::detail::CrcTier;
  const CrcTier tier = wire::detail::crc_tier();
  if (crc_env() == "portable") CHECK(tier == CrcTier::portable);
  if (crc_env() == "sse") CHECK((tier == CrcTier::sse || tier == CrcTier::portable));
  if (crc_env() == "avx2") CHECK(tier != CrcTier::avx512);
  switch (tier) {
    case CrcTier::avx512:
      CHECK(wire::crc32_implementation() == "vpclmul");
      CHECK(wire::crc32c_implementation() == "vpclmul+sse4.2");
      break;
    case CrcTier::avx2:
      CHECK(wire::crc32_implementation() == "vpclmul256");
      CHECK(wire::crc32c_implementation() == "sse4.2");
      break;
    case CrcTier::sse:
      CHECK(wire::crc32_implementation() == "pclmul");
      CHECK(wire::crc32c_implementation() == "sse4.2");
      break;
    case CrcTier::portable:
      CHECK(wire::crc32_implementation() == "slice8");
      CHECK(wire::crc32c_implementation() == "slice8");
      break;
  }
  WARN("crc32: " << wire::crc32_implementation() << ", crc32c: " << wire::crc32c_implementation());
}

TEST_CASE("SOFTRDMA_CRC names the tiers it caps at", "[wire][crc]") {
  using softrdma::host::parse_crc_cap;
  CHECK(parse_crc_cap("portable") == wire::CrcTier::portable);
  CHECK(parse_crc_cap("sse") == wire::CrcTier::sse);
  CHECK(parse_crc_cap("avx2") == wire::CrcTier::avx2);
  CHECK_FALSE(parse_crc_cap(""));
  CHECK_FALSE(parse_crc_cap("avx512"));
  CHECK_FALSE(parse_crc_cap("SSE"));
}

TEST_CASE("cap_crc_tier changes the implementation from the next call on", "[wire][crc]") {
  const wire::CrcTier before = wire::detail::crc_tier();
  wire::cap_crc_tier(wire::CrcTier::portable);
  CHECK(wire::detail::crc_tier() == wire::CrcTier::portable);
  CHECK(wire::crc32_implementation() == "slice8");
  CHECK(wire::crc32c_implementation() == "slice8");
  CHECK(wire::crc32(bytes("123456789")) == 0xCBF43926u);
  wire::cap_crc_tier(before);  // the tier the CPU and SOFTRDMA_CRC gave, for the cases after this one
  CHECK(wire::detail::crc_tier() == before);
}

// Every length through the small-input paths, the lane folds and the three-stream split,
// at every alignment, each read from the end of its own allocation so AddressSanitizer
// catches a read past it.
TEST_CASE("CRCs match the reference at every length 0..1100 and alignment", "[wire][crc]") {
  std::mt19937 rng(3720);
  std::uniform_int_distribution<std::size_t> offset(0, 15);
  std::uniform_int_distribution<std::uint32_t> any;
  for (std::size_t len = 0; len <= 1100; ++len) {
    const std::size_t off = offset(rng);
    const std::vector<std::uint8_t> buf = random_bytes(rng, off + len);
    const Bytes data(buf.data() + off, len);
    const std::uint32_t prev = len % 2 ? any(rng) : 0;
    for (const auto& a : kAlgorithms) {
      INFO(a.name << " length " << len << " offset " << off << " prev " << prev);
      REQUIRE(a.fn(data, prev) == reference(a.poly, data, prev));
    }
  }
}

TEST_CASE("CRCs match the reference on large buffers", "[wire][crc]") {
  std::mt19937 rng(5044);
  for (std::size_t len : {std::size_t{64} << 10, (std::size_t{1} << 20) + 3}) {
    const std::vector<std::uint8_t> buf = random_bytes(rng, len + 1);
    for (const Bytes data : {Bytes(buf).first(len), Bytes(buf).subspan(1)}) {
      for (const auto& a : kAlgorithms) {
        INFO(a.name << " length " << len << " aligned " << (data.data() == buf.data()));
        CHECK(a.fn(data, 0) == reference(a.poly, data));
      }
    }
  }
}

TEST_CASE("CRCs chain: crc(b, crc(a)) == crc(a ++ b)", "[wire][crc]") {
  std::mt19937 rng(802);
  std::uniform_int_distribution<std::size_t> length(0, 20000);
  for (int round = 0; round < 50; ++round) {
    const std::vector<std::uint8_t> buf = random_bytes(rng, length(rng));
    const Bytes all(buf);
    const std::size_t split = std::uniform_int_distribution<std::size_t>(0, all.size())(rng);
    for (const auto& a : kAlgorithms) {
      INFO(a.name << " length " << all.size() << " split " << split);
      CHECK(a.fn(all.subspan(split), a.fn(all.first(split), 0)) == a.fn(all, 0));
    }
  }
}
