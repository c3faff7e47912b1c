// Seeded fault injection between the engine and the wire (docs/tools.md, "Fault injection in
// CI"): loss, duplication, corruption, delay with jitter and reordering, per direction,
// decided by a pseudo-random sequence that depends only on the seed and the packets' order, so
// the same seed and the same program make the same decisions.
//
// SOFTRDMA_FAULTS="loss=1%,reorder=2%:depth=4,dup=0.5%,delay=200us:jitter=50us,corrupt=0.1%,seed=42"
// An item applies to both directions; "tx." or "rx." before its name limits it to packets the
// device sends or receives ("rx.loss=5%"). "opcode=" and "qp=" limit a direction's faults to
// the packets they name (fault_filter.hpp). Scripted faults: "drop=N+M" drops the Nth and Mth
// packet that the direction's filter matches; "rnr=K" makes the device answer its next K RC
// requests that need a receive WQE with an RNR NAK; "linkdown=AT:for=DURATION" drops every
// packet both ways from AT after the device starts, for DURATION (no "for": for good).
#pragma once

#include <cstdint>
#include <deque>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "emulator/core/verbs_types.hpp"
#include "emulator/net/fault_filter.hpp"

namespace softrdma::net {

struct FaultRates {
  double loss = 0;  // probabilities, 0..1
  double dup = 0;
  double corrupt = 0;
  double reorder = 0;
  std::uint32_t reorder_depth = 4;  // a reordered packet lets up to this many later ones pass it
  core::Time delay_ns = 0;          // every packet, plus a uniform 0..jitter_ns
  core::Time jitter_ns = 0;
  bool any() const { return loss > 0 || dup > 0 || corrupt > 0 || reorder > 0 || delay_ns > 0 || jitter_ns > 0; }
};

// Everything that happens to one direction's packets.
struct DirectionFaults {
  FaultRates rates;
  FaultFilter filter;                   // which packets the rates and drop_nth apply to
  std::vector<std::uint64_t> drop_nth;  // 1-based positions among the matching packets, sorted
  bool any() const { return rates.any() || !drop_nth.empty(); }
};

// The link is down from `at` after the device starts until `at + length` (kForever: for good).
struct LinkDown {
  static constexpr core::Time kForever = ~core::Time{0};
  core::Time at = 0;
  core::Time length = kForever;
  bool covers(core::Time since_start) const { return since_start >= at && since_start - at < length; }
};

struct FaultPlan {
  DirectionFaults tx;
  DirectionFaults rx;
  std::uint64_t seed = 1;
  std::uint32_t forced_rnr = 0;  // "rnr=K" (core::Device::force_rnr)
  std::optional<LinkDown> link_down;
};

struct FaultParse {
  std::optional<FaultPlan> plan;
  std::string error;  // when !plan: one line naming the item at fault
};

FaultParse parse_faults(std::string_view spec);

// The seed of one direction's decisions: tx and rx draw different sequences from one seed.
inline std::uint64_t direction_seed(const FaultPlan& plan, bool rx) {
  return rx ? plan.seed ^ 0x5258'5258'5258'5258ull : plan.seed;
}

struct FaultCounters {
  std::uint64_t passed = 0;
  std::uint64_t lost = 0;         // random loss
  std::uint64_t dropped_nth = 0;  // "drop=N"
  std::uint64_t link_down = 0;    // dropped while the link was down
  std::uint64_t duplicated = 0;
  std::uint64_t corrupted = 0;
  std::uint64_t reordered = 0;
  std::uint64_t delayed = 0;
};

// What happens to one packet.
struct Fate {
  bool lost = false;
  bool duplicated = false;
  std::optional<std::size_t> corrupt_at;  // byte offset to flip one bit of
  std::uint8_t corrupt_bit = 0;
  core::Time delay_ns = 0;
  std::uint32_t overtaken_by = 0;  // reordering: later packets released before this one
};

// The decisions of one direction: a splitmix64 sequence from its seed (direction_seed), a
// fixed number of draws per packet.
class FaultDice {
 public:
  // Corruption flips a bit at or after byte `corrupt_from`.
  FaultDice(const FaultRates& rates, std::uint64_t seed, std::size_t corrupt_from = 0);
  Fate roll(std::size_t length);
  const FaultRates& rates() const { return rates_; }

