// Helpers for the verbs-level tests (verbs_objects_test.cpp, error_paths_test.cpp): work
// requests in one line, posting, waiting for completions over a Pair, draining events, and a
// bare device with a chosen configuration for the object tables.
#pragma once

#include <catch2/catch.hpp>
#include <cstdint>
#include <vector>

#include "tests/core/engine_fixture.hpp"

namespace test {

using core::WcOpcode;
using core::WcStatus;
using core::WrOpcode;

inline core::SendWr make_wr(WrOpcode op, std::uint64_t id, std::vector<core::Sge> sges,
                            std::uint32_t flags = core::send_flags::signaled) {
  core::SendWr w;
  w.wr_id = id;
  w.opcode = op;
  w.flags = flags;
  w.sg_list = std::move(sges);
  return w;
}

// An RDMA or atomic request aimed at `remote_addr` under `rkey`.
inline core::SendWr remote_wr(WrOpcode op, std::uint64_t id, std::vector<core::Sge> sges, std::uint64_t remote_addr,
                              std::uint32_t rkey) {
  core::SendWr w = make_wr(op, id, std::move(sges));
  w.remote_addr = remote_addr;
  w.rkey = rkey;
  return w;
}

inline core::RecvWr recv_wr(std::uint64_t id, std::vector<core::Sge> sges) {
  core::RecvWr r;
  r.wr_id = id;
  r.sg_list = std::move(sges);
  return r;
}

inline void post_recv(Side& s, std::uint64_t id, std::size_t offset, std::uint32_t len) {
  REQUIRE(s.dev->post_recv(s.qpn, recv_wr(id, {s.sge(offset, len)})) == 0);
}

inline void post_send(Pair& p, Side& s, const core::SendWr& w) { REQUIRE(s.dev->post_send(p.net.now, s.qpn, w) == 0); }

// Runs the network until `cq` of `s` has delivered `n` completions (and returns them).
inline std::vector<core::Wc> wait_wcs(Pair& p, Side& s, std::uint32_t cq, std::size_t n) {
  std::vector<core::Wc> got;
  const bool done = p.net.run_until([&] {
    for (const auto& wc : s.poll(cq)) got.push_back(wc);
    return got.size() >= n;
  });
  INFO("completions: " << got.size() << " of " << n);
  REQUIRE(done);
  return got;
}

// Lets the packets in flight arrive (100 us of virtual time: no RC timer fires that soon).
inline void settle(Pair& p) {
  p.net.run_until([] { return false; }, 100'000);
}

// The status of one signaled request from a to b, after the network settles.
inline WcStatus status_of(Pair& p, const core::SendWr& w) {
  post_send(p, p.a, w);
  const core::Wc wc = wait_wcs(p, p.a, p.a.send_cq, 1).at(0);
  CHECK(wc.wr_id == w.wr_id);  // not an earlier WR's completion
  return wc.status;
}

inline std::vector<core::AsyncEvent> async_events(core::Device& d) {
  std::vector<core::AsyncEvent> out;
  while (auto e = d.next_async_event()) out.push_back(*e);
  return out;
}

inline core::QpState state_of(const Side& s) { return s.dev->qp(s.qpn)->state(); }

// A device without QPs, for the object tables; `limits` shrinks them.
struct Bare {
  explicit Bare(core::DeviceConfig c = {}) : dev(with_gid(std::move(c)), memory) {}

  static core::DeviceConfig with_gid(core::DeviceConfig c) {
    if (c.gids.empty()) c.gids = {ipv4_gid(1)};
    return c;
  }
  std::uint64_t addr(std::size_t offset = 0) const { return reinterpret_cast<std::uint64_t>(buffer.data()) + offset; }
  std::uint32_t pd() { return *dev.alloc_pd(); }
  std::uint32_t cq() { return *dev.create_cq(16); }
  core::QpInitAttr qp_attr(std::uint32_t pd, std::uint32_t cq, core::QpType type = core::QpType::rc) const {
    core::QpInitAttr a;
    a.qp_type = type;
    a.pd = pd;
    a.send_cq = a.recv_cq = cq;
    a.cap = {4, 4, 2, 2, 64};
    return a;
  }
  // RESET -> INIT -> ERR: a QP whose every posted WR completes at once with WR_FLUSH_ERR.
  void to_error(std::uint32_t qpn) {
    core::QpAttr a;
    a.qp_state = core::QpState::init;
    a.port_num = 1;
    using namespace core::qp_attr;
    REQUIRE(dev.modify_qp(0, qpn, a, state | pkey_index | port | access_flags) == 0);
    a.qp_state = core::QpState::err;
    REQUIRE(dev.modify_qp(0, qpn, a, state) == 0);
  }

  core::DirectMemory memory;
  core::Device dev;
  std::vector<std::uint8_t> buffer = std::vector<std::uint8_t>(1 << 16);
};

}  // namespace test
