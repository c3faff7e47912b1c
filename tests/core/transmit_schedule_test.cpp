// Which QP's packet transmit() hands out next: QPs with requests take turns packet by packet,
// answers go before requests, and a QP that was idle is served again once something touches
// it (Device::wake). The device asks only the QPs in its queues for packets, so these are the
// properties that a missed wake-up or a stale queue entry would break.
#include <catch2/catch.hpp>
#include <vector>

#include "tests/core/engine_fixture.hpp"
#include "wire/ib_packet.hpp"

namespace {

using namespace test;

// `count` RC QPs on each side, the k-th of `a` connected to the k-th of `b`.
struct ManyQps {
  explicit ManyQps(std::size_t count) : a(1, 1 << 20), b(2, 1 << 20) {
    for (std::size_t k = 0; k < count; ++k) {
      const std::uint32_t qpn = a.dev->config().first_qpn + static_cast<std::uint32_t>(k);
      bring_up(a, qpn, b.gid(), 100, 200, {});
      bring_up(b, qpn, a.gid(), 200, 100, {});
      qpns.push_back(qpn);
    }
  }

  void write(std::uint32_t qpn, std::uint32_t bytes) {
    core::SendWr w;
    w.opcode = core::WrOpcode::rdma_write;
    w.sg_list = {a.sge(0, bytes)};
    w.remote_addr = b.addr();
    w.rkey = b.mr.rkey;
    REQUIRE(a.dev->post_send(0, qpn, w) == 0);
  }

  // The destination QPs of the next `n` packets `a` sends (the peer's QPN equals ours here).
  std::vector<std::uint32_t> next_from_a(std::size_t n) {
    std::vector<std::uint32_t> out;
    for (std::size_t i = 0; i < n; ++i) {
      auto p = a.dev->transmit(0);
      if (!p) break;
      out.push_back(::wire::IbPacket::check(p->bytes)->dest_qp());
      b.dev->receive(0, as_received(*p));
    }
    return out;
  }

  void deliver_answers_to_a() {
    while (auto p = b.dev->transmit(0)) a.dev->receive(0, as_received(*p));
  }

  Side a, b;
  std::vector<std::uint32_t> qpns;
};

}  // namespace

TEST_CASE("QPs with requests take turns packet by packet") {
  ManyQps m(3);
  const auto q = m.qpns;
  m.write(q[0], 4 * 1024);  // four packets at MTU 1024
  m.write(q[2], 4 * 1024);
  CHECK(m.next_from_a(4) == std::vector<std::uint32_t>{q[0], q[2], q[0], q[2]});
  m.write(q[1], 1024);  // joins the turns at the back, not after the others finish
  CHECK(m.next_from_a(5) == std::vector<std::uint32_t>{q[0], q[2], q[1], q[0], q[2]});
  CHECK(m.next_from_a(1).empty());
}

TEST_CASE("an idle QP among many is served again when a verb, a packet or its timer touches it") {
  ManyQps m(64);
  const std::uint32_t last = m.qpns.back();
  // Nothing to send: every QP leaves the queues.
  CHECK(m.next_from_a(1).empty());
  m.write(last, 1024);
  CHECK(m.next_from_a(2) == std::vector<std::uint32_t>{last});
  m.deliver_answers_to_a();

  // Only the peer's ACK (a packet) reopens a full window. Three WRITEs of 256 packets: the
  // third would start 512 PSNs past the oldest unacknowledged one, the window's size.
  for (int i = 0; i < 3; ++i) m.write(last, 1024 * 256);
  CHECK(m.next_from_a(2000).size() == 512);
  m.deliver_answers_to_a();
  CHECK(m.next_from_a(2000).size() == 256);
  m.deliver_answers_to_a();

  // Lost packets: only the retransmission timer (advance) can make the QP send again.
  m.write(last, 2048);
  const auto lost = m.a.dev->transmit(0);
  REQUIRE(lost);
  REQUIRE(m.a.dev->transmit(0));  // the second packet, also lost
  CHECK(!m.a.dev->transmit(0));
  const auto deadline = m.a.dev->next_deadline();
  REQUIRE(deadline);
  m.a.dev->advance(*deadline);
  CHECK(m.next_from_a(3) == std::vector<std::uint32_t>{last, last});
}

TEST_CASE("a destroyed QP's number, taken by a new QP, is served once per turn") {
  ManyQps m(2);
  const auto q = m.qpns;
  m.write(q[0], 4 * 1024);
  m.write(q[1], 4 * 1024);
  CHECK(m.next_from_a(1) == std::vector<std::uint32_t>{q[0]});
  // q[0] is queued with three packets to go when it is destroyed.
  REQUIRE(m.a.dev->modify_qp(
              0, q[0],
              [] {
                core::QpAttr e;
                e.qp_state = core::QpState::err;
                return e;
              }(),
              core::qp_attr::state) == 0);
  REQUIRE(m.a.dev->destroy_qp(q[0]) == 0);
  bring_up(m.a, q[0], m.b.gid(), 300, 200, {});
  REQUIRE(m.a.qpn == q[0]);  // the number came back
  m.write(q[0], 4 * 1024);
  // Had the old entry stayed in the queue, the new QP would send twice per turn.
  CHECK(m.next_from_a(6) == std::vector<std::uint32_t>{q[1], q[0], q[1], q[0], q[1], q[0]});
}
