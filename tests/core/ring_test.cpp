// Ring: the send queue's FIFO. Order must survive wrapping round the array and growing it, and
// a popped slot handed out again keeps the capacity its vector had.
#include "emulator/core/ring.hpp"

#include <catch2/catch.hpp>
#include <vector>

namespace {

using softrdma::core::Ring;

std::vector<int> contents(const Ring<int>& r) {
  std::vector<int> out;
  for (const int v : r) out.push_back(v);
  return out;
}

}  // namespace

TEST_CASE("a ring keeps first-in first-out order across wrapping and growth", "[core][ring]") {
  Ring<int> r;
  int next_in = 0, next_out = 0;
  // Five in, three out, repeatedly: the head walks round the array while the queue grows
  // past several doublings.
  for (int round = 0; round < 40; ++round) {
    for (int k = 0; k < 5; ++k) r.push_back(int{next_in++});
    for (int k = 0; k < 3; ++k) {
      REQUIRE(r.front() == next_out++);
      r.pop_front();
    }
    REQUIRE(r.size() == static_cast<std::size_t>(next_in - next_out));
    for (std::size_t i = 0; i < r.size(); ++i) REQUIRE(r[i] == next_out + static_cast<int>(i));
  }
  std::vector<int> expected;
  for (int v = next_out; v < next_in; ++v) expected.push_back(v);
  CHECK(contents(r) == expected);
  r.clear();
  CHECK(r.empty());
  CHECK(contents(r).empty());
}

TEST_CASE("a ring's slot handed out again keeps its vector's capacity", "[core][ring]") {
  Ring<std::vector<int>> r;
  r.push_back(std::vector<int>(100, 7));
  r.pop_front();
  // The first array has eight slots: after a lap of pushes and pops, the next push lands in
  // the first slot again.
  for (int lap = 0; lap < 7; ++lap) {
    r.push_back_slot().clear();
    r.pop_front();
  }
  std::vector<int>& reused = r.push_back_slot();
  CHECK(reused.capacity() >= 100);
  reused.assign(3, 1);
  CHECK(r.front() == std::vector<int>{1, 1, 1});
}
