// UninitialisedBytes: the byte buffer the iWARP host, the capture stage and the daemon's DMA
// staging queue bytes in. resize() may leave new bytes unset, but never loses those it keeps.
#include "emulator/core/uninitialised_bytes.hpp"

#include <catch2/catch.hpp>
#include <cstdint>
#include <numeric>
#include <vector>

namespace {

using softrdma::core::UninitialisedBytes;

std::vector<std::uint8_t> contents(const UninitialisedBytes& b) { return {b.begin(), b.end()}; }

std::vector<std::uint8_t> counting(std::size_t n) {
  std::vector<std::uint8_t> v(n);
  std::iota(v.begin(), v.end(), std::uint8_t{1});
  return v;
}

TEST_CASE("UninitialisedBytes keeps its bytes as it grows and shrinks", "[uninitialised_bytes]") {
  const std::vector<std::uint8_t> first = counting(100);
  UninitialisedBytes b;
  CHECK(b.empty());
  b.append(first.data(), first.data() + first.size());
  b.resize(5000);  // reallocates: the first 100 bytes move with it
  REQUIRE(b.size() == 5000);
  b.resize(100);
  CHECK(contents(b) == first);
  b.clear();
  CHECK(b.empty());
  b.append(first.data(), first.data() + 3);
  CHECK(contents(b) == std::vector<std::uint8_t>{1, 2, 3});
}

TEST_CASE("UninitialisedBytes drops a prefix", "[uninitialised_bytes]") {
  const std::vector<std::uint8_t> bytes = counting(10);
  UninitialisedBytes b(bytes.data(), bytes.data() + bytes.size());
  b.erase_front(4);
  CHECK(contents(b) == std::vector<std::uint8_t>(bytes.begin() + 4, bytes.end()));
  b.erase_front(0);
  CHECK(b.size() == 6);
  b.erase_front(6);
  CHECK(b.empty());
}

TEST_CASE("UninitialisedBytes copies and moves whole", "[uninitialised_bytes]") {
  const std::vector<std::uint8_t> bytes = counting(64);
  UninitialisedBytes a(bytes.data(), bytes.data() + bytes.size());
  UninitialisedBytes copy = a;
  CHECK(contents(copy) == bytes);
  CHECK(copy.data() != a.data());
  UninitialisedBytes moved = std::move(a);
  CHECK(contents(moved) == bytes);
  CHECK(a.empty());  // the move leaves it empty, ready for reuse
  a = moved;
  CHECK(contents(a) == bytes);
  UninitialisedBytes sized(32);
  CHECK(sized.size() == 32);
}

}  // namespace
