// The fault stage between the engine and the socket (SOFTRDMA_FAULTS, net/fault_plan.hpp):
// packets the engine sends pass the tx line before the socket, packets the socket receives
// pass the rx line before the engine. Held packets leave when next_release() comes, so the
// host wakes for them as for the engine's timers. While the plan's link is down, packets of
// both directions are dropped before their lines. (The plan's forced RNRs are the engine's:
// the host passes them to core::Device::force_rnr.)
#pragma once

#include <optional>
#include <span>
#include <vector>

#include "emulator/core/device.hpp"
#include "emulator/net/fault_plan.hpp"

namespace softrdma::host {

struct FaultStats {
  net::FaultCounters tx;
  net::FaultCounters rx;
};

class FaultStage {
 public:
  // `start`: when the device started, the origin of the plan's link-down window.
  FaultStage(const net::FaultPlan& plan, core::Time start);

  // Takes a packet the engine sent; appends to `out` what may go to the socket now.
  void send(core::Time now, core::TxPacket packet, std::vector<core::TxPacket>& out);
  // Appends the held tx packets that are due.
  void release(core::Time now, std::vector<core::TxPacket>& out);
  // Takes what the socket received (possibly nothing) and returns what the engine gets now,
  // held packets that came due included. Valid until the next call.
  std::span<const core::RxPacket> receive(core::Time now, std::span<const core::RxPacket> in);

  std::optional<core::Time> next_release() const;
  FaultStats stats() const { return {tx_.counters(), rx_.counters()}; }  // 0 for a direction without faults

 private:
  struct Received {
    core::RxPacket meta;  // bytes: re-pointed at `bytes` when delivered
    std::vector<std::uint8_t> bytes;
  };
  struct TxBytes {
    std::vector<std::uint8_t>& operator()(core::TxPacket& p) const { return p.bytes; }
  };
  struct RxBytes {
    std::vector<std::uint8_t>& operator()(Received& r) const { return r.bytes; }
  };

  bool link_down(core::Time now) const { return link_down_ && now >= start_ && link_down_->covers(now - start_); }

  // A direction without faults passes its packets straight on: no copy of every received
  // packet, no dice rolled.
  const bool tx_active_;
  const bool rx_active_;
  const core::Time start_;
  const std::optional<net::LinkDown> link_down_;
  net::FaultLine<core::TxPacket, TxBytes> tx_;
  net::FaultLine<Received, RxBytes> rx_;
  std::vector<Received> ready_;        // rx packets handed out by the last receive()
  std::vector<core::RxPacket> views_;  // and views of them
};

}  // namespace softrdma::host
