// Embedded hosts joined by the kernel's loopback UDP: a host with a registered buffer and
// CQs, RC QPs connected between two of them (or within one), and waits with a time limit.
//
// ctest runs test cases in parallel, each in its own process, so each test case binds
// addresses of its own in 127.83.<case>.0/24 (all of 127/8 is loopback on Linux).
#pragma once

#include <catch2/catch.hpp>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "emulator/host/embedded_host.hpp"
#include "tests/net/eventually.hpp"

namespace test {

namespace core = softrdma::core;
namespace host = softrdma::host;
using namespace std::chrono_literals;

inline std::unique_ptr<host::EmbeddedHost> start_host(const host::HostConfig& c) {
  host::HostStart s = host::EmbeddedHost::start(c);
  INFO("starting a host on " << c.ip.value_or("127.0.0.N") << ": " << s.error);
  REQUIRE(s.host);
  return std::move(s.host);
}

inline host::HostConfig config_at(const std::string& ip) {
  host::HostConfig c;
  c.ip = ip;
  return c;
}

inline std::unique_ptr<host::EmbeddedHost> start_host(const std::string& ip) { return start_host(config_at(ip)); }

struct Node {
  explicit Node(const std::string& ip, std::size_t buffer_bytes = 4 << 20) : Node(config_at(ip), buffer_bytes) {}
  explicit Node(const host::HostConfig& config, std::size_t buffer_bytes = 4 << 20)
      : buffer(buffer_bytes), host(start_host(config)) {
    host->call([&](core::Device& d, core::Time) {
      pd = *d.alloc_pd();
      send_cq = *d.create_cq(4096);
      recv_cq = *d.create_cq(4096);
      const std::uint32_t acc = core::access::local_write | core::access::remote_write | core::access::remote_read |
                                core::access::remote_atomic;
      mr = *d.reg_mr(pd, addr(), buffer.size(), addr(), acc);
    });
  }

  std::uint64_t addr(std::size_t offset = 0) const { return reinterpret_cast<std::uint64_t>(buffer.data()) + offset; }
  core::Sge sge(std::size_t offset, std::uint32_t length) const { return {addr(offset), length, mr.lkey}; }

  // Polls `cq` (through the host's fast path) until `n` completions came, for 10 s at most:
  // every 100 us, or without a pause (`busy`), as perftest does.
  std::vector<core::Wc> wait(std::uint32_t cq, std::size_t n, bool busy = false) {
    std::vector<core::Wc> got;
    std::vector<core::Wc> batch(64);
    const auto poll = [&] {
      const int k = host->poll_cq(cq, batch);
      if (k < 0) FAIL("poll_cq returned " << k);
      got.insert(got.end(), batch.begin(), batch.begin() + k);
      return got.size() >= n;
    };
    const auto end = std::chrono::steady_clock::now() + 10s;
    const bool done = busy ? [&] {
      while (!poll())
        if (std::chrono::steady_clock::now() > end) return false;
      return true;
    }() : eventually(poll);
    INFO("completions: " << got.size() << " of " << n);
    REQUIRE(done);
    return got;
  }

  void post_send(std::uint32_t qpn, const core::SendWr& w) {
    REQUIRE(host->call([&](core::Device& d, core::Time now) { return d.post_send(now, qpn, w); }) == 0);
  }
  void post_recv(std::uint32_t qpn, std::uint64_t id, std::size_t offset, std::uint32_t length) {
    core::RecvWr r;
    r.wr_id = id;
    r.sg_list = {sge(offset, length)};
    REQUIRE(host->call([&](core::Device& d, core::Time) { return d.post_recv(qpn, r); }) == 0);
  }

