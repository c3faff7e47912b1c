// A polling thread that shares its core with another busy thread moves to another CPU.
//
// A thread that polls without pause and yet waits, runnable, for its CPU for longer than any
// wake-up's work takes is time-sharing that CPU with another busy thread. On a small machine
// that is often the peer program of a ping-pong: both woke from the TCP exchange that set up
// their QPs, and the scheduler's wake-up placement put them on one CPU. Each then waits a
// scheduler slice for every message the other sends, until the load balancer parts them, which
// can take tens of slices beside an idle CPU. The thread steps to another CPU of its own
// affinity mask instead, at most once per kStepInterval, and keeps the mask it had.
//
// The wait is the kernel's run delay (/proc/thread-self/schedstat): time off the CPU while
// blocked (a lock, a page fault) is not sharing, and a step for it would put the thread beside
// its peer. And it must come in long waits: many short ones are the progress threads' passes
// (ib_write_lat needs them, on every CPU), which a step would only take to the other program.
#pragma once

#include <fcntl.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <optional>

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

// A thread's schedstat line: "exec_ns delay_ns slices".
struct RunDelay {
  core::Time waited = 0;     // ns spent runnable, waiting for a CPU
  std::uint64_t slices = 0;  // times it was given a CPU
};
inline std::optional<RunDelay> parse_run_delay(const char* line) {
  unsigned long long exec = 0, delay = 0, slices = 0;
  if (std::sscanf(line, "%llu %llu %llu", &exec, &delay, &slices) != 3) return std::nullopt;
  return RunDelay{static_cast<core::Time>(delay), static_cast<std::uint64_t>(slices)};
}

class CoreStep {
 public:
  // Reading the run delay costs microseconds (procfs formats it), so at most once per
  // kReadEvery; a slice of another thread in between still shows in full.
  static constexpr core::Time kReadEvery = 1'000'000;      // ns
  static constexpr core::Time kSharedDelay = 500'000;      // ns of run delay between two reads
  static constexpr core::Time kLongWait = 250'000;         // ns a wait lasts on average
  static constexpr core::Time kStepInterval = 50'000'000;  // ns between two steps at least

  CoreStep() = default;
  CoreStep(const CoreStep&) = delete;
  CoreStep& operator=(const CoreStep&) = delete;
  ~CoreStep() {
    if (fd_ >= 0) close(fd_);
  }

  // A poll at `now` that continues a streak (the calling thread's): once per kReadEvery, reads
  // the thread's run delay and steps to another CPU if shared() says so.
  void poll(core::Time now) {
    if (now - last_read_ < kReadEvery) return;
    last_read_ = now;
    const std::optional<RunDelay> delay = read_run_delay();
    if (!delay) return;
    const std::optional<RunDelay> before = last_delay_;
    last_delay_ = delay;
    if (before && shared(now, delay->waited - before->waited, delay->slices - before->slices)) step_to_another_cpu();
  }

  // Since the last read, at `now`, the thread waited `waited` ns for its CPU and was given one
  // `slices` times: whether it should step to another CPU (and then not for kStepInterval).
  bool shared(core::Time now, core::Time waited, std::uint64_t slices) {
    const bool long_waits = waited >= kSharedDelay && waited >= std::max<std::uint64_t>(slices, 1) * kLongWait;
    if (!long_waits || (stepped_ != 0 && now - stepped_ < kStepInterval)) return false;
    stepped_ = now;
    return true;
  }

 private:
  std::optional<RunDelay> read_run_delay() {
    if (fd_ == -1) fd_ = open("/proc/thread-self/schedstat", O_RDONLY | O_CLOEXEC);
    if (fd_ < 0) {
      fd_ = -2;  // unreadable here (no /proc): never step
      return std::nullopt;
    }
    char line[96];
    const ssize_t n = pread(fd_, line, sizeof line - 1, 0);
    if (n <= 0) return std::nullopt;
    line[n] = '\0';
    return parse_run_delay(line);
  }

  int fd_ = -1;  // -1: not opened yet
  core::Time last_read_ = 0;
  std::optional<RunDelay> last_delay_;
  core::Time stepped_ = 0;
};

}  // namespace softrdma::host
