// A short scheduler slice for the progress thread.
//
// The progress thread works in bursts of microseconds and sleeps between them; when a packet
// wakes it, the application's threads may be spinning on every core (ib_write_lat spins on
// the last byte of its buffer, so only the progress thread can receive the write it waits
// for). Linux's EEVDF scheduler lets a woken thread preempt a running one only if its
// virtual deadline comes first, and the deadline is one slice away: with the default slice
// (about 3 ms on two cores) a wake-up waited for the spinner's slice to end, and
// ib_write_lat measured ~2 ms at every size. Since Linux 6.12 a SCHED_OTHER thread may ask for
// a slice as short as 100 us without privilege (sched_attr.sched_runtime), which puts its
// deadline first; its share of the CPU does not change. Older kernels ignore the request.
//
// The short slice is for waking up, and it gets in the way of a spinning thread whose
// neighbours yield. Spinning, the progress thread calls sched_yield() to let a woken
// application thread have the core, but under EEVDF a yield only moves the yielder's deadline
// one slice on: a 100 us slice keeps its deadline first, the yield hands nothing over, and the
// other thread waits until the spinner falls behind in virtual time. softrdmad's clients yield
// on every empty poll of a CQ ring, so its progress thread spins with the default slice: with
// one of two ib_send_lat programs on its core it measured 12.2 us one way with the short
// slice, 8.2 us with the default. An embedded host keeps the short slice while its own
// application's threads are busy: they may spin on memory without ever yielding
// (ib_write_lat), and a default-slice yield gave such a spinner the core for its whole slice
// (ib_write_lat ~130 us -> 2 ms). While they are idle, the spinner beside it is another
// program's, and it spins with the default slice (sibling_activity.hpp).
#pragma once

#include <cstdint>

namespace softrdma::host {

inline constexpr std::uint64_t kProgressSliceNs = 100'000;  // the shortest the kernel accepts

// Asks for a kProgressSliceNs slice for the calling thread, keeping its policy and nice
// value; a thread that is not SCHED_OTHER is left alone. Returns 0 or the errno of
// sched_getattr/sched_setattr (best effort: the caller carries on either way).
int request_short_slice();

// Moves the calling thread between the short slice and the kernel's default, with a system
// call only when that changes. Best effort, as request_short_slice.
class SliceSwitch {
 public:
  void use_short();
  void use_default();

 private:
  enum class Slice { unknown, short_slice, default_slice };
  Slice current_ = Slice::unknown;
};

// The slice the kernel reports for thread `tid` (0: the caller), in ns: the one it asked for,
// or the kernel's default; 0 on kernels before 6.12, which report none. For tests.
std::uint64_t requested_slice_ns(int tid);

}  // namespace softrdma::host
