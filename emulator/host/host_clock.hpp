// The engine's time in the embedded host: nanoseconds of the monotonic clock. The engine takes
// time only as an argument, so that it stays deterministic (docs/architecture.md); this is the
// one place the host reads a clock.
#pragma once

#include <time.h>

#include <chrono>
#include <cstdint>

#include "emulator/core/verbs_types.hpp"

namespace softrdma::host {

inline core::Time steady_now() {
  return static_cast<core::Time>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
          .count());
}

// CPU time, in ns, of the calling thread (CLOCK_THREAD_CPUTIME_ID) or its process
// (CLOCK_PROCESS_CPUTIME_ID): a system call, unlike steady_now().
inline core::Time cpu_now(clockid_t clock) {
  timespec t{};
  clock_gettime(clock, &t);
  return static_cast<core::Time>(t.tv_sec) * 1'000'000'000 + static_cast<core::Time>(t.tv_nsec);
}

// `ns` nanoseconds as a timespec: a ppoll timeout, or a timerfd's CLOCK_MONOTONIC time.
inline timespec to_timespec(std::uint64_t ns) {
  return {static_cast<time_t>(ns / 1'000'000'000), static_cast<long>(ns % 1'000'000'000)};
}

}  // namespace softrdma::host
