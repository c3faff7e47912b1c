// The clock of completion timestamps. A completion carries the engine's time when it was made:
// nanoseconds of CLOCK_MONOTONIC (emulator/host/host_clock.hpp), in softrdmad's engine as in an
// embedded one. The device reports it as an HCA core clock of 1 GHz, one cycle a nanosecond.
#pragma once

#include <cstdint>

#include "verbs-shim/verbs_api.hpp"

namespace softrdma::shim {

inline constexpr std::uint64_t kCoreClockKhz = 1'000'000;

// Whether the context's device stamps completions: srdma0 does; srdmaiw0, whose byte-stream
// path is given no time, does not (as siw).
bool offers_timestamps(ibv_context* context);

// A completion timestamp as nanoseconds since the Unix epoch.
std::uint64_t wallclock_ns(std::uint64_t timestamp);

}  // namespace softrdma::shim
