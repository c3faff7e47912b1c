// Two engines joined by a simulated link with seeded faults (loss, duplication, reordering,
// delay, corruption), and a virtual clock: the engine's world without sockets or time.
// Same seed, same run: every decision comes from one generator.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <vector>

#include "emulator/core/device.hpp"
#include "tests/core/direct_link.hpp"

namespace test {

using softrdma::core::Device;
using softrdma::core::Gid;
using softrdma::core::Time;

struct Faults {
  double loss = 0, duplicate = 0, reorder = 0, corrupt = 0;
  Time delay = 1000;        // one-way, ns
  Time reorder_by = 20000;  // a reordered packet arrives up to this much later, ns
  // A bottleneck (a receive ring drained at a fixed rate): a tail-drop queue of `queue`
  // packets from which one leaves every `drain_every` ns. 0: none.
  std::size_t queue = 0;
  Time drain_every = 0;
};

constexpr Gid ipv4_gid(std::uint8_t last) { return {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF, 127, 0, 0, last}; }

class SimNetwork {
 public:
  SimNetwork(Device& a, Device& b, std::uint64_t seed) : rng_(seed) {
    nodes_[0] = {&a, a.config().gids.at(0)};
    nodes_[1] = {&b, b.config().gids.at(0)};
  }

  Faults faults[2];  // by sending node: 0 is a->b, 1 is b->a
  bool link_up = true;
  Time now = 1'000'000;

  struct Stats {
    std::uint64_t sent = 0, lost = 0, duplicated = 0, reordered = 0, corrupted = 0, delivered = 0, overflowed = 0;
  } stats[2];

  // Moves packets and time until `done()` holds or `limit` ns of virtual time pass; returns
  // whether done() held.
  bool run_until(const std::function<bool()>& done, Time limit = 60'000'000'000ull) {
    const Time end = now + limit;
    while (!done()) {
      bool moved = drain_transmit();
      moved |= deliver_due();
      if (moved) continue;
      // Nothing to do now: jump to the next event (a delivery or an engine deadline).
      Time next = end;
      if (!in_flight_.empty()) next = std::min(next, in_flight_.begin()->first.first);
      for (const Node& n : nodes_)
        if (auto d = n.dev->next_deadline()) next = std::min(next, *d);
      if (next >= end) return done();
      now = std::max(now, next);
      for (const Node& n : nodes_) n.dev->advance(now);
    }
    return true;
  }

 private:
  struct Node {
    Device* dev = nullptr;
    Gid gid{};
  };
  struct Packet {
    int to = 0;
    softrdma::core::TxPacket tx;
  };

  double uniform() { return std::uniform_real_distribution<double>(0, 1)(rng_); }

  bool drain_transmit() {
    bool moved = false;
    for (int from = 0; from < 2; ++from) {
      while (auto p = nodes_[from].dev->transmit(now)) {
        moved = true;
        send(from, std::move(*p));
      }
    }
    return moved;
  }

  void send(int from, softrdma::core::TxPacket p) {
    Stats& s = stats[from];
    const Faults& f = faults[from];
    ++s.sent;
    if (!link_up || uniform() < f.loss) {
      ++s.lost;
      return;
    }
    Time queued = 0;  // how long the packet waits in the bottleneck's queue
    if (f.queue != 0) {
      Time& free_at = queue_free_at_[from];  // when the queue has drained what it holds
      free_at = std::max(free_at, now);
      if (free_at - now >= f.queue * f.drain_every) {
        ++s.overflowed;
        return;
      }
      free_at += f.drain_every;
      queued = free_at - now;
    }
    if (uniform() < f.corrupt && !p.bytes.empty()) {
      ++s.corrupted;
      const std::size_t at = std::uniform_int_distribution<std::size_t>(0, p.bytes.size() - 1)(rng_);
      p.bytes[at] ^= static_cast<std::uint8_t>(1u << std::uniform_int_distribution<int>(0, 7)(rng_));
    }
    const int copies = uniform() < f.duplicate ? 2 : 1;
    if (copies == 2) ++s.duplicated;
    for (int c = 0; c < copies; ++c) {
      Time at = now + queued + f.delay;
      if (uniform() < f.reorder) {
        ++s.reordered;
        at += std::uniform_int_distribution<Time>(1, f.reorder_by)(rng_);
      }
      in_flight_.emplace(std::make_pair(at, seq_++), Packet{1 - from, p});
    }
  }

  bool deliver_due() {
    bool moved = false;
    while (!in_flight_.empty() && in_flight_.begin()->first.first <= now) {
      Packet p = std::move(in_flight_.begin()->second);
      in_flight_.erase(in_flight_.begin());
      ++stats[1 - p.to].delivered;
      nodes_[p.to].dev->receive(now, as_received(p.tx));
      moved = true;
    }
    return moved;
  }

  std::mt19937_64 rng_;
  Node nodes_[2];
  std::map<std::pair<Time, std::uint64_t>, Packet> in_flight_;  // by arrival time, then send order
  std::uint64_t seq_ = 0;
  Time queue_free_at_[2] = {0, 0};
};

}  // namespace test