 private:
  double uniform();  // [0, 1)
  FaultRates rates_;
  std::uint64_t state_;
  std::size_t corrupt_from_;
};

// One direction's line: packets go in, and come out when their fate allows, possibly twice,
// possibly changed, possibly never. `Bytes(item)` gives an item's mutable bytes, a UDP payload
// starting with the BTH. Packets the filter does not match pass untouched and roll no dice, so
// the decisions depend only on the matching packets and their order.
template <class T, class Bytes>
class FaultLine {
 public:
  FaultLine(DirectionFaults faults, std::uint64_t seed, std::size_t corrupt_from = 0)
      : dice_(faults.rates, seed, corrupt_from),
        filter_(std::move(faults.filter)),
        drop_nth_(std::move(faults.drop_nth)) {}

  // Takes `item` at `now`; appends to `out` what may leave now.
  void push(core::Time now, T item, std::vector<T>& out) {
    if (!filter_.matches(Bytes{}(item))) {
      ++counters_.passed;
      out.push_back(std::move(item));
      return;
    }
    ++matched_;
    while (next_drop_ < drop_nth_.size() && drop_nth_[next_drop_] < matched_) ++next_drop_;
    if (next_drop_ < drop_nth_.size() && drop_nth_[next_drop_] == matched_) {
      ++counters_.dropped_nth;
      return;
    }
    const Fate f = dice_.roll(Bytes{}(item).size());
    if (f.lost) {
      ++counters_.lost;
      return;
    }
    if (f.corrupt_at) {
      Bytes{}(item)[*f.corrupt_at] ^= static_cast<std::uint8_t>(1u << f.corrupt_bit);
      counters_.corrupted += f.duplicated ? 2 : 1;  // corrupted copies that leave
    }
    if (f.duplicated) {
      ++counters_.duplicated;
      hold(now, f, T(item), out);
    }
    hold(now, f, std::move(item), out);
    release(now, out);
  }

  // Appends what is due at `now`.
  void release(core::Time now, std::vector<T>& out) {
    for (auto it = held_.begin(); it != held_.end();) {
      if (it->release_at() <= now) {
        out.push_back(std::move(it->item));
        it = held_.erase(it);
      } else {
        ++it;
      }
    }
  }

  std::optional<core::Time> next_release() const {
    std::optional<core::Time> next;
    for (const Held& h : held_)
      if (!next || h.release_at() < *next) next = h.release_at();
    return next;
  }

  const FaultCounters& counters() const { return counters_; }
  // Counts a packet the link dropped before it reached this line.
  void count_link_down() { ++counters_.link_down; }

 private:
  // A reordered packet waits for the later packets that overtake it, but no longer than
  // kReorderWait: when traffic stops, nothing overtakes it.
  static constexpr core::Time kReorderWait = 1'000'000;

  struct Held {
    core::Time due;
    core::Time deadline;
    std::uint32_t overtaken_by;
    T item;
    core::Time release_at() const { return overtaken_by == 0 ? due : deadline; }
  };

  void hold(core::Time now, const Fate& f, T item, std::vector<T>& out) {
    // A packet leaving counts against every reordered packet held before it.
    for (Held& h : held_)
      if (h.overtaken_by > 0) --h.overtaken_by;
    if (f.delay_ns > 0) ++counters_.delayed;
    if (f.overtaken_by > 0) ++counters_.reordered;
    if (f.delay_ns == 0 && f.overtaken_by == 0 && held_.empty()) {
      ++counters_.passed;
      out.push_back(std::move(item));
      return;
    }
    ++counters_.passed;
    const core::Time due = now + f.delay_ns;
    held_.push_back({due, due + kReorderWait, f.overtaken_by, std::move(item)});
  }

  FaultDice dice_;
  FaultFilter filter_;
  std::vector<std::uint64_t> drop_nth_;
  std::size_t next_drop_ = 0;  // the first drop_nth_ entry not yet passed
  std::uint64_t matched_ = 0;  // packets the filter matched so far
  std::deque<Held> held_;
  FaultCounters counters_;
};

}  // namespace softrdma::net
