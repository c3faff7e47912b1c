// Whether an application thread busy-polls its CQs, and so reads its connections itself.
//
// The iWARP host's poll_cq reads every established connection when the CQ is empty. While an
// application spins on poll_cq, a progress thread that also waits for those bytes wakes only
// to find them read, and each such wake-up takes a core from a spinning program. An unbroken
// run of empty polls earns a lease: until it ends the progress thread leaves the connections'
// bytes to the application. A program that stops polling without arming a CQ has its bytes
// wait kLength at most; one that arms a CQ to sleep on its events ends the lease (end()).
#pragma once

#include <atomic>
#include <cstdint>

#include "emulator/core/verbs_types.hpp"

namespace softrdma::host {

class PollLease {
 public:
  static constexpr std::uint32_t kStreak = 16;      // empty polls in a row
  static constexpr core::Time kGap = 20'000;        // ns at most between two of them
  static constexpr core::Time kLength = 1'000'000;  // ns: how often the progress thread looks

  // An application's poll at `now` that found nothing.
  void empty_poll(core::Time now) {
    const bool continues = now - last_empty_.exchange(now, std::memory_order_relaxed) < kGap;
    const std::uint32_t streak = continues ? streak_.load(std::memory_order_relaxed) + 1 : 1;
    streak_.store(streak, std::memory_order_relaxed);
    if (streak >= kStreak) until_.store(now + kLength, std::memory_order_relaxed);
  }
  // The lease's end (0: none was ever given).
  core::Time until() const { return until_.load(std::memory_order_relaxed); }
  // The application is about to sleep on a CQ's events: the lease ends and the streak starts
  // again. Whether a lease was running at `now`, so the progress thread must be told.
  bool end(core::Time now) {
    streak_.store(0, std::memory_order_relaxed);
    return until_.exchange(0, std::memory_order_relaxed) > now;
  }

 private:
  std::atomic<core::Time> last_empty_{0};
  std::atomic<std::uint32_t> streak_{0};
  std::atomic<core::Time> until_{0};
};

}  // namespace softrdma::host
