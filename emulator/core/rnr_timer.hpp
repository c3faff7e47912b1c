// Timer values of the transport (IBTA vol. 1 s9.7.5.2.8 table 45 and s9.7.6.1.3).
#pragma once

#include <array>
#include <cstdint>

#include "emulator/core/verbs_types.hpp"

namespace softrdma::core {

// The RNR NAK timer field (5 bits), table 45, in nanoseconds: code 0 is 655.36 ms; codes
// 1..31 run from 0.01 ms to 491.52 ms.
inline constexpr std::array<std::uint64_t, 32> kRnrTimerNs = {
    655'360'000, 10'000,     20'000,     30'000,      40'000,      60'000,      80'000,      120'000,
    160'000,     240'000,    320'000,    480'000,     640'000,     960'000,     1'280'000,   1'920'000,
    2'560'000,   3'840'000,  5'120'000,  7'680'000,   10'240'000,  15'360'000,  20'480'000,  30'720'000,
    40'960'000,  61'440'000, 81'920'000, 122'880'000, 163'840'000, 245'760'000, 327'680'000, 491'520'000,
};

constexpr Time rnr_delay(std::uint8_t code) { return kRnrTimerNs[code & 0x1F]; }

// Local ACK timeout: 4.096 us * 2^timeout; 0 means no timeout (s9.7.6.1.3).
constexpr Time ack_timeout(std::uint8_t timeout) { return timeout == 0 ? 0 : Time{4096} << (timeout & 0x1F); }

}  // namespace softrdma::core
