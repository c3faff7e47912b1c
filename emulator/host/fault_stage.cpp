#include "emulator/host/fault_stage.hpp"

#include "wire/ib_headers.hpp"

namespace softrdma::host {

namespace {

// Corruption flips a bit after the BTH: the packet still parses (its opcode, pad count and
// QPN are intact), so only its ICRC can tell, and the receiving engine's ICRC-drop counter
// counts exactly the corruptions injected towards it (IBTA vol. 1 s9.6.1.1).
constexpr std::size_t kCorruptFrom = wire::Bth::length;

}  // namespace

FaultStage::FaultStage(const net::FaultPlan& plan, core::Time start)
    : tx_active_(plan.tx.any() || plan.link_down),
      rx_active_(plan.rx.any() || plan.link_down),
      start_(start),
      link_down_(plan.link_down),
      tx_(plan.tx, net::direction_seed(plan, false), kCorruptFrom),
      rx_(plan.rx, net::direction_seed(plan, true), kCorruptFrom) {}

void FaultStage::send(core::Time now, core::TxPacket packet, std::vector<core::TxPacket>& out) {
  if (link_down(now)) {
    tx_.count_link_down();
  } else if (tx_active_) {
    tx_.push(now, std::move(packet), out);
  } else {
    out.push_back(std::move(packet));
  }
}

void FaultStage::release(core::Time now, std::vector<core::TxPacket>& out) { tx_.release(now, out); }

std::span<const core::RxPacket> FaultStage::receive(core::Time now, std::span<const core::RxPacket> in) {
  if (!rx_active_) return in;
  ready_.clear();
  const bool down = link_down(now);
  for (const core::RxPacket& p : in) {
    if (down) {
      rx_.count_link_down();
    } else {
      rx_.push(now, Received{p, {p.bytes.begin(), p.bytes.end()}}, ready_);
    }
  }
  rx_.release(now, ready_);
  views_.clear();
  for (Received& r : ready_) {
    views_.push_back(r.meta);
    views_.back().bytes = r.bytes;
  }
  return views_;
}

std::optional<core::Time> FaultStage::next_release() const {
  const auto tx = tx_.next_release(), rx = rx_.next_release();
  if (tx && rx) return std::min(*tx, *rx);
  return tx ? tx : rx;
}

}  // namespace softrdma::host