  std::vector<std::uint8_t> buffer;  // operator new aligns it for the 8-byte atomics
  std::uint32_t pd = 0, send_cq = 0, recv_cq = 0;
  core::MrKeys mr;
  // Last, so it is destroyed first: packets still arriving are placed into `buffer`.
  std::unique_ptr<host::EmbeddedHost> host;
};

struct RcOptions {
  core::Mtu mtu = core::Mtu::mtu1024;
  std::uint8_t timeout = 14;  // 67 ms
  std::uint8_t retry_cnt = 7;
  std::uint8_t rnr_retry = 7;       // infinite
  std::uint8_t min_rnr_timer = 12;  // 0.64 ms
};

inline std::uint32_t create_rc_qp(Node& n) {
  core::QpInitAttr init;
  init.qp_type = core::QpType::rc;
  init.pd = n.pd;
  init.send_cq = n.send_cq;
  init.recv_cq = n.recv_cq;
  init.cap = {1024, 1024, 4, 4, 64};
  const auto created = n.host->call([&](core::Device& d, core::Time) { return d.create_qp(init); });
  REQUIRE(created.ok());
  return created->qpn;
}

// RESET -> INIT -> RTR -> RTS, connected to `remote_qpn` at `remote_gid`, as ibv_rc_pingpong does.
inline void connect_rc(Node& n, std::uint32_t qpn, std::uint32_t remote_qpn, const core::Gid& remote_gid,
                       std::uint32_t my_psn, std::uint32_t peer_psn, const RcOptions& o) {
  using namespace core::qp_attr;
  core::QpAttr a;
  a.qp_state = core::QpState::init;
  a.port_num = 1;
  a.qp_access_flags =
      core::access::local_write | core::access::remote_write | core::access::remote_read | core::access::remote_atomic;
  const auto modify = [&](std::uint32_t mask) {
    REQUIRE(n.host->call([&](core::Device& d, core::Time now) { return d.modify_qp(now, qpn, a, mask); }) == 0);
  };
  modify(state | pkey_index | port | access_flags);
  a.qp_state = core::QpState::rtr;
  a.path_mtu = o.mtu;
  a.dest_qp_num = remote_qpn;
  a.rq_psn = peer_psn;
  a.max_dest_rd_atomic = 16;
  a.min_rnr_timer = o.min_rnr_timer;
  a.ah_attr.dgid = remote_gid;
  a.ah_attr.hop_limit = 1;  // what ibv_rc_pingpong sets
  modify(state | av | path_mtu | dest_qpn | rq_psn | max_dest_rd_atomic | min_rnr_timer);
  a.qp_state = core::QpState::rts;
  a.sq_psn = my_psn;
  a.timeout = o.timeout;
  a.retry_cnt = o.retry_cnt;
  a.rnr_retry = o.rnr_retry;
  a.max_rd_atomic = 16;
  modify(state | sq_psn | timeout | retry_cnt | rnr_retry | max_qp_rd_atomic);
}

// RESET -> INIT -> RTR -> RTS for a UD QP with `q_key` (IBTA vol. 1 s10.3.1: UD takes no
// path), each step through `modify(attr, mask)`, which returns the verb's errno.
template <class Modify>
void ud_to_rts(std::uint32_t q_key, Modify&& modify) {
  using namespace core::qp_attr;
  core::QpAttr a;
  a.port_num = 1;
  a.qkey = q_key;
  for (const auto& [to, mask] : {std::pair{core::QpState::init, state | pkey_index | port | qkey},
                                 std::pair{core::QpState::rtr, state}, std::pair{core::QpState::rts, state | sq_psn}}) {
    a.qp_state = to;
    REQUIRE(modify(a, mask) == 0);
  }
}

// One RC QP on each node, connected to each other. For a == b, two QPs of one device.
struct RcPair {
  RcPair(Node& a_, Node& b_, const RcOptions& o = {}) : a(a_), b(b_) {
    qa = create_rc_qp(a);
    qb = create_rc_qp(b);
    connect_rc(a, qa, qb, b.host->gid(), 0x123456, 0xFFFFF0, o);  // b's PSNs wrap early
    connect_rc(b, qb, qa, a.host->gid(), 0xFFFFF0, 0x123456, o);
  }
  Node& a;
  Node& b;
  std::uint32_t qa = 0, qb = 0;
};

// A live QP's counters (DeviceCounters::qps adds them in only when the QP is destroyed).
inline core::QpCounters qp_counters(Node& n, std::uint32_t qpn) {
  return n.host->call([&](core::Device& d, core::Time) { return d.qp(qpn)->counters; });
}

inline core::SendWr make_wr(core::WrOpcode op, std::uint64_t id, std::vector<core::Sge> sges) {
  core::SendWr w;
  w.wr_id = id;
  w.opcode = op;
  w.flags = core::send_flags::signaled;
  w.sg_list = std::move(sges);
  return w;
}

inline core::SendWr remote_wr(core::WrOpcode op, std::uint64_t id, std::vector<core::Sge> sges,
                              std::uint64_t remote_addr, std::uint32_t rkey) {
  core::SendWr w = make_wr(op, id, std::move(sges));
  w.remote_addr = remote_addr;
  w.rkey = rkey;
  return w;
}

inline void fill_pattern(std::vector<std::uint8_t>& v, std::size_t offset, std::size_t length, std::uint32_t seed) {
  std::uint32_t x = seed * 2654435761u + 1;
  for (std::size_t i = 0; i < length; ++i) {
    x = x * 1664525u + 1013904223u;  // a 32-bit LCG: different bytes at every offset
    v[offset + i] = static_cast<std::uint8_t>(x >> 24);
  }
}

}  // namespace test
