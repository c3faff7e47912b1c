// The error paths of QPs and of the device: verbs refusals with their exact errnos, work
// requests that fail with their exact completion statuses, the error state and its flushes,
// UD's drops and length errors, IPv6 GIDs, what the receive path drops, and the timers that
// give up (RNR retries, transport retries).
#include <catch2/catch.hpp>
#include <cerrno>
#include <cstring>
#include <functional>

#include "emulator/core/roce_headers.hpp"
#include "tests/core/verbs_test_util.hpp"
#include "wire/icrc.hpp"
#include "wire/ipv4.hpp"
#include "wire/ipv6.hpp"
#include "wire/opcode.hpp"
#include "wire/udp.hpp"

using namespace test;
namespace acc = core::access;
using core::QpState;

namespace {

constexpr core::Gid kFd00_1 = {0xFD, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
constexpr core::Gid kFd00_2 = {0xFD, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2};

QpOptions with_type(core::QpType type) {
  QpOptions o;
  o.type = type;
  return o;
}

// A UD SEND from a to b's QP through an AH on a for b's GID; `qkey` is the Q_Key it names.
core::SendWr ud_send(Pair& p, std::uint64_t id, std::vector<core::Sge> sges, std::uint32_t qkey = 0x11111111) {
  core::AddressVector av;
  av.dgid = p.b.gid();
  const auto ah = p.a.dev->create_ah(p.a.pd, av);
  REQUIRE(ah.ok());
  core::SendWr w = make_wr(WrOpcode::send, id, std::move(sges));
  w.ah = *ah;
  w.remote_qpn = p.b.qpn;
  w.remote_qkey = qkey;
  return w;
}

core::RxPacket rx_of(const std::vector<std::uint8_t>& bytes, const core::TxPacket& tx, bool icrc_checked) {
  return {bytes, tx.route.src, tx.route.dst, tx.route.src_port, icrc_checked};
}

// Takes every packet `s` has to send now, without the network.
std::vector<core::TxPacket> take_all(Pair& p, Side& s) {
  std::vector<core::TxPacket> out;
  while (auto tx = s.dev->transmit(p.net.now)) out.push_back(std::move(*tx));
  return out;
}

void deliver(Pair& p, Side& to, const core::TxPacket& tx) { to.dev->receive(p.net.now, rx_of(tx.bytes, tx, false)); }

void modify_state(Side& s, QpState to) {
  core::QpAttr attr;
  attr.qp_state = to;
  REQUIRE(s.dev->modify_qp(0, s.qpn, attr, core::qp_attr::state) == 0);
}

}  // namespace

// --- QP verbs ------------------------------------------------------------------------------------

TEST_CASE("QP: create_qp refuses a bad PD, CQ, SRQ, type or capability with EINVAL", "[core][errors][qp]") {
  Bare b;
  const std::uint32_t pd = b.pd(), cq = b.cq();
  const core::DeviceLimits lim;
  const std::vector<std::pair<const char*, std::function<void(core::QpInitAttr&)>>> bad = {
      {"pd", [&](core::QpInitAttr& a) { a.pd = pd + 1; }},
      {"send_cq", [&](core::QpInitAttr& a) { a.send_cq = cq + 1; }},
      {"recv_cq", [&](core::QpInitAttr& a) { a.recv_cq = 0; }},
      {"srq", [&](core::QpInitAttr& a) { a.srq = 3; }},
      {"type", [&](core::QpInitAttr& a) { a.qp_type = static_cast<core::QpType>(7); }},
      {"max_send_wr", [&](core::QpInitAttr& a) { a.cap.max_send_wr = lim.max_qp_wr + 1; }},
      {"max_recv_wr", [&](core::QpInitAttr& a) { a.cap.max_recv_wr = lim.max_qp_wr + 1; }},
      {"max_send_sge", [&](core::QpInitAttr& a) { a.cap.max_send_sge = lim.max_sge + 1; }},
      {"max_recv_sge", [&](core::QpInitAttr& a) { a.cap.max_recv_sge = lim.max_sge + 1; }},
      {"max_inline_data", [&](core::QpInitAttr& a) { a.cap.max_inline_data = lim.max_inline_data + 1; }},
  };
  for (const auto& [what, spoil] : bad) {
    INFO(what);
    core::QpInitAttr attr = b.qp_attr(pd, cq);
    spoil(attr);
    CHECK(b.dev.create_qp(attr).error() == EINVAL);
  }
  // Nothing was created: the PD and CQ are free.
  CHECK(b.dev.destroy_cq(cq) == 0);
  CHECK(b.dev.dealloc_pd(pd) == 0);
}

TEST_CASE("QP: zero queue sizes get one entry, a full QP table is ENOMEM", "[core][errors][qp]") {
  core::DeviceConfig c;
  c.max_qp = 1;
  Bare b(c);
  const std::uint32_t pd = b.pd(), cq = b.cq();
  core::QpInitAttr attr = b.qp_attr(pd, cq);
  attr.cap = {};
  const auto qp = b.dev.create_qp(attr);
  REQUIRE(qp.ok());
  CHECK(qp->qpn == c.first_qpn);
  CHECK(qp->cap.max_send_wr == 1);
  CHECK(qp->cap.max_recv_wr == 1);
  CHECK(b.dev.create_qp(attr).error() == ENOMEM);
  CHECK(b.dev.destroy_qp(qp->qpn) == 0);
  CHECK(b.dev.destroy_qp(qp->qpn) == EINVAL);
  CHECK(b.dev.destroy_qp(1) == EINVAL);  // below first_qpn
  CHECK(b.dev.create_qp(attr).ok());
}

TEST_CASE("QP: posting before RTS is EINVAL for sends, receives wait from INIT on", "[core][errors][qp]") {
  Pair p;
  const core::SendWr send = make_wr(WrOpcode::send, 1, {p.a.sge(0, 8)});
  const auto attempt_send = [&] { return p.a.dev->post_send(p.net.now, p.a.qpn, send); };
  const auto attempt_recv = [&] { return p.a.dev->post_recv(p.a.qpn, recv_wr(1, {p.a.sge(0, 8)})); };
  modify_state(p.a, QpState::reset);
  CHECK(attempt_send() == EINVAL);
  CHECK(attempt_recv() == EINVAL);
  CHECK(p.a.dev->post_send(p.net.now, p.a.qpn + 1, send) == EINVAL);  // no such QP
  CHECK(p.a.dev->post_recv(p.a.qpn + 1, recv_wr(1, {})) == EINVAL);

  core::QpAttr a;
  a.qp_state = QpState::init;
  a.port_num = 1;
  using namespace core::qp_attr;
  REQUIRE(p.a.dev->modify_qp(0, p.a.qpn, a, state | pkey_index | port | access_flags) == 0);
  CHECK(attempt_send() == EINVAL);
  CHECK(attempt_recv() == 0);
  a.qp_state = QpState::rtr;
  a.ah_attr.dgid = p.b.gid();
  a.dest_qp_num = p.b.qpn;
  REQUIRE(p.a.dev->modify_qp(0, p.a.qpn, a,
                             state | av | path_mtu | dest_qpn | rq_psn | max_dest_rd_atomic | min_rnr_timer) == 0);
  CHECK(attempt_send() == EINVAL);
  CHECK(attempt_recv() == 0);
}

TEST_CASE("QP: an opcode the QP type lacks is EINVAL", "[core][errors][qp]") {
  const auto refused = [](core::QpType type, std::vector<WrOpcode> ops) {
    Pair p(with_type(type));
    for (const WrOpcode op : ops) {
      INFO("QP type " << int(type) << ", opcode " << int(op));
      core::SendWr w = make_wr(op, 1, {p.a.sge(0, 8)});
      CHECK(p.a.dev->post_send(p.net.now, p.a.qpn, w) == EINVAL);
    }
    CHECK(p.a.dev->qp(p.a.qpn)->sq.empty());
  };
  refused(core::QpType::uc, {WrOpcode::rdma_read, WrOpcode::atomic_cmp_and_swp, WrOpcode::atomic_fetch_and_add,
                             WrOpcode::send_with_inv});  // UC has no SEND with Invalidate opcode
  refused(core::QpType::ud,
          {WrOpcode::rdma_read, WrOpcode::rdma_write, WrOpcode::rdma_write_with_imm, WrOpcode::atomic_fetch_and_add,
           WrOpcode::local_inv, WrOpcode::bind_mw, WrOpcode::send_with_inv});
  refused(core::QpType::rc, {static_cast<WrOpcode>(42)});
}

TEST_CASE("QP: too many SGEs, inline data too long, or a UD WR without an AH is EINVAL", "[core][errors][qp]") {
  Pair p;  // max_send_sge 16, max_inline_data 256
  const std::vector<core::Sge> sges(17, p.a.sge(0, 4));
  CHECK(p.a.dev->post_send(p.net.now, p.a.qpn, make_wr(WrOpcode::send, 1, sges)) == EINVAL);
  core::SendWr w = make_wr(WrOpcode::send, 1, {}, core::send_flags::inline_data);
  w.inline_data.assign(257, 1);
  CHECK(p.a.dev->post_send(p.net.now, p.a.qpn, w) == EINVAL);
  w.inline_data.resize(256);
  CHECK(p.a.dev->post_send(p.net.now, p.a.qpn, w) == 0);
  CHECK(p.a.dev->post_recv(p.a.qpn, recv_wr(1, sges)) == EINVAL);  // max_recv_sge 16

  Pair u(with_type(core::QpType::ud));
  CHECK(u.a.dev->post_send(u.net.now, u.a.qpn, make_wr(WrOpcode::send, 1, {u.a.sge(0, 8)})) == EINVAL);
}

TEST_CASE("QP: a full send or receive queue is ENOMEM", "[core][errors][qp]") {
  QpOptions o;
  o.max_send_wr = 2;
  o.max_recv_wr = 2;
  Pair p(o);
  for (int i = 0; i < 2; ++i) {
    post_send(p, p.a, make_wr(WrOpcode::send, i, {p.a.sge(0, 8)}));
    post_recv(p.a, i, 0, 8);
  }
  CHECK(p.a.dev->post_send(p.net.now, p.a.qpn, make_wr(WrOpcode::send, 3, {p.a.sge(0, 8)})) == ENOMEM);
  CHECK(p.a.dev->post_recv(p.a.qpn, recv_wr(3, {p.a.sge(0, 8)})) == ENOMEM);
}

TEST_CASE("QP: inline data is copied at post time and delivered", "[core][errors][qp]") {
  Pair p;
  post_recv(p.b, 1, 0, 256);
  core::SendWr w = make_wr(WrOpcode::send, 1, {core::Sge{0, 200, 0xDEAD00}},  // the SGE is not read
                           core::send_flags::signaled | core::send_flags::inline_data);
  for (int i = 0; i < 200; ++i) w.inline_data.push_back(static_cast<std::uint8_t>(i + 17));
  post_send(p, p.a, w);
  const std::vector<std::uint8_t> sent = w.inline_data;
  w.inline_data.assign(200, 0);  // the caller's buffer may change after the post
  const auto rwc = wait_wcs(p, p.b, p.b.recv_cq, 1).at(0);
  CHECK(rwc.status == WcStatus::success);
  CHECK(rwc.byte_len == 200);
  CHECK(std::memcmp(p.b.buffer.data(), sent.data(), 200) == 0);
  const auto swc = wait_wcs(p, p.a, p.a.send_cq, 1).at(0);
  CHECK(swc.status == WcStatus::success);
  CHECK(swc.byte_len == 200);
}

TEST_CASE("QP: only signaled WRs complete, unless sq_sig_all", "[core][errors][qp]") {
  QpOptions o;
  o.sq_sig_all = GENERATE(false, true);
  Pair p(o);
  for (int i = 0; i < 3; ++i) post_recv(p.b, i, 64 * i, 64);
  post_send(p, p.a, make_wr(WrOpcode::send, 1, {p.a.sge(0, 8)}, 0));
  post_send(p, p.a, make_wr(WrOpcode::send, 2, {p.a.sge(0, 8)}, core::send_flags::signaled));
  post_send(p, p.a, make_wr(WrOpcode::send, 3, {p.a.sge(0, 8)}, 0));
  CHECK(wait_wcs(p, p.b, p.b.recv_cq, 3).size() == 3);
  REQUIRE(p.net.run_until([&] { return p.a.dev->qp(p.a.qpn)->sq.empty(); }));  // all acknowledged
  std::vector<std::uint64_t> ids;
  for (const core::Wc& wc : p.a.poll(p.a.send_cq)) {
    CHECK(wc.status == WcStatus::success);
    ids.push_back(wc.wr_id);
  }
  CHECK(ids == (o.sq_sig_all ? std::vector<std::uint64_t>{1, 2, 3} : std::vector<std::uint64_t>{2}));
}

TEST_CASE("QP: modify to ERR flushes every WR, WRs posted in ERR flush at once", "[core][errors][qp]") {
  Pair p;
  p.net.link_up = false;  // nothing is ever acknowledged
  post_recv(p.a, 10, 0, 64);
  post_recv(p.a, 11, 64, 64);
  post_send(p, p.a, make_wr(WrOpcode::send, 1, {p.a.sge(0, 8)}));
  post_send(p, p.a, make_wr(WrOpcode::send, 2, {p.a.sge(0, 8)}, 0));  // unsignaled: flushed all the same
  post_send(p, p.a, remote_wr(WrOpcode::rdma_read, 3, {p.a.sge(0, 8)}, p.b.addr(), p.b.mr.rkey));
  settle(p);  // they go out and are lost
  CHECK(p.a.poll(p.a.send_cq).empty());

  modify_state(p.a, QpState::err);
  const auto check_flushed = [&](std::uint32_t cq, std::vector<std::uint64_t> ids) {
    const auto wcs = p.a.poll(cq);
    REQUIRE(wcs.size() == ids.size());
    for (std::size_t i = 0; i < ids.size(); ++i) {
      CHECK(wcs[i].wr_id == ids[i]);
      CHECK(wcs[i].status == WcStatus::wr_flush_err);
      CHECK(wcs[i].qp_num == p.a.qpn);
    }
  };
  check_flushed(p.a.send_cq, {1, 2, 3});
  check_flushed(p.a.recv_cq, {10, 11});
  CHECK(p.a.dev->next_deadline() == std::nullopt);  // no timer runs in ERR

  post_send(p, p.a, make_wr(WrOpcode::send, 4, {p.a.sge(0, 8)}, 0));
  post_recv(p.a, 12, 0, 8);
  check_flushed(p.a.send_cq, {4});
  check_flushed(p.a.recv_cq, {12});
  CHECK_FALSE(p.a.dev->transmit(p.net.now));
}

TEST_CASE("QP: back to RESET empties the queues silently, connected again, traffic flows", "[core][errors][qp]") {
  QpOptions o;
  Pair p(o);
  post_recv(p.b, 1, 0, 64);
  modify_state(p.a, QpState::err);
  modify_state(p.a, QpState::reset);
  modify_state(p.b, QpState::reset);  // straight from RTS, with a receive posted
  CHECK(p.b.poll(p.b.recv_cq).empty());
  core::QpAttr attr;
  core::QpInitAttr init;
  REQUIRE(p.a.dev->query_qp(p.a.qpn, attr, init) == 0);
  CHECK(attr.qp_state == QpState::reset);
  CHECK(attr.sq_psn == 0);

  o.a_psn = 0x777;
  o.b_psn = 0x999;
  connect(p.a, p.b.qpn, p.b.gid(), o.a_psn, o.b_psn, o);
  connect(p.b, p.a.qpn, p.a.gid(), o.b_psn, o.a_psn, o);
  post_recv(p.b, 2, 0, 64);
  for (int i = 0; i < 64; ++i) p.a.buffer[i] = static_cast<std::uint8_t>(200 - i);
  post_send(p, p.a, make_wr(WrOpcode::send, 3, {p.a.sge(0, 64)}));
  const auto rwc = wait_wcs(p, p.b, p.b.recv_cq, 1).at(0);
  CHECK(rwc.wr_id == 2);
  CHECK(rwc.status == WcStatus::success);
  CHECK(std::memcmp(p.a.buffer.data(), p.b.buffer.data(), 64) == 0);
  CHECK(wait_wcs(p, p.a, p.a.send_cq, 1).at(0).status == WcStatus::success);
}

TEST_CASE("QP: query_qp reports what was set", "[core][errors][qp]") {
  QpOptions o;
  o.mtu = core::Mtu::mtu2048;
  o.timeout = 12;
  o.retry_cnt = 5;
  o.rnr_retry = 3;
  o.min_rnr_timer = 7;
  o.rd_atomic = 4;
  Pair p(o);
  core::QpAttr attr;
  core::QpInitAttr init;
  CHECK(p.a.dev->query_qp(p.a.qpn + 1, attr, init) == EINVAL);
  REQUIRE(p.a.dev->query_qp(p.a.qpn, attr, init) == 0);
  CHECK(attr.qp_state == QpState::rts);
  CHECK(attr.cur_qp_state == QpState::rts);
  CHECK(attr.path_mtu == core::Mtu::mtu2048);
  CHECK(attr.dest_qp_num == p.b.qpn);
  CHECK(attr.sq_psn == o.a_psn);
  CHECK(attr.rq_psn == o.b_psn);
  CHECK(attr.timeout == 12);
  CHECK(attr.retry_cnt == 5);
  CHECK(attr.rnr_retry == 3);
  CHECK(attr.min_rnr_timer == 7);
  CHECK(attr.max_rd_atomic == 4);
  CHECK(attr.max_dest_rd_atomic == 4);
  CHECK(attr.qp_access_flags == (acc::local_write | acc::remote_write | acc::remote_read | acc::remote_atomic));
  CHECK(attr.ah_attr.dgid == p.b.gid());
  CHECK(attr.port_num == 1);
  CHECK(init.qp_type == core::QpType::rc);
  CHECK(init.pd == p.a.pd);
  CHECK(init.send_cq == p.a.send_cq);
  CHECK(init.recv_cq == p.a.recv_cq);
  CHECK(init.srq == 0);
  CHECK(init.cap.max_send_wr == 1024);
  CHECK(init.cap.max_send_sge == 16);
  CHECK(init.cap.max_inline_data == 256);
  CHECK_FALSE(init.sq_sig_all);

  // The PSNs move with traffic: one SEND of one packet.
  post_recv(p.b, 1, 0, 64);
  CHECK(status_of(p, make_wr(WrOpcode::send, 1, {p.a.sge(0, 64)})) == WcStatus::success);
  REQUIRE(p.a.dev->query_qp(p.a.qpn, attr, init) == 0);
  CHECK(attr.sq_psn == o.a_psn + 1);
  REQUIRE(p.b.dev->query_qp(p.b.qpn, attr, init) == 0);
  CHECK(attr.rq_psn == o.a_psn + 1);
}

TEST_CASE("QP: modify_qp checks the device's GID table and MTU", "[core][errors][qp]") {
  core::DeviceConfig c;
  c.max_mtu = core::Mtu::mtu1024;
  Bare b(c);
  const auto qp = b.dev.create_qp(b.qp_attr(b.pd(), b.cq()));
  using namespace core::qp_attr;
  core::QpAttr a;
  a.qp_state = QpState::init;
  a.port_num = 1;
  CHECK(b.dev.modify_qp(0, qp->qpn + 1, a, state | pkey_index | port | access_flags) == EINVAL);
  REQUIRE(b.dev.modify_qp(0, qp->qpn, a, state | pkey_index | port | access_flags) == 0);
  a.qp_state = QpState::rtr;
  const std::uint32_t rtr = state | av | path_mtu | dest_qpn | rq_psn | max_dest_rd_atomic | min_rnr_timer;
  a.ah_attr.sgid_index = 1;  // within the 16 entries a port may have, beyond the 1 it has
  CHECK(b.dev.modify_qp(0, qp->qpn, a, rtr) == EINVAL);
  a.ah_attr.sgid_index = 0;
  a.path_mtu = core::Mtu::mtu2048;  // above the port's MTU
  CHECK(b.dev.modify_qp(0, qp->qpn, a, rtr) == EINVAL);
  a.path_mtu = core::Mtu::mtu1024;
  CHECK(b.dev.modify_qp(0, qp->qpn, a, rtr) == 0);
}

TEST_CASE("QP: a destroyed QP's packets count as unknown_qp, its counters stay in the device's", "[core][errors][qp]") {
  Pair p;
  post_recv(p.b, 1, 0, 64);
  CHECK(status_of(p, make_wr(WrOpcode::send, 1, {p.a.sge(0, 64)})) == WcStatus::success);
  const core::QpCounters b_qp = p.b.dev->qp(p.b.qpn)->counters;
  CHECK(b_qp.rcvd_pkts == 1);
  CHECK(p.b.dev->counters().qps.rcvd_pkts == b_qp.rcvd_pkts);  // live QPs count too
  CHECK(p.b.dev->destroy_qp(p.b.qpn) == 0);
  CHECK(p.b.dev->qp(p.b.qpn) == nullptr);
  CHECK(p.b.dev->counters().qps.rcvd_pkts == b_qp.rcvd_pkts);
  CHECK(p.b.dev->counters().qps.sent_pkts == b_qp.sent_pkts);

  post_send(p, p.a, make_wr(WrOpcode::send, 2, {p.a.sge(0, 64)}));
  settle(p);
  CHECK(p.b.dev->counters().unknown_qp == 1);
}

// --- requester rules ------------------------------------------------------------------------------

TEST_CASE("Requester: an atomic needs one aligned 8-byte word: LOC_LEN_ERR", "[core][errors][requester]") {
  Pair p;
  const bool misaligned = GENERATE(false, true);
  core::SendWr w = remote_wr(WrOpcode::atomic_cmp_and_swp, 1, {p.a.sge(0, misaligned ? 8 : 4)},
                             p.b.addr(misaligned ? 4 : 0), p.b.mr.rkey);
  CHECK(status_of(p, w) == WcStatus::loc_len_err);
  CHECK(state_of(p.a) == QpState::err);
  CHECK(p.a.dev->qp(p.a.qpn)->counters.sent_pkts == 0);
}

TEST_CASE("Requester: a fence, and max_rd_atomic, hold requests back until READs complete",
          "[core][errors][requester]") {
  const bool fence = GENERATE(false, true);
  QpOptions o;
  o.rd_atomic = 1;
  Pair p(o);
  post_recv(p.b, 1, 0, 64);
  post_send(p, p.a, remote_wr(WrOpcode::rdma_read, 1, {p.a.sge(0, 64)}, p.b.addr(), p.b.mr.rkey));
  if (fence) {
    post_send(p, p.a,
              make_wr(WrOpcode::send, 2, {p.a.sge(0, 8)}, core::send_flags::signaled | core::send_flags::fence));
  } else {  // a second READ, beyond max_rd_atomic
    post_send(p, p.a, remote_wr(WrOpcode::rdma_read, 2, {p.a.sge(64, 64)}, p.b.addr(), p.b.mr.rkey));
  }
  const auto first = p.a.dev->transmit(p.net.now);
  REQUIRE(first);
  CHECK(first->bytes[0] == wire::value(wire::opcode(wire::Transport::rc, wire::Operation::read_request)));
  CHECK_FALSE(p.a.dev->transmit(p.net.now));  // held back
  p.b.dev->receive(p.net.now, rx_of(first->bytes, *first, false));
  const auto wcs = wait_wcs(p, p.a, p.a.send_cq, 2);
  CHECK(wcs[0].wr_id == 1);
  CHECK(wcs[1].wr_id == 2);
  CHECK(wcs[1].status == WcStatus::success);
}

TEST_CASE("Requester: a new WR waits while max_inflight_packets are unacknowledged", "[core][errors][requester]") {
  QpOptions o;
  o.mtu = core::Mtu::mtu256;
  Pair p(o);  // max_inflight_packets 512
  post_recv(p.b, 1, 0, 64);
  post_send(p, p.a, remote_wr(WrOpcode::rdma_write, 1, {p.a.sge(0, 600 * 256)}, p.b.addr(), p.b.mr.rkey));
  post_send(p, p.a, make_wr(WrOpcode::send, 2, {p.a.sge(0, 64)}));
  const auto burst = take_all(p, p.a);
  CHECK(burst.size() == 600);  // the WRITE, all of it; the SEND waits
  for (const auto& tx : burst) deliver(p, p.b, tx);
  const auto wcs = wait_wcs(p, p.a, p.a.send_cq, 2);
  CHECK(wcs[0].status == WcStatus::success);
  CHECK(wcs[1].status == WcStatus::success);
  CHECK(wait_wcs(p, p.b, p.b.recv_cq, 1).at(0).byte_len == 64);
}

TEST_CASE("RC: a zero-length WRITE or READ needs no rkey or address (C9-88)", "[core][errors][responder]") {
  Pair p;
  const WrOpcode op = GENERATE(WrOpcode::rdma_write, WrOpcode::rdma_write_with_imm, WrOpcode::rdma_read);
  INFO("opcode " << int(op));
  post_recv(p.b, 1, 0, 0);
  CHECK(status_of(p, remote_wr(op, 1, {}, 0, 0)) == WcStatus::success);
  if (op == WrOpcode::rdma_write_with_imm) {
    const auto rwc = wait_wcs(p, p.b, p.b.recv_cq, 1).at(0);
    CHECK(rwc.status == WcStatus::success);
    CHECK(rwc.opcode == WcOpcode::recv_rdma_with_imm);
    CHECK(rwc.byte_len == 0);
  }
  CHECK(state_of(p.b) == QpState::rts);
}

// --- what the responder cannot take ------------------------------------------------------------------

TEST_CASE("RC: a receive that cannot hold the SEND fails both ends", "[core][errors][responder]") {
  struct Case {
    const char* what;
    std::uint32_t recv_lkey_flip, recv_length;
    WcStatus responder, requester;
  };
  const Case c = GENERATE(values<Case>({
      {"too short: LOC_LEN_ERR and REM_INV_REQ_ERR", 0, 63, WcStatus::loc_len_err, WcStatus::rem_inv_req_err},
      {"not registered: LOC_PROT_ERR and REM_OP_ERR", 0x100, 64, WcStatus::loc_prot_err, WcStatus::rem_op_err},
  }));
  INFO(c.what);
  Pair p;
  REQUIRE(p.b.dev->post_recv(p.b.qpn,
                             recv_wr(5, {core::Sge{p.b.addr(), c.recv_length, p.b.mr.lkey ^ c.recv_lkey_flip}})) == 0);
  post_recv(p.b, 6, 0, 64);
  CHECK(status_of(p, make_wr(WrOpcode::send, 1, {p.a.sge(0, 64)})) == c.requester);
  const auto rwcs = wait_wcs(p, p.b, p.b.recv_cq, 2);
  CHECK(rwcs[0].wr_id == 5);
  CHECK(rwcs[0].status == c.responder);
  CHECK(rwcs[1].wr_id == 6);
  CHECK(rwcs[1].status == WcStatus::wr_flush_err);
  CHECK(state_of(p.a) == QpState::err);
  CHECK(state_of(p.b) == QpState::err);
}

// --- UC ---------------------------------------------------------------------------------------------

TEST_CASE("UC: a message the responder cannot take is dropped, the next one arrives", "[core][errors][uc]") {
  Pair p(with_type(core::QpType::uc));
  SECTION("a WRITE under a bad rkey") {
    post_send(p, p.a, remote_wr(WrOpcode::rdma_write, 1, {p.a.sge(0, 3000)}, p.b.addr(), p.b.mr.rkey + 0x100));
  }
  SECTION("a SEND without a receive") { post_send(p, p.a, make_wr(WrOpcode::send, 1, {p.a.sge(0, 3000)})); }
  CHECK(wait_wcs(p, p.a, p.a.send_cq, 1).at(0).status == WcStatus::success);  // UC: done once sent
  settle(p);
  CHECK(p.b.poll(p.b.recv_cq).empty());
  CHECK(state_of(p.b) == QpState::rts);
  post_recv(p.b, 7, 0, 64);
  post_send(p, p.a, make_wr(WrOpcode::send, 2, {p.a.sge(0, 64)}));
  const auto rwc = wait_wcs(p, p.b, p.b.recv_cq, 1).at(0);
  CHECK(rwc.wr_id == 7);
  CHECK(rwc.byte_len == 64);
}

TEST_CASE("UC: a lost packet loses its message, the receive WQE takes the next one", "[core][errors][uc]") {
  Pair p(with_type(core::QpType::uc));
  post_recv(p.b, 1, 0, 4096);
  post_send(p, p.a, make_wr(WrOpcode::send, 1, {p.a.sge(0, 3000)}));
  const auto packets = take_all(p, p.a);
  REQUIRE(packets.size() == 3);
  deliver(p, p.b, packets[0]);
  deliver(p, p.b, packets[2]);  // the middle one is lost
  CHECK(p.b.poll(p.b.recv_cq).empty());
  CHECK(p.b.dev->qp(p.b.qpn)->counters.out_of_seq_request == 1);
  for (int i = 0; i < 100; ++i) p.a.buffer[4096 + i] = static_cast<std::uint8_t>(i ^ 0x33);
  post_send(p, p.a, make_wr(WrOpcode::send, 2, {p.a.sge(4096, 100)}));
  const auto rwc = wait_wcs(p, p.b, p.b.recv_cq, 1).at(0);
  CHECK(rwc.wr_id == 1);
  CHECK(rwc.status == WcStatus::success);
  CHECK(rwc.byte_len == 100);
  CHECK(std::memcmp(p.b.buffer.data(), p.a.buffer.data() + 4096, 100) == 0);
}

// --- UD -----------------------------------------------------------------------------------------------

TEST_CASE("UD: a datagram for another Q_Key is dropped, a Q_Key with the high bit set is the QP's own",
          "[core][errors][ud]") {
  Pair p(with_type(core::QpType::ud));
  post_recv(p.b, 1, 0, 40 + 64);
  CHECK(status_of(p, ud_send(p, 1, {p.a.sge(0, 64)}, 0x22222222)) == WcStatus::success);
  settle(p);
  CHECK(p.b.dev->counters().dropped == 1);
  CHECK(p.b.poll(p.b.recv_cq).empty());
  CHECK(status_of(p, ud_send(p, 2, {p.a.sge(0, 64)}, 0x80000000)) == WcStatus::success);
  const auto rwc = wait_wcs(p, p.b, p.b.recv_cq, 1).at(0);
  CHECK(rwc.status == WcStatus::success);
  CHECK(rwc.wr_id == 1);
  CHECK(p.b.dev->counters().dropped == 1);
}

TEST_CASE("UD: a message fits the port MTU, one byte more is LOC_LEN_ERR", "[core][errors][ud]") {
  Pair p(with_type(core::QpType::ud), 1 << 16);  // the port MTU is 4096
  post_recv(p.b, 1, 0, 40 + 4096);
  CHECK(status_of(p, ud_send(p, 1, {p.a.sge(0, 4096)})) == WcStatus::success);
  CHECK(wait_wcs(p, p.b, p.b.recv_cq, 1).at(0).byte_len == 40 + 4096);
  post_send(p, p.a, ud_send(p, 2, {p.a.sge(0, 4097)}));
  post_send(p, p.a, ud_send(p, 3, {p.a.sge(0, 8)}));
  const auto wcs = wait_wcs(p, p.a, p.a.send_cq, 2);
  CHECK(wcs[0].status == WcStatus::loc_len_err);
  CHECK(wcs[1].status == WcStatus::wr_flush_err);
  CHECK(p.a.dev->qp(p.a.qpn)->counters.sent_pkts == 1);
  // A UD send error stops only the send queue: SQE (s10.3.1). Receives go on, and
  // SQE -> RTS resumes sending.
  CHECK(state_of(p.a) == QpState::sqe);
  post_recv(p.a, 7, 0, 40 + 64);
  core::SendWr back = ud_send(p, 8, {p.b.sge(0, 64)});
  core::AddressVector to_a;
  to_a.dgid = ipv4_gid(1);
  back.ah = *p.b.dev->create_ah(p.b.pd, to_a);
  back.remote_qpn = p.a.qpn;
  post_send(p, p.b, back);
  CHECK(wait_wcs(p, p.a, p.a.recv_cq, 1).at(0).status == WcStatus::success);
  modify_state(p.a, QpState::rts);
  post_recv(p.b, 9, 0, 40 + 8);
  CHECK(status_of(p, ud_send(p, 10, {p.a.sge(0, 8)})) == WcStatus::success);
}

TEST_CASE("UD: receive errors complete the receive, without one the datagram is dropped", "[core][errors][ud]") {
  Pair p(with_type(core::QpType::ud));
  SECTION("no receive posted") {
    CHECK(status_of(p, ud_send(p, 1, {p.a.sge(0, 64)})) == WcStatus::success);
    settle(p);
    CHECK(p.b.dev->counters().dropped == 1);
    CHECK(p.b.poll(p.b.recv_cq).empty());
  }
  SECTION("too small for the GRH and the payload") {
    post_recv(p.b, 5, 0, 40 + 63);
    CHECK(status_of(p, ud_send(p, 1, {p.a.sge(0, 64)})) == WcStatus::success);
    const auto rwc = wait_wcs(p, p.b, p.b.recv_cq, 1).at(0);
    CHECK(rwc.wr_id == 5);
    CHECK(rwc.status == WcStatus::loc_len_err);
  }
  SECTION("an unregistered receive buffer") {
    REQUIRE(p.b.dev->post_recv(p.b.qpn, recv_wr(5, {core::Sge{p.b.addr(), 128, p.b.mr.lkey + 0x100}})) == 0);
    CHECK(status_of(p, ud_send(p, 1, {p.a.sge(0, 64)})) == WcStatus::success);
    const auto rwc = wait_wcs(p, p.b, p.b.recv_cq, 1).at(0);
    CHECK(rwc.wr_id == 5);
    CHECK(rwc.status == WcStatus::loc_prot_err);
  }
  CHECK(state_of(p.b) == QpState::rts);
}

TEST_CASE("UD: an AH destroyed before its WR goes out still routes the WR, as the WQE holds its copy",
          "[core][errors][ud]") {
  Pair p(with_type(core::QpType::ud));
  post_recv(p.b, 5, 0, 40 + 64);
  const core::SendWr w = ud_send(p, 1, {p.a.sge(0, 64)});
  post_send(p, p.a, w);
  REQUIRE(p.a.dev->destroy_ah(w.ah) == 0);
  CHECK(wait_wcs(p, p.a, p.a.send_cq, 1).at(0).status == WcStatus::success);
  const auto rwc = wait_wcs(p, p.b, p.b.recv_cq, 1).at(0);
  CHECK(rwc.wr_id == 5);
  CHECK(rwc.status == WcStatus::success);
  CHECK(rwc.byte_len == 40 + 64);
}

TEST_CASE("UD: the AH's traffic class, flow label and hop limit go on the packet", "[core][errors][ud]") {
  Pair p(with_type(core::QpType::ud));
  core::AddressVector av;
  av.dgid = p.b.gid();
  av.traffic_class = 0x28;
  av.flow_label = 0x12345;
  av.hop_limit = 7;
  const auto ah = p.a.dev->create_ah(p.a.pd, av);
  core::SendWr w = ud_send(p, 1, {p.a.sge(0, 64)});
  w.ah = *ah;
  post_send(p, p.a, w);
  const auto tx = p.a.dev->transmit(p.net.now);
  REQUIRE(tx);
  CHECK(tx->route.dst == p.b.gid());
  CHECK(int{tx->route.traffic_class} == 0x28);
  CHECK(tx->route.flow_label == 0x12345);
  CHECK(int{tx->route.hop_limit} == 7);
  post_recv(p.b, 1, 0, 40 + 64);
  p.b.dev->receive(p.net.now, rx_of(tx->bytes, *tx, false));  // its ICRC holds
  CHECK(p.b.poll(p.b.recv_cq).at(0).status == WcStatus::success);
}

TEST_CASE("UD: the packet leaves from the GID the AH's sgid_index names", "[core][errors][ud]") {
  core::DeviceConfig c;
  c.gids = {ipv4_gid(1), kFd00_1};
  Bare b(c);
  const std::uint32_t pd = b.pd();
  const auto qp = b.dev.create_qp(b.qp_attr(pd, b.cq(), core::QpType::ud));
  REQUIRE(qp.ok());
  using namespace core::qp_attr;
  core::QpAttr a;
  for (const auto& [to, mask] : {std::pair{QpState::init, state | pkey_index | port | qkey},
                                 std::pair{QpState::rtr, state}, std::pair{QpState::rts, state | sq_psn}}) {
    a.qp_state = to;
    a.port_num = 1;
    REQUIRE(b.dev.modify_qp(0, qp->qpn, a, mask) == 0);
  }
  const auto mr = b.dev.reg_mr(pd, b.addr(), 64, b.addr(), 0);
  const std::uint8_t index = GENERATE(as<std::uint8_t>{}, 0, 1);
  core::AddressVector av;
  av.sgid_index = index;
  av.dgid = index == 0 ? ipv4_gid(2) : kFd00_2;
  core::SendWr w = make_wr(WrOpcode::send, 1, {core::Sge{b.addr(), 64, mr->lkey}});
  w.ah = *b.dev.create_ah(pd, av);
  w.remote_qpn = 0x99;
  REQUIRE(b.dev.post_send(0, qp->qpn, w) == 0);
  const auto tx = b.dev.transmit(0);
  REQUIRE(tx);
  CHECK(tx->route.src == c.gids[index]);
  CHECK(tx->route.dst == av.dgid);
}

// --- IPv6 GIDs ----------------------------------------------------------------------------------------

TEST_CASE("IPv6 GIDs: RC SEND and WRITE between fd00::1 and fd00::2", "[core][errors][ipv6]") {
  Pair p(kFd00_1, kFd00_2);
  for (int i = 0; i < 3000; ++i) p.a.buffer[i] = static_cast<std::uint8_t>(i * 13);
  post_recv(p.b, 1, 0, 4096);
  post_send(p, p.a, make_wr(WrOpcode::send, 1, {p.a.sge(0, 3000)}));
  post_send(p, p.a, remote_wr(WrOpcode::rdma_write, 2, {p.a.sge(0, 3000)}, p.b.addr(8192), p.b.mr.rkey));
  CHECK(wait_wcs(p, p.b, p.b.recv_cq, 1).at(0).byte_len == 3000);
  const auto wcs = wait_wcs(p, p.a, p.a.send_cq, 2);
  CHECK(wcs[0].status == WcStatus::success);
  CHECK(wcs[1].status == WcStatus::success);
  CHECK(std::memcmp(p.a.buffer.data(), p.b.buffer.data(), 3000) == 0);
  CHECK(std::memcmp(p.a.buffer.data(), p.b.buffer.data() + 8192, 3000) == 0);
  CHECK(p.a.dev->counters().icrc_err == 0);
  CHECK(p.b.dev->counters().icrc_err == 0);
}

TEST_CASE("IPv6 GIDs: a UD receive starts with the IPv6 header as its GRH", "[core][errors][ipv6]") {
  Pair p(kFd00_1, kFd00_2, with_type(core::QpType::ud));
  post_recv(p.b, 1, 0, 40 + 100);
  for (int i = 0; i < 100; ++i) p.a.buffer[i] = static_cast<std::uint8_t>(i + 1);
  CHECK(status_of(p, ud_send(p, 1, {p.a.sge(0, 100)})) == WcStatus::success);
  const auto rwc = wait_wcs(p, p.b, p.b.recv_cq, 1).at(0);
  CHECK(rwc.status == WcStatus::success);
  CHECK(rwc.byte_len == 140);
  CHECK(rwc.wc_flags == core::wc_flags::grh);
  const std::uint8_t* grh = p.b.buffer.data();
  CHECK(grh[0] >> 4 == 6);  // version
  CHECK(grh[6] == 17);      // next header: UDP
  const std::size_t udp_length = std::size_t{grh[4]} << 8 | grh[5];
  CHECK(udp_length == 8 + 12 + 8 + 100 + 4);  // UDP, BTH, DETH, payload, ICRC
  CHECK(std::memcmp(grh + 8, kFd00_1.data(), 16) == 0);
  CHECK(std::memcmp(grh + 24, kFd00_2.data(), 16) == 0);
  CHECK(std::memcmp(grh + 40, p.a.buffer.data(), 100) == 0);
}

// --- the receive path -----------------------------------------------------------------------------------

TEST_CASE("Receive path: malformed, corrupted, misaddressed and foreign packets are dropped and counted",
          "[core][errors][receive]") {
  Pair p;
  post_recv(p.b, 1, 0, 256);
  post_send(p, p.a, make_wr(WrOpcode::send, 1, {p.a.sge(0, 64)}));
  const auto tx = p.a.dev->transmit(p.net.now);
  REQUIRE(tx);
  std::vector<std::uint8_t> bytes = tx->bytes;
  bool icrc_checked = true;  // the host checked it: the edits below need no new ICRC
  std::uint64_t core::DeviceCounters::*counter = &core::DeviceCounters::dropped;
  SECTION("too short for its headers") {
    bytes.resize(10);
    counter = &core::DeviceCounters::malformed;
  }
  SECTION("a flipped bit") {
    bytes[12 + 10] ^= 0x10;
    icrc_checked = false;
    counter = &core::DeviceCounters::icrc_err;
  }
  SECTION("for a QP that does not exist") {
    bytes[7] = static_cast<std::uint8_t>(p.b.qpn + 5);
    counter = &core::DeviceCounters::unknown_qp;
  }
  SECTION("another partition's P_Key") {
    bytes[2] = 0x12;
    bytes[3] = 0x34;
  }
  SECTION("a UC opcode for an RC QP") {
    bytes[0] = wire::value(wire::opcode(wire::Transport::uc, wire::Operation::send_only));
  }
  SECTION("for a QP not yet ready to receive") {
    const auto qp = p.b.dev->create_qp([&] {
      core::QpInitAttr a;
      a.pd = p.b.pd;
      a.send_cq = a.recv_cq = p.b.recv_cq;
      return a;
    }());
    REQUIRE(qp.ok());
    bytes[7] = static_cast<std::uint8_t>(qp->qpn);
  }
  const core::DeviceCounters before = p.b.dev->counters();
  p.b.dev->receive(p.net.now, rx_of(bytes, *tx, icrc_checked));
  CHECK(p.b.dev->counters().*counter == before.*counter + 1);
  CHECK(p.b.poll(p.b.recv_cq).empty());
  CHECK_FALSE(p.b.dev->transmit(p.net.now));  // no answer of any kind
  // The packet as it was sent is still taken.
  p.b.dev->receive(p.net.now, rx_of(tx->bytes, *tx, false));
  CHECK(p.b.poll(p.b.recv_cq).at(0).status == WcStatus::success);
}

TEST_CASE("Receive path: a packet sealed with a non-zero IPv4 ID, as rxe sends, is taken and counted apart",
          "[core][errors][receive][icrc]") {
  Pair p;
  post_recv(p.b, 1, 0, 256);
  post_recv(p.b, 2, 0, 256);
  post_send(p, p.a, make_wr(WrOpcode::send, 1, {p.a.sge(0, 64)}));
  const auto tx = p.a.dev->transmit(p.net.now);
  REQUIRE(tx);
  REQUIRE(core::is_ipv4_mapped(tx->route.dst));
  // Reseal it for the headers rxe would have sent: the same, but IPv4 ID 17430.
  const std::size_t covered = tx->bytes.size() - wire::kIcrcLength;
  std::uint8_t udp[wire::Udp::length] = {};
  wire::Udp::src_port::set(udp, tx->route.src_port);
  wire::Udp::dst_port::set(udp, wire::kRoceV2Port);
  wire::Udp::total_length::set(udp, wire::Udp::length + tx->bytes.size());
  std::uint8_t ip[wire::Ipv6::length] = {};
  REQUIRE(core::write_ip_header(tx->route, sizeof udp + tx->bytes.size(), ip) == wire::Ipv4::min_length);
  wire::Ipv4::identification::set(ip, 17430);
  std::vector<std::uint8_t> bytes = tx->bytes;
  wire::store_icrc(bytes.data() + covered, wire::compute_icrc(wire::NetworkHeader::ipv4, {ip, wire::Ipv4::min_length},
                                                              udp, {bytes.data(), covered}));
  REQUIRE(bytes != tx->bytes);

  p.b.dev->receive(p.net.now, rx_of(bytes, *tx, false));
  CHECK(p.b.dev->counters().icrc_ipv4_id_solved == 1);
  CHECK(p.b.dev->counters().icrc_err == 0);
  CHECK(p.b.poll(p.b.recv_cq).at(0).status == WcStatus::success);
  // One flipped payload bit is explained by no ID: dropped as an ICRC error.
  bytes[12 + 10] ^= 0x10;
  p.b.dev->receive(p.net.now, rx_of(bytes, *tx, false));
  CHECK(p.b.dev->counters().icrc_err == 1);
  CHECK(p.b.dev->counters().icrc_ipv4_id_solved == 1);
  CHECK(p.b.poll(p.b.recv_cq).empty());
}

// --- timers ---------------------------------------------------------------------------------------------

TEST_CASE("Timers: rnr_retry 0..6 gives up after rnr_retry + 1 RNR NAKs", "[core][errors][timers]") {
  QpOptions o;
  o.rnr_retry = static_cast<std::uint8_t>(GENERATE(range(0, 7)));
  INFO("rnr_retry " << int{o.rnr_retry});
  Pair p(o);
  post_send(p, p.a, make_wr(WrOpcode::send, 1, {p.a.sge(0, 64)}));
  const auto wcs = wait_wcs(p, p.a, p.a.send_cq, 1);
  post_send(p, p.a, make_wr(WrOpcode::send, 2, {p.a.sge(0, 64)}));  // after the QP failed: flushed
  const auto flushed = p.a.poll(p.a.send_cq);
  CHECK(wcs[0].status == WcStatus::rnr_retry_exc_err);
  CHECK(wcs[0].wr_id == 1);
  REQUIRE(flushed.size() == 1);
  CHECK(flushed[0].status == WcStatus::wr_flush_err);
  CHECK(state_of(p.a) == QpState::err);
  CHECK(p.a.dev->qp(p.a.qpn)->counters.rcvd_rnr_err == o.rnr_retry + 1u);
  CHECK(p.a.dev->qp(p.a.qpn)->counters.rnr_retry_exceeded_err == 1);
  CHECK(p.b.dev->qp(p.b.qpn)->counters.send_rnr_err == o.rnr_retry + 1u);
}

TEST_CASE("Timers: RNR NAKs for a pipeline of SENDs still end in RNR_RETRY_EXC_ERR", "[core][errors][timers]") {
  QpOptions o;
  o.rnr_retry = 2;
  Pair p(o);
  for (int i = 1; i <= 3; ++i) post_send(p, p.a, make_wr(WrOpcode::send, i, {p.a.sge(0, 64)}));
  const auto wcs = wait_wcs(p, p.a, p.a.send_cq, 3);
  CHECK(wcs[0].status == WcStatus::rnr_retry_exc_err);
  CHECK(wcs[1].status == WcStatus::wr_flush_err);
  CHECK(wcs[2].status == WcStatus::wr_flush_err);
  CHECK(p.a.dev->qp(p.a.qpn)->counters.rcvd_rnr_err == 3);
  CHECK(p.a.dev->qp(p.a.qpn)->counters.local_ack_timeout_err == 0);
}

TEST_CASE("Timers: rnr_retry 7 retries for ever", "[core][errors][timers]") {
  QpOptions o;
  o.rnr_retry = 7;
  Pair p(o);
  post_send(p, p.a, make_wr(WrOpcode::send, 1, {p.a.sge(0, 64)}));
  REQUIRE(p.net.run_until([&] { return p.b.dev->qp(p.b.qpn)->counters.send_rnr_err >= 20; }));
  CHECK(p.a.poll(p.a.send_cq).empty());
  post_recv(p.b, 1, 0, 64);
  CHECK(wait_wcs(p, p.b, p.b.recv_cq, 1).at(0).status == WcStatus::success);
  CHECK(wait_wcs(p, p.a, p.a.send_cq, 1).at(0).status == WcStatus::success);
  CHECK(p.a.dev->qp(p.a.qpn)->counters.rcvd_rnr_err >= 20);
}

TEST_CASE("Timers: with the link down, retry_cnt + 1 timeouts end in RETRY_EXC_ERR", "[core][errors][timers]") {
  QpOptions o;
  o.timeout = 10;  // 4.096 us << 10
  o.retry_cnt = static_cast<std::uint8_t>(GENERATE(0, 3, 7));
  INFO("retry_cnt " << int{o.retry_cnt});
  Pair p(o);
  p.net.link_up = false;
  const core::Time start = p.net.now;
  post_recv(p.b, 1, 0, 64);
  post_send(p, p.a, make_wr(WrOpcode::send, 1, {p.a.sge(0, 64)}));
  post_send(p, p.a, make_wr(WrOpcode::send, 2, {p.a.sge(0, 64)}, 0));
  const auto wcs = wait_wcs(p, p.a, p.a.send_cq, 2);
  CHECK(wcs[0].status == WcStatus::retry_exc_err);
  CHECK(wcs[0].wr_id == 1);
  CHECK(wcs[1].status == WcStatus::wr_flush_err);
  CHECK(wcs[1].wr_id == 2);
  const core::Time timeout = 4096ull << 10;
  CHECK(p.net.now - start == timeout * (o.retry_cnt + 1u));
  const core::QpCounters& c = p.a.dev->qp(p.a.qpn)->counters;
  CHECK(c.local_ack_timeout_err == o.retry_cnt + 1u);
  CHECK(c.retry_exceeded_err == 1);
  CHECK(c.retransmitted_pkts == 2u * o.retry_cnt);  // go-back-N: both packets each time
  CHECK(state_of(p.a) == QpState::err);
  CHECK(p.a.dev->next_deadline() == std::nullopt);
}

TEST_CASE("Timers: timeout 0 never times out", "[core][errors][timers]") {
  QpOptions o;
  o.timeout = 0;
  Pair p(o);
  p.net.link_up = false;
  post_send(p, p.a, make_wr(WrOpcode::send, 1, {p.a.sge(0, 64)}));
  CHECK_FALSE(p.net.run_until([&] { return !p.a.poll(p.a.send_cq).empty(); }, 10'000'000'000ull));
  CHECK(p.a.dev->next_deadline() == std::nullopt);
  CHECK(state_of(p.a) == QpState::rts);
}

TEST_CASE("QP: RESET drops the QP's completions still in its CQs, and no other QP's", "[core][errors][qp]") {
  Pair p;
  post_recv(p.b, 1, 0, 64);
  post_recv(p.b, 2, 64, 64);
  core::QpAttr to;
  to.qp_state = QpState::err;
  REQUIRE(p.b.dev->modify_qp(p.net.now, p.b.qpn, to, core::qp_attr::state) == 0);
  // Another QP's completion shares the CQ and must survive.
  core::Wc other;
  other.wr_id = 99;
  other.qp_num = p.b.qpn + 1;
  p.b.dev->complete(p.b.recv_cq, other, false);
  to.qp_state = QpState::reset;
  REQUIRE(p.b.dev->modify_qp(p.net.now, p.b.qpn, to, core::qp_attr::state) == 0);
  const std::vector<core::Wc> left = p.b.poll(p.b.recv_cq);
  REQUIRE(left.size() == 1);  // the two flush completions are gone
  CHECK(left[0].wr_id == 99);
}
