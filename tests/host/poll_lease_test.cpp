// PollLease: an unbroken run of empty polls keeps the iWARP progress thread off the bytes the
// polling application reads itself; arming a CQ hands them back at once.
#include "emulator/host/poll_lease.hpp"

#include <catch2/catch.hpp>

using softrdma::core::Time;
using softrdma::host::PollLease;

namespace {

// `count` empty polls `gap` apart, the last at the returned time.
Time poll_empty(PollLease& lease, Time from, std::uint32_t count, Time gap) {
  Time now = from;
  for (std::uint32_t i = 0; i < count; ++i) lease.empty_poll(now += gap);
  return now;
}

}  // namespace

TEST_CASE("a run of empty polls earns a lease that the next ones extend", "[lease]") {
  PollLease lease;
  Time now = poll_empty(lease, 1'000'000, PollLease::kStreak - 1, 1'000);
  CHECK(lease.until() == 0);  // a program driven by events also polls a few times in a row
  lease.empty_poll(now += 1'000);
  CHECK(lease.until() == now + PollLease::kLength);
  lease.empty_poll(now += 1'000);
  CHECK(lease.until() == now + PollLease::kLength);
}

TEST_CASE("a pause longer than the gap starts the run again", "[lease]") {
  PollLease lease;
  Time now = poll_empty(lease, 1'000'000, PollLease::kStreak - 1, 1'000);
  now += PollLease::kGap;  // the program went elsewhere between two polls
  now = poll_empty(lease, now, PollLease::kStreak - 1, 1'000);
  CHECK(lease.until() == 0);
  lease.empty_poll(now + 1'000);
  CHECK(lease.until() != 0);
}

TEST_CASE("arming a CQ ends a running lease and says so once", "[lease]") {
  PollLease lease;
  const Time now = poll_empty(lease, 1'000'000, PollLease::kStreak, 1'000);
  REQUIRE(lease.until() > now);
  CHECK(lease.end(now + 1'000));
  CHECK(lease.until() == 0);
  CHECK_FALSE(lease.end(now + 2'000));  // nothing left to tell the progress thread
  // The run starts again after the arming.
  lease.empty_poll(now + 3'000);
  CHECK(lease.until() == 0);
}

TEST_CASE("a lease that ran out needs no telling", "[lease]") {
  PollLease lease;
  const Time now = poll_empty(lease, 1'000'000, PollLease::kStreak, 1'000);
  CHECK_FALSE(lease.end(now + PollLease::kLength + 1));
}
