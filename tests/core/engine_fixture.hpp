// Two engines with one QP each, connected the way ibv_rc_pingpong connects them, and a
// registered buffer on each side: the starting point of the engine's scenario and property
// tests.
#pragma once

#include <catch2/catch.hpp>
#include <cstdint>
#include <memory>
#include <vector>

#include "emulator/core/device.hpp"
#include "tests/core/sim_network.hpp"

namespace test {

namespace core = softrdma::core;

struct Side {
  explicit Side(std::uint8_t last_octet, std::size_t buffer_bytes) : Side(ipv4_gid(last_octet), buffer_bytes) {}
  Side(const core::Gid& gid, std::size_t buffer_bytes, core::DeviceConfig c = {}) : buffer(buffer_bytes) {
    c.gids = {gid};
    dev = std::make_unique<core::Device>(c, memory);
    pd = *dev->alloc_pd();
    send_cq = *dev->create_cq(4096);
    recv_cq = *dev->create_cq(4096);
    const std::uint32_t acc = core::access::local_write | core::access::remote_write | core::access::remote_read |
                              core::access::remote_atomic | core::access::mw_bind;
    mr = *dev->reg_mr(pd, addr(), buffer.size(), addr(), acc);
  }

  const core::Gid& gid() const { return dev->config().gids.at(0); }
  std::uint64_t addr(std::size_t offset = 0) const { return reinterpret_cast<std::uint64_t>(buffer.data()) + offset; }

  core::Sge sge(std::size_t offset, std::uint32_t length) const { return {addr(offset), length, mr.lkey}; }

  std::vector<core::Wc> poll(std::uint32_t cq) {
    std::vector<core::Wc> out(64);
    const int n = dev->poll_cq(cq, out);  // no REQUIRE: this runs on every step of a simulation
    out.resize(n > 0 ? static_cast<std::size_t>(n) : 0);
    return out;
  }

  core::DirectMemory memory;
  std::vector<std::uint8_t> buffer;
  std::unique_ptr<core::Device> dev;
  std::uint32_t pd = 0, send_cq = 0, recv_cq = 0, qpn = 0;
  core::MrKeys mr;
};

struct QpOptions {
  core::QpType type = core::QpType::rc;
  core::Mtu mtu = core::Mtu::mtu1024;
  std::uint8_t timeout = 14;  // 67 ms
  std::uint8_t retry_cnt = 7;
  std::uint8_t rnr_retry = 7;
  std::uint8_t min_rnr_timer = 1;  // 0.01 ms
  std::uint8_t rd_atomic = 16;
  std::uint32_t max_send_wr = 1024, max_recv_wr = 1024;
  std::uint32_t a_psn = 0x123456, b_psn = 0xFFFFF0;  // b's PSNs wrap early
  std::uint32_t srq = 0;                             // the QP receives from this SRQ of its device
  bool sq_sig_all = false;
};

// Moves the QP s.qpn from RESET to RTS, connected to `remote_qpn` at `remote_gid`.
inline void connect(Side& s, std::uint32_t remote_qpn, const core::Gid& remote_gid, std::uint32_t my_psn,
                    std::uint32_t peer_psn, const QpOptions& o) {
  using namespace core::qp_attr;
  core::QpAttr a;
  a.qp_state = core::QpState::init;
  a.pkey_index = 0;
  a.port_num = 1;
  a.qp_access_flags =
      core::access::local_write | core::access::remote_write | core::access::remote_read | core::access::remote_atomic;
  a.qkey = 0x11111111;
  const std::uint32_t init_mask = state | pkey_index | port | (o.type == core::QpType::ud ? qkey : access_flags);
  REQUIRE(s.dev->modify_qp(0, s.qpn, a, init_mask) == 0);

  a.qp_state = core::QpState::rtr;
  a.path_mtu = o.mtu;
  a.dest_qp_num = remote_qpn;
  a.rq_psn = peer_psn;
  a.max_dest_rd_atomic = o.rd_atomic;
  a.min_rnr_timer = o.min_rnr_timer;
  a.ah_attr.dgid = remote_gid;
  std::uint32_t rtr_mask = state;
  if (o.type == core::QpType::rc) rtr_mask |= av | path_mtu | dest_qpn | rq_psn | max_dest_rd_atomic | min_rnr_timer;
  if (o.type == core::QpType::uc) rtr_mask |= av | path_mtu | dest_qpn | rq_psn;
  REQUIRE(s.dev->modify_qp(0, s.qpn, a, rtr_mask) == 0);

  a.qp_state = core::QpState::rts;
  a.sq_psn = my_psn;
  a.timeout = o.timeout;
  a.retry_cnt = o.retry_cnt;
  a.rnr_retry = o.rnr_retry;
  a.max_rd_atomic = o.rd_atomic;
  std::uint32_t rts_mask = state | sq_psn;
  if (o.type == core::QpType::rc) rts_mask |= timeout | retry_cnt | rnr_retry | max_qp_rd_atomic;
  REQUIRE(s.dev->modify_qp(0, s.qpn, a, rts_mask) == 0);
}

// Creates a QP on `s` (it becomes s.qpn) and connects it.
inline void bring_up(Side& s, std::uint32_t remote_qpn, const core::Gid& remote_gid, std::uint32_t my_psn,
                     std::uint32_t peer_psn, const QpOptions& o) {
  core::QpInitAttr init;
  init.qp_type = o.type;
  init.pd = s.pd;
  init.send_cq = s.send_cq;
  init.recv_cq = s.recv_cq;
  init.srq = o.srq;
  init.cap = {o.max_send_wr, o.max_recv_wr, 16, 16, 256};
  init.sq_sig_all = o.sq_sig_all;
  const auto created = s.dev->create_qp(init);
  REQUIRE(created.ok());
  s.qpn = created->qpn;
  connect(s, remote_qpn, remote_gid, my_psn, peer_psn, o);
}

struct Pair {
  explicit Pair(const QpOptions& o = {}, std::size_t buffer_bytes = 1 << 20, std::uint64_t seed = 1)
      : Pair(ipv4_gid(1), ipv4_gid(2), o, buffer_bytes, seed) {}
  Pair(const core::Gid& gid_a, const core::Gid& gid_b, const QpOptions& o = {}, std::size_t buffer_bytes = 1 << 20,
       std::uint64_t seed = 1)
      : a(gid_a, buffer_bytes), b(gid_b, buffer_bytes), net(*a.dev, *b.dev, seed) {
    bring_up_pair(o);
  }

  void bring_up_pair(const QpOptions& o) {
    // QPNs are allocated from first_qpn in order, so each side's first QP is 0x11.
    const std::uint32_t first = a.dev->config().first_qpn;
    bring_up(a, first, b.gid(), o.a_psn, o.b_psn, o);
    bring_up(b, first, a.gid(), o.b_psn, o.a_psn, o);
  }

  Side a, b;
  SimNetwork net;
};

}  // namespace test
