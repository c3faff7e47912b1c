// How long the progress thread has looked for work in vain, counted in the passes it ran rather
// than in wall time.
//
// After activity the progress thread keeps looking for work for HostConfig::spin before it
// sleeps, because a sleep costs a wake-up (and a DPDK port, which has no file descriptor, is not
// looked at again for a whole poll interval). Wall time would count the time the thread spends
// preempted: with fewer cores than busy threads the scheduler takes the core away for longer
// than the whole 50 us spin, and the thread would sleep on its first idle pass back, in the
// middle of a stream (two memif daemons at ib_write_bw 64 B: 0.76-0.94 M msg/s with 4-5
// thousand sleeps a second, against 1.4-1.5 without). So a pass counts for the wall time since
// the previous one only up to kLongestPass: a pass that looks at the work rings and the port
// and yields takes a few microseconds, and the rest of a longer gap was someone else's.
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
