// Device::qp_stats(): the per-QP view behind `softrdma stats` — every live QP once, in QPN
// order, with its type, state, peer and its own counters; destroyed QPs leave the list but
// stay in counters()' sum.
#include <catch2/catch.hpp>

#include "tests/core/verbs_test_util.hpp"

using namespace test;

namespace {
constexpr std::uint64_t kBthAndIcrc = 12 + 4;  // bytes counted are UDP payloads: BTH + ICRC around the data
}  // namespace

TEST_CASE("QP stats: each live QP with its state, peer and own counters", "[core][stats]") {
  Pair p;
  post_recv(p.b, 1, 0, 3000);
  post_send(p, p.a, make_wr(WrOpcode::send, 1, {p.a.sge(0, 3000)}));  // 3 packets at MTU 1024
  wait_wcs(p, p.a, p.a.send_cq, 1);

  const std::vector<core::QpStats> a = p.a.dev->qp_stats();
  REQUIRE(a.size() == 1);
  CHECK(a[0].qpn == p.a.qpn);
  CHECK(a[0].type == core::QpType::rc);
  CHECK(a[0].state == core::QpState::rts);
  CHECK(a[0].dest_qpn == p.b.qpn);
  CHECK(a[0].counters.sent_pkts == 3);
  CHECK(a[0].counters.sent_bytes == 3000 + 3 * kBthAndIcrc);
  CHECK(a[0].counters.rcvd_pkts >= 1);  // the ACK(s)
  CHECK(a[0].counters.sent_pkts == p.a.dev->counters().qps.sent_pkts);

  // A second QP, still in RESET: listed after the first, unconnected, with nothing counted.
  core::QpInitAttr init;
  init.qp_type = core::QpType::ud;
  init.pd = p.b.pd;
  init.send_cq = p.b.send_cq;
  init.recv_cq = p.b.recv_cq;
  init.cap = {16, 16, 1, 1, 0};
  const auto ud = p.b.dev->create_qp(init);
  REQUIRE(ud.ok());
  std::vector<core::QpStats> b = p.b.dev->qp_stats();
  REQUIRE(b.size() == 2);
  CHECK(b[0].qpn == p.b.qpn);
  CHECK(b[0].counters.rcvd_pkts == 3);
  CHECK(b[0].counters.rcvd_bytes == 3000 + 3 * kBthAndIcrc);
  CHECK(b[1].qpn == ud->qpn);
  CHECK(b[1].qpn > b[0].qpn);
  CHECK(b[1].type == core::QpType::ud);
  CHECK(b[1].state == core::QpState::reset);
  CHECK(b[1].dest_qpn == 0);
  CHECK(b[1].counters.sent_pkts == 0);
  CHECK(b[1].counters.rcvd_pkts == 0);

  // Destroyed: gone from the list, kept in the device's sum.
  REQUIRE(p.b.dev->destroy_qp(p.b.qpn) == 0);
  b = p.b.dev->qp_stats();
  REQUIRE(b.size() == 1);
  CHECK(b[0].qpn == ud->qpn);
  CHECK(p.b.dev->counters().qps.rcvd_pkts == 3);
}

TEST_CASE("QP stats: a QP moved to ERR is listed in ERR", "[core][stats]") {
  Pair p;
  core::QpAttr attr;
  attr.qp_state = core::QpState::err;
  REQUIRE(p.a.dev->modify_qp(p.net.now, p.a.qpn, attr, core::qp_attr::state) == 0);
  const std::vector<core::QpStats> a = p.a.dev->qp_stats();
  REQUIRE(a.size() == 1);
  CHECK(a[0].state == core::QpState::err);
  CHECK(p.b.dev->qp_stats().at(0).state == core::QpState::rts);
}
