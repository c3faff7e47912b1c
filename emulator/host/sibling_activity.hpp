// Whether the rest of this process runs: the progress thread's own application threads.
//
// While the progress thread spins, its scheduler slice decides whom its yields help
// (short_slice.hpp). Beside a busy thread of its own application, such as one spinning on
// memory for a WRITE only the progress thread can place, it keeps the short slice, whose
// deadline stays first, so that it receives rather than wait out the spinner's slice. When
// the rest of the process is idle, a passive target whose application sleeps while the peer
// moves data (ib_write_bw's and ib_read_bw's server), the busy thread beside it on its CPU is
// another program's, often the peer sending the data; there the default slice lets its yields
// hand that program the core. The process's CPU time less the thread's own tells which.
#pragma once

#include "emulator/core/verbs_types.hpp"
#include "emulator/host/host_clock.hpp"

namespace softrdma::host {

class SiblingActivity {
 public:
  // The clocks are read at most this often. Longer than a scheduler tick (4 ms at HZ=250): the
  // process's clock has another CPU's running thread's time only as of its last tick or switch.
  static constexpr core::Time kMeasureEvery = 10'000'000;  // ns

  // The other threads ran for `others_cpu` ns within `wall` ns: whether they count as busy
  // (a quarter of one CPU or more).
  static bool busy_share(core::Time others_cpu, core::Time wall) { return others_cpu * 4 >= wall; }

  // Whether the process's other threads were busy over the last measured interval; measures
  // again once kMeasureEvery has passed since the last measurement. Busy until measured once.
  bool busy(core::Time now) {
    if (measured_at_ != 0 && now - measured_at_ < kMeasureEvery) return busy_;
    const core::Time process = cpu_now(CLOCK_PROCESS_CPUTIME_ID);
    const core::Time thread = cpu_now(CLOCK_THREAD_CPUTIME_ID);
    if (measured_at_ != 0) {
      // The thread's clock is read last, so its share may exceed the process's by a little.
      const core::Time own = thread - thread_cpu_;
      const core::Time all = process - process_cpu_;
      busy_ = busy_share(all > own ? all - own : 0, now - measured_at_);
    }
    measured_at_ = now;
    process_cpu_ = process;
    thread_cpu_ = thread;
    return busy_;
  }

 private:
  core::Time measured_at_ = 0;
  core::Time process_cpu_ = 0;
  core::Time thread_cpu_ = 0;
  bool busy_ = true;
};

}  // namespace softrdma::host
