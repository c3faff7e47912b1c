#include "emulator/host/short_slice.hpp"

#include <linux/sched.h>  // SCHED_NORMAL: <sched.h>'s sched_param clashes with the next header
#include <linux/sched/types.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>

namespace softrdma::host {
namespace {

// glibc 2.36 has no wrappers for these two system calls.
int get_attr(int tid, sched_attr& attr) {
  return static_cast<int>(syscall(SYS_sched_getattr, tid, &attr, sizeof attr, 0));
}

// Asks for a slice of `ns` (0: the kernel's default) for the calling SCHED_OTHER thread.
int set_slice(std::uint64_t ns) {
  sched_attr attr{};
  if (get_attr(0, attr) != 0) return errno;
  if (attr.sched_policy != SCHED_NORMAL) return 0;  // FIFO/RR/BATCH/IDLE: the application chose
  attr.size = sizeof attr;
  attr.sched_flags = 0;
  attr.sched_runtime = ns;  // SCHED_OTHER: the requested slice (Linux >= 6.12); 0 undoes a request
  if (syscall(SYS_sched_setattr, 0, &attr, 0) != 0) return errno;
  return 0;
}

}  // namespace

int request_short_slice() { return set_slice(kProgressSliceNs); }

void SliceSwitch::use_short() {
  if (current_ == Slice::short_slice) return;
  set_slice(kProgressSliceNs);
  current_ = Slice::short_slice;
}

void SliceSwitch::use_default() {
  if (current_ == Slice::default_slice) return;
  set_slice(0);
  current_ = Slice::default_slice;
}

std::uint64_t requested_slice_ns(int tid) {
  sched_attr attr{};
  if (get_attr(tid, attr) != 0) return 0;
  return attr.sched_runtime;
}

}  // namespace softrdma::host
