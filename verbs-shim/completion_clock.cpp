#include "verbs-shim/completion_clock.hpp"

#include <time.h>

#include <cerrno>

#include "verbs-shim/context.hpp"
#include "verbs-shim/ops.hpp"

namespace softrdma::shim {

namespace {

std::uint64_t now_ns(clockid_t clock) {
  timespec t{};
  clock_gettime(clock, &t);
  return static_cast<std::uint64_t>(t.tv_sec) * 1'000'000'000 + static_cast<std::uint64_t>(t.tv_nsec);
}

}  // namespace

bool offers_timestamps(ibv_context* context) { return identity_of(context).transport != Transport::iwarp; }

std::uint64_t wallclock_ns(std::uint64_t timestamp) {
  const std::uint64_t monotonic = now_ns(CLOCK_MONOTONIC);
  const std::uint64_t realtime = now_ns(CLOCK_REALTIME);
  return realtime - (monotonic - timestamp);
}

int query_rt_values_op(ibv_context* context, ibv_values_ex* values) {
  if (!offers_timestamps(context)) return EOPNOTSUPP;
  // Only the fields asked for are filled, and comp_mask says which; the raw clock is a cycle
  // count in tv_nsec, as rdma-core's providers report it.
  const bool raw = (values->comp_mask & IBV_VALUES_MASK_RAW_CLOCK) != 0;
  values->comp_mask = 0;
  if (raw) {
    values->raw_clock.tv_sec = 0;
    values->raw_clock.tv_nsec = static_cast<long>(now_ns(CLOCK_MONOTONIC));
    values->comp_mask = IBV_VALUES_MASK_RAW_CLOCK;
  }
  return 0;
}

}  // namespace softrdma::shim
