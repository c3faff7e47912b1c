#include "emulator/host/iwarp_faults.hpp"

namespace softrdma::host {
namespace {

// The plan's tx rates that a TCP connection can show: delay and corruption only.
net::FaultRates tcp_rates(const net::FaultPlan& plan) {
  net::FaultRates r;
  r.corrupt = plan.tx.rates.corrupt;
  r.delay_ns = plan.tx.rates.delay_ns;
  r.jitter_ns = plan.tx.rates.jitter_ns;
  return r;
}

// Whether the plan's rx items say something its tx items do not: an item without "tx." or
// "rx." sets both, and the iWARP device reads it from tx.
bool rx_of_its_own(const net::FaultPlan& plan) {
  const net::FaultRates &rx = plan.rx.rates, &tx = plan.tx.rates;
  const auto own = [](auto r, auto t) { return r != 0 && r != t; };
  return own(rx.loss, tx.loss) || own(rx.dup, tx.dup) || own(rx.corrupt, tx.corrupt) || own(rx.reorder, tx.reorder) ||
         own(rx.delay_ns, tx.delay_ns) || own(rx.jitter_ns, tx.jitter_ns) ||
         (!plan.rx.drop_nth.empty() && plan.rx.drop_nth != plan.tx.drop_nth);
}

}  // namespace

IwarpFaults::IwarpFaults(const net::FaultPlan& plan)
    : dice_(tcp_rates(plan), net::direction_seed(plan, false)), drop_nth_(plan.tx.drop_nth) {}

IwarpFaults::Verdict IwarpFaults::next(std::span<std::uint8_t> fpdu) {
  ++fpdus_;
  while (next_drop_ < drop_nth_.size() && drop_nth_[next_drop_] < fpdus_) ++next_drop_;
  if (next_drop_ < drop_nth_.size() && drop_nth_[next_drop_] == fpdus_) {
    ++counters_.dropped_nth;
    return {true, 0};
  }
  const net::Fate f = dice_.roll(fpdu.size());
  if (f.corrupt_at) {
    fpdu[*f.corrupt_at] ^= static_cast<std::uint8_t>(1u << f.corrupt_bit);
    ++counters_.corrupted;
  }
  if (f.delay_ns > 0) {
    ++counters_.delayed;
  } else {
    ++counters_.passed;
  }
  return {false, f.delay_ns};
}

bool IwarpFaults::applies(const net::FaultPlan& plan) { return tcp_rates(plan).any() || !plan.tx.drop_nth.empty(); }

std::string IwarpFaults::ignored(const net::FaultPlan& plan) {
  std::string what;
  const auto note = [&what](bool present, const char* name) {
    if (present) what += (what.empty() ? "" : ", ") + std::string(name);
  };
  const net::FaultRates& tx = plan.tx.rates;
  note(tx.loss > 0 || tx.dup > 0 || tx.reorder > 0, "loss, duplication and reordering (TCP hides them)");
  note(rx_of_its_own(plan), "rx items");
  note(plan.tx.filter.restricts() || plan.rx.filter.restricts(), "opcode= and qp= filters");
  note(plan.link_down.has_value(), "linkdown");
  note(plan.forced_rnr > 0, "rnr");
  return what;
}

}  // namespace softrdma::host
