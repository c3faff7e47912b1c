// A polling thread that shares its core with another runnable thread moves to another CPU.
//
// A thread that polls without pause yet stays off its core for longer than any wake-up's work
// takes is time-sharing that core with another busy thread. On a small machine that is often
// the peer program of a ping-pong: both woke from the TCP exchange that set up their QPs, and
// the scheduler's wake-up placement put them on one core. Each then waits a scheduler slice
// for every message the other sends, until the load balancer parts them, which can take tens
// of slices beside an idle core. The thread steps to another CPU of its own affinity mask
// instead, at most once per kStepInterval, and keeps the mask it had.
#pragma once

#include <sched.h>

#include "emulator/core/verbs_types.hpp"

namespace softrdma::host {

// Moves the calling thread to a CPU of its affinity mask other than the one it runs on, and
// leaves the mask as it was; false when the mask allows one CPU only, or the kernel refused.
inline bool step_to_another_cpu() {
  cpu_set_t mask;
  if (sched_getaffinity(0, sizeof mask, &mask) != 0 || CPU_COUNT(&mask) < 2) return false;
  const int here = sched_getcpu();
  if (here < 0) return false;
  cpu_set_t others = mask;
  CPU_CLR(here, &others);
  // The kernel moves a running thread off a CPU its new mask excludes before the call returns;
  // restoring the mask then leaves it where it went.
  if (sched_setaffinity(0, sizeof others, &others) != 0) return false;
  sched_setaffinity(0, sizeof mask, &mask);
  return true;
}

class CoreStep {
 public:
  static constexpr core::Time kSharedOffCore = 500'000;    // ns off the core between two samples
  static constexpr core::Time kStepInterval = 50'000'000;  // ns between two steps at least

  // The polling thread was off its core for `off_core` ns since its last sample, at `now`:
  // whether it should step to another CPU (and then not again for kStepInterval).
  bool shared(core::Time now, core::Time off_core) {
    if (off_core < kSharedOffCore || (stepped_ != 0 && now - stepped_ < kStepInterval)) return false;
    stepped_ = now;
    return true;
  }

 private:
  core::Time stepped_ = 0;
};

}  // namespace softrdma::host
