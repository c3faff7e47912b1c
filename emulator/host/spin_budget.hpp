// How long the progress thread has looked for work in vain, counted in the passes it ran rather
// than in wall time.
//
// After activity the progress thread keeps looking for work for HostConfig::spin before it
// sleeps, because a sleep costs a wake-up (and a DPDK port, which has no file descriptor, is not
// looked at again for a whole poll interval). Measured from the last work in wall time, the spin
// also counted the time the thread spent preempted. On a machine with fewer cores than busy
// threads the scheduler takes the core away for longer than the whole 50 us spin, so the thread
// went to sleep on its first idle pass back, in the middle of a stream: between two softrdmad
// daemons joined by net_memif, ib_write_bw 64 B ran at 0.76-0.94 M msg/s in runs where the
// daemons slept 4-5 thousand times a second, and at 1.4-1.5 where they did not. So a pass counts
// for the wall time since the previous one only up to kLongestPass: a pass that looks at the
// work rings and the port and yields takes a few microseconds, and the rest of a longer gap was
// someone else's.
#pragma once

#include <algorithm>

#include "emulator/core/verbs_types.hpp"

namespace softrdma::host {

class SpinBudget {
 public:
  static constexpr core::Time kLongestPass = 10'000;  // ns

  SpinBudget(core::Time spin_ns, core::Time now) : spin_ns_(spin_ns), last_pass_(now) {}

  // A pass found work at `now`: the spin starts again.
  void worked(core::Time now) {
    spun_ = 0;
    last_pass_ = now;
  }

  // A pass found nothing at `now`; whether the thread should keep spinning rather than sleep.
  bool keep_spinning(core::Time now) {
    spun_ += std::min(now - std::min(now, last_pass_), kLongestPass);
    last_pass_ = now;
    return spun_ < spin_ns_;
  }

 private:
  const core::Time spin_ns_;
  core::Time last_pass_;
  core::Time spun_ = 0;  // idle time counted since the last work
};

}  // namespace softrdma::host
