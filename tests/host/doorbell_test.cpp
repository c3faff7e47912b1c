// Doorbell: the progress thread's sleep ends on a kick now, or at the time its timer was set
// to (ring_at), and not before; a later ring_at replaces or cancels an earlier one. Real
// descriptors and real time, with bounds far from the times they check.
#include "emulator/host/doorbell.hpp"

#include <catch2/catch.hpp>
#include <chrono>
#include <thread>

#include "emulator/host/host_clock.hpp"

using softrdma::host::Doorbell;
using softrdma::host::steady_now;
using namespace std::chrono_literals;

namespace {

constexpr std::uint64_t kMs = 1'000'000;  // ns

// Sleeps on the doorbell alone (no socket) for `timeout_ns` at most; whether something woke it,
// and how long it slept in ns.
std::pair<bool, std::uint64_t> sleep_alone(Doorbell& bell, std::int64_t timeout_ns) {
  const std::uint64_t start = steady_now();
  const bool woken = bell.sleep(-1, 0, -1, timeout_ns);
  return {woken, steady_now() - start};
}

}  // namespace

TEST_CASE("a doorbell's timer ends a sleep at the time it was set to, not before", "[doorbell]") {
  Doorbell bell;
  REQUIRE(bell.error() == 0);
  REQUIRE(bell.ring_at(steady_now() + 20 * kMs));
  const auto [woken, slept] = sleep_alone(bell, -1);
  CHECK(woken);
  CHECK(slept >= 19 * kMs);
  CHECK(slept < 2'000 * kMs);
}

TEST_CASE("a later ring_at replaces the doorbell's timer, and 0 cancels it", "[doorbell]") {
  Doorbell bell;
  REQUIRE(bell.error() == 0);
  SECTION("replaced by a later time") {
    REQUIRE(bell.ring_at(steady_now() + 5 * kMs));
    REQUIRE(bell.ring_at(steady_now() + 5'000 * kMs));
  }
  SECTION("cancelled") {
    REQUIRE(bell.ring_at(steady_now() + 5 * kMs));
    REQUIRE(bell.ring_at(0));
  }
  const auto [woken, slept] = sleep_alone(bell, 50 * kMs);
  CHECK_FALSE(woken);  // the 50 ms timeout ended it
  CHECK(slept >= 49 * kMs);
}

TEST_CASE("a timer that went off while the thread was awake ends its next sleep at once", "[doorbell]") {
  Doorbell bell;
  REQUIRE(bell.error() == 0);
  REQUIRE(bell.ring_at(steady_now() + 1 * kMs));
  std::this_thread::sleep_for(10ms);
  const auto [woken, slept] = sleep_alone(bell, 5'000 * kMs);
  CHECK(woken);
  CHECK(slept < 1'000 * kMs);
  // The wake-up used the timer up: the next sleep lasts its timeout.
  CHECK_FALSE(sleep_alone(bell, 10 * kMs).first);
}

TEST_CASE("a kick ends a sleep at once and is not lost before it", "[doorbell]") {
  Doorbell bell;
  REQUIRE(bell.error() == 0);
  bell.kick();  // before the sleep: the sleep returns at once
  CHECK(sleep_alone(bell, 5'000 * kMs).first);
  std::thread kicker([&] {
    std::this_thread::sleep_for(20ms);
    bell.kick();
  });
  const auto [woken, slept] = sleep_alone(bell, 5'000 * kMs);
  kicker.join();
  CHECK(woken);
  CHECK(slept < 1'000 * kMs);
}
