// How long the calling thread ran during a pause between two of its verbs calls, rather than
// being preempted.
//
// The busy-poll lease (embedded_host.cpp) restarts its streak when the application pauses after
// a poll that found a completion: it went to wait otherwise (ib_write_lat spins on its buffer).
// A thread the scheduler took off its core pauses as long, and restarting its streak then cost
// ibv_rc_pingpong a quarter of its round trip. The thread's CPU clock tells them apart: a
// spinning thread's advances with the wall clock, a preempted one's does not. Reading it is a
// system call, so it is sampled every kSampleEvery calls and at a pause only; the time the
// thread spent off its core since the last sample is then put down to the pause, as a polling
// thread has no other reason to leave it.
#pragma once

#include <algorithm>
#include <cstdint>

#include "emulator/core/verbs_types.hpp"
#include "emulator/host/host_clock.hpp"

namespace softrdma::host {

class ThreadPause {
 public:
  static constexpr std::uint32_t kSampleEvery = 64;

  // A call at `now` (steady clock, ns) that did not follow a pause.
  void call(core::Time now) {
    if (++calls_ % kSampleEvery == 0) sample(now);
  }

  // A call at `now` after a pause of `pause` ns: for how long of the pause the thread was on a
  // core. Samples again.
  core::Time ran_for(core::Time now, core::Time pause) {
    const core::Time wall = now - wall_, cpu_before = cpu_;
    sample(now);
    const core::Time off_core = wall - std::min(wall, cpu_ - cpu_before);
    return pause - std::min(pause, off_core);
  }

 private:
  void sample(core::Time now) {
    wall_ = now;
    cpu_ = cpu_now(CLOCK_THREAD_CPUTIME_ID);
  }

  std::uint32_t calls_ = 0;
  core::Time wall_ = 0, cpu_ = 0;  // at the last sample
};

}  // namespace softrdma::host
