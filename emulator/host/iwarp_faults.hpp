// SOFTRDMA_FAULTS on the iWARP device (docs/tools.md, "Fault injection in CI"). TCP carries
// FPDUs reliably and in order, so of a plan only what a TCP connection can suffer applies, and
// to the FPDUs the device sends (the tx line; MPA's frames pass untouched):
// - delay and jitter: each FPDU leaves its delay after it was built, and never before the FPDU
//   before it (TCP keeps order);
// - corrupt: one bit of the FPDU flipped after its CRC was computed, so a peer that checks CRCs
//   ends the stream with a Terminate (RFC 5044 s4.4, RFC 5040 s7);
// - drop=N: the connection is reset in place of the Nth FPDU, as one whose peer vanished.
// Loss, duplication and reordering (TCP hides them), filters (they name IB opcodes and QPs),
// rx items and link-down windows do not apply: ignored() names them, for one line at start.
// The decisions are FaultDice's, seeded as the tx line's, so a seed repeats them.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "emulator/core/verbs_types.hpp"
#include "emulator/net/fault_plan.hpp"

namespace softrdma::host {

class IwarpFaults {
 public:
  explicit IwarpFaults(const net::FaultPlan& plan);

  struct Verdict {
    bool reset = false;    // reset the connection instead of sending the FPDU
    core::Time delay = 0;  // hold it this long after it was built
  };
  // An FPDU about to be sent, corrupted in place if its dice say so.
  Verdict next(std::span<std::uint8_t> fpdu);
  const net::FaultCounters& counters() const { return counters_; }

  // Whether the plan asks anything of the iWARP device; what of it the device ignores, in one
  // line ("" for nothing).
  static bool applies(const net::FaultPlan& plan);
  static std::string ignored(const net::FaultPlan& plan);

 private:
  net::FaultDice dice_;
  std::vector<std::uint64_t> drop_nth_;  // sorted, 1-based
  std::size_t next_drop_ = 0;
  std::uint64_t fpdus_ = 0;
  net::FaultCounters counters_;
};

}  // namespace softrdma::host
