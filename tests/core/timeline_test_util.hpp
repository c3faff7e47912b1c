// What the RC timeline tests (timeline_*_test.cpp) share besides their harness,
// tests/core/timeline.hpp: the timer values they count on, the fake peer's remote buffer and a
// WC check.
//
// Defaults (timeline.hpp Config): path MTU 256, the engine's requests start at PSN 0x000100,
// the peer's at 0x000800, local ACK timeout 10 (4.096 us << 10 = 4,194,304 ns), min_rnr_timer
// 12 (0.64 ms).
#pragma once

#include <catch2/catch.hpp>
#include <cstdint>

#include "tests/core/timeline.hpp"

namespace test::timeline {

// The engine's names every timeline file speaks in.
using core::QpState;
using core::WcOpcode;
using core::WcStatus;
using core::WrOpcode;

inline constexpr Time kT10 = 4'194'304;  // the local ACK timeout for timeout = 10, in ns
static_assert(core::ack_timeout(10) == kT10);
static_assert(core::rnr_delay(0) == 655'360'000);
static_assert(core::rnr_delay(3) == 30'000);
static_assert(core::rnr_delay(12) == 640'000);
static_assert(core::rnr_delay(14) == 1'280'000);

inline std::uint32_t psn(std::uint32_t base, std::uint32_t n) { return core::psn_add(base, n); }

// A remote buffer the engine's READs, WRITEs and atomics point at (the fake peer's memory).
inline constexpr std::uint64_t kRemoteVa = 0x7F00'1234'5000;
inline constexpr std::uint32_t kRemoteRkey = 0x00C0FFEE;

inline core::SendWr remote(core::SendWr w, std::uint64_t va = kRemoteVa) {
  w.remote_addr = va;
  w.rkey = kRemoteRkey;
  return w;
}

inline void check_wc(const core::Wc& wc, std::uint64_t id, WcStatus status) {
  INFO("wr_id " << wc.wr_id << " status " << int(wc.status));
  CHECK(wc.wr_id == id);
  CHECK(wc.status == status);
}

}  // namespace test::timeline
