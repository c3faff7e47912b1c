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
#pragma once

#include <cstdint>

namespace softrdma::host {

inline constexpr std::uint64_t kProgressSliceNs = 100'000;  // the shortest the kernel accepts

// Asks for a kProgressSliceNs slice for the calling thread, keeping its policy and nice
// value; a thread that is not SCHED_OTHER is left alone. Returns 0 or the errno of
// sched_getattr/sched_setattr (best effort: the caller carries on either way).
int request_short_slice();

// The slice the kernel reports for thread `tid` (0: the caller), in ns: the one it asked for,
// or the kernel's default; 0 on kernels before 6.12, which report none. For tests.
std::uint64_t requested_slice_ns(int tid);

}  // namespace softrdma::host
