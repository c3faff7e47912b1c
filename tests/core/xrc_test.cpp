// XRC (IBTA vol. 1 annex A14) in the engine: an initiator's requests carry XRCETH and land in
// the XRC SRQ it names on the target's side, whose PD and CQ serve them; the domain and target
// lifetimes; and the halves' QP attributes.
#include <catch2/catch.hpp>
#include <cerrno>
#include <cstring>
#include <vector>

#include "tests/core/verbs_test_util.hpp"
#include "wire/ib_packet.hpp"

namespace {

using namespace test;
using core::QpType;
using wire::Ext;

// a: an XRC initiator; b: an XRC domain with an XRC SRQ on b.pd completing into b.recv_cq, and
// a target in the domain. Both sides' devices are joined directly; packets are moved by hand so
// that each can be looked at.
struct XrcPair {
  XrcPair() : a(1, 1 << 16), b(2, 1 << 16) {
    xrcd = *b.dev->alloc_xrcd();
    srq = *b.dev->create_srq(b.pd, 16, 1, 0, core::Device::XrcSrq{xrcd, b.recv_cq});
    core::QpInitAttr ini;
    ini.qp_type = QpType::xrc_send;
    ini.pd = a.pd;
    ini.send_cq = a.send_cq;
    ini.cap = {16, 0, 1, 0, 0};
    a.qpn = a.dev->create_qp(ini)->qpn;
    core::QpInitAttr tgt;
    tgt.qp_type = QpType::xrc_recv;
    tgt.xrcd = xrcd;
    b.qpn = b.dev->create_qp(tgt)->qpn;
    bring_up(a, b.qpn, b.gid(), QpType::xrc_send);
    bring_up(b, a.qpn, a.gid(), QpType::xrc_recv);
  }

  // RESET to RTS with the attributes each half takes (as ibv_xsrq_pingpong gives them).
  static void bring_up(Side& s, std::uint32_t peer, const core::Gid& peer_gid, QpType type) {
    using namespace core::qp_attr;
    core::QpAttr a;
    a.qp_state = core::QpState::init;
    a.port_num = 1;
    a.qp_access_flags = type == QpType::xrc_recv ? core::access::remote_write | core::access::remote_read : 0;
    REQUIRE(s.dev->modify_qp(0, s.qpn, a, state | pkey_index | port | access_flags) == 0);
    a.qp_state = core::QpState::rtr;
    a.path_mtu = core::Mtu::mtu1024;
    a.dest_qp_num = peer;
    a.rq_psn = 100;
    a.max_dest_rd_atomic = 4;
    a.min_rnr_timer = 1;
    a.ah_attr.dgid = peer_gid;
    const std::uint32_t responder = type == QpType::xrc_recv ? max_dest_rd_atomic | min_rnr_timer : 0;
    REQUIRE(s.dev->modify_qp(0, s.qpn, a, state | av | path_mtu | dest_qpn | rq_psn | responder) == 0);
    a.qp_state = core::QpState::rts;
    a.sq_psn = 100;
    a.timeout = 14;
    a.retry_cnt = a.rnr_retry = 7;
    a.max_rd_atomic = 4;
    const std::uint32_t requester = type == QpType::xrc_send ? retry_cnt | rnr_retry | max_qp_rd_atomic : 0;
    REQUIRE(s.dev->modify_qp(0, s.qpn, a, state | timeout | sq_psn | requester) == 0);
  }

  // Moves every packet across until both sides are quiet, losing the first `lose` of them;
  // returns them in the order sent.
  std::vector<std::vector<std::uint8_t>> exchange(std::size_t lose = 0) {
    std::vector<std::vector<std::uint8_t>> seen;
    for (bool moved = true; moved;) {
      moved = false;
      for (auto [from, to] : {std::pair{&a, &b}, std::pair{&b, &a}}) {
        while (auto p = from->dev->transmit(now)) {
          seen.push_back(p->bytes);
          if (seen.size() > lose) to->dev->receive(now, {p->bytes, from->gid(), to->gid(), p->route.src_port});
          moved = true;
        }
      }
      now += 1000;
    }
    return seen;
  }

  core::Time now = 1'000'000;
  Side a, b;
  std::uint32_t xrcd = 0, srq = 0;
};

std::uint8_t opcode_of(const std::vector<std::uint8_t>& bytes) { return bytes.at(0); }

TEST_CASE("an XRC SEND carries XRCETH and lands in the XRC SRQ it names, completing on that SRQ's CQ", "[core][xrc]") {
  XrcPair p;
  REQUIRE(p.b.dev->post_srq_recv(p.srq, recv_wr(7, {p.b.sge(0, 64)})) == 0);
  std::memcpy(p.a.buffer.data(), "to the xrc srq", 15);
  core::SendWr w = make_wr(WrOpcode::send, 1, {p.a.sge(0, 15)});
  w.xrc_remote_srq = p.srq;
  REQUIRE(p.a.dev->post_send(p.now, p.a.qpn, w) == 0);

  const auto packets = p.exchange();
  REQUIRE(packets.size() == 2);
  CHECK(opcode_of(packets[0]) == 0xA4);  // XRC SEND Only (table 35: transport 101)
  const auto request = wire::IbPacket::check(packets[0]);
  REQUIRE(request);
  CHECK(wire::Xrceth::xrc_srq::get(request->ext(Ext::xrceth)) == p.srq);
  CHECK(opcode_of(packets[1]) == 0xB1);  // XRC Acknowledge, no XRCETH on responses

  const auto received = p.b.poll(p.b.recv_cq);
  REQUIRE(received.size() == 1);
  CHECK(received[0].wr_id == 7);
  CHECK(received[0].status == WcStatus::success);
  CHECK(received[0].qp_num == p.b.qpn);  // the target QP, as ibv_xsrq_pingpong looks it up
  CHECK(received[0].byte_len == 15);
  CHECK(std::memcmp(p.b.buffer.data(), "to the xrc srq", 15) == 0);
  const auto sent = p.a.poll(p.a.send_cq);
  REQUIRE(sent.size() == 1);
  CHECK(sent[0].status == WcStatus::success);
}

TEST_CASE("a lost XRC request is sent again when its ACK times out", "[core][xrc]") {
  XrcPair p;
  REQUIRE(p.b.dev->post_srq_recv(p.srq, recv_wr(7, {p.b.sge(0, 64)})) == 0);
  core::SendWr w = make_wr(WrOpcode::send, 1, {p.a.sge(0, 15)});
  w.xrc_remote_srq = p.srq;
  REQUIRE(p.a.dev->post_send(p.now, p.a.qpn, w) == 0);
  REQUIRE(p.exchange(1).size() == 1);  // the request, lost
  const auto deadline = p.a.dev->next_deadline();
  REQUIRE(deadline.has_value());
  p.now = *deadline;
  p.a.dev->advance(p.now);
  const auto packets = p.exchange();
  REQUIRE(packets.size() == 2);
  CHECK(opcode_of(packets[0]) == 0xA4);
  CHECK(p.b.poll(p.b.recv_cq).size() == 1);
  const auto sent = p.a.poll(p.a.send_cq);
  REQUIRE(sent.size() == 1);
  CHECK(sent[0].status == WcStatus::success);
}

TEST_CASE("RDMA through an XRC target is checked against the PD of the XRC SRQ the request names", "[core][xrc]") {
  XrcPair p;
  std::memcpy(p.a.buffer.data(), "written", 7);
  core::SendWr write = remote_wr(WrOpcode::rdma_write, 1, {p.a.sge(0, 7)}, p.b.addr(100), p.b.mr.rkey);
  write.xrc_remote_srq = p.srq;
  REQUIRE(p.a.dev->post_send(p.now, p.a.qpn, write) == 0);
  std::memcpy(p.b.buffer.data() + 200, "read me", 7);
  core::SendWr read = remote_wr(WrOpcode::rdma_read, 2, {p.a.sge(300, 7)}, p.b.addr(200), p.b.mr.rkey);
  read.xrc_remote_srq = p.srq;
  REQUIRE(p.a.dev->post_send(p.now, p.a.qpn, read) == 0);
  p.exchange();
  const auto sent = p.a.poll(p.a.send_cq);
  REQUIRE(sent.size() == 2);
  CHECK(sent[0].status == WcStatus::success);
  CHECK(sent[1].status == WcStatus::success);
  CHECK(std::memcmp(p.b.buffer.data() + 100, "written", 7) == 0);
  CHECK(std::memcmp(p.a.buffer.data() + 300, "read me", 7) == 0);

  SECTION("an SRQ on another PD does not open the MR") {
    const std::uint32_t other_pd = *p.b.dev->alloc_pd();
    const std::uint32_t other = *p.b.dev->create_srq(other_pd, 4, 1, 0, core::Device::XrcSrq{p.xrcd, p.b.recv_cq});
    write.xrc_remote_srq = other;
    REQUIRE(p.a.dev->post_send(p.now, p.a.qpn, write) == 0);
    p.exchange();
    const auto failed = p.a.poll(p.a.send_cq);
    REQUIRE(failed.size() == 1);
    CHECK(failed[0].status == WcStatus::rem_access_err);
  }
}

TEST_CASE("a request naming no XRC SRQ of the target's domain is an invalid request", "[core][xrc]") {
  XrcPair p;
  const std::uint32_t basic = *p.b.dev->create_srq(p.b.pd, 4, 1, 0);
  const std::uint32_t other_xrcd = *p.b.dev->alloc_xrcd();
  const std::uint32_t foreign = *p.b.dev->create_srq(p.b.pd, 4, 1, 0, core::Device::XrcSrq{other_xrcd, p.b.recv_cq});
  const std::uint32_t srqn = GENERATE_COPY(basic, foreign, 999u);
  core::SendWr w = make_wr(WrOpcode::send, 1, {p.a.sge(0, 8)});
  w.xrc_remote_srq = srqn;
  REQUIRE(p.a.dev->post_send(p.now, p.a.qpn, w) == 0);
  p.exchange();
  const auto sent = p.a.poll(p.a.send_cq);
  REQUIRE(sent.size() == 1);
  CHECK(sent[0].status == WcStatus::rem_inv_req_err);
  CHECK(p.b.dev->qp(p.b.qpn)->state() == core::QpState::err);
}

TEST_CASE("XRC objects: domains in use stay, targets outlive their creator while opened", "[core][xrc]") {
  Side b(2, 4096);
  const std::uint32_t xrcd = *b.dev->alloc_xrcd();
  CHECK(b.dev->create_srq(b.pd, 4, 1, 0, core::Device::XrcSrq{xrcd + 1, b.recv_cq}).error() == EINVAL);
  CHECK(b.dev->create_srq(b.pd, 4, 1, 0, core::Device::XrcSrq{xrcd, 999}).error() == EINVAL);
  const std::uint32_t srq = *b.dev->create_srq(b.pd, 4, 1, 0, core::Device::XrcSrq{xrcd, b.recv_cq});
  CHECK(b.dev->dealloc_xrcd(xrcd) == EBUSY);
  CHECK(b.dev->destroy_cq(b.recv_cq) == EBUSY);  // the XRC SRQ completes into it

  core::QpInitAttr tgt;
  tgt.qp_type = QpType::xrc_recv;
  tgt.xrcd = xrcd + 1;
  CHECK(b.dev->create_qp(tgt).error() == EINVAL);
  tgt.xrcd = xrcd;
  const std::uint32_t qpn = b.dev->create_qp(tgt)->qpn;
  // A QP on an XRC SRQ is not a thing: RC QPs take basic SRQs only.
  core::QpInitAttr rc;
  rc.pd = b.pd;
  rc.send_cq = rc.recv_cq = b.send_cq;
  rc.srq = srq;
  CHECK(b.dev->create_qp(rc).error() == EINVAL);
  // A target has no queues: posting to it is refused.
  CHECK(b.dev->post_recv(qpn, recv_wr(1, {b.sge(0, 8)})) == EINVAL);
  CHECK(b.dev->post_send(0, qpn, make_wr(WrOpcode::send, 1, {b.sge(0, 8)})) == EINVAL);

  CHECK(b.dev->open_qp(xrcd + 1, qpn) == EINVAL);
  REQUIRE(b.dev->open_qp(xrcd, qpn) == 0);
  REQUIRE(b.dev->destroy_qp(qpn) == 0);  // the creator's handle
  CHECK(b.dev->qp(qpn) != nullptr);      // the opener's keeps it
  CHECK(b.dev->dealloc_xrcd(xrcd) == EBUSY);
  REQUIRE(b.dev->destroy_qp(qpn) == 0);
  CHECK(b.dev->qp(qpn) == nullptr);
  CHECK(b.dev->open_qp(xrcd, qpn) == EINVAL);
  REQUIRE(b.dev->destroy_srq(srq) == 0);
  CHECK(b.dev->dealloc_xrcd(xrcd) == 0);
  CHECK(b.dev->dealloc_xrcd(xrcd) == EINVAL);
}

TEST_CASE("XRC halves take RC's attributes less those of the half they lack", "[core][xrc]") {
  using namespace core::qp_attr;
  Side s(1, 4096);
  const std::uint32_t xrcd = *s.dev->alloc_xrcd();
  core::QpInitAttr ini;
  ini.qp_type = QpType::xrc_send;
  ini.pd = s.pd;
  ini.send_cq = s.send_cq;
  const auto initiator = s.dev->create_qp(ini);
  REQUIRE(initiator.ok());
  CHECK(initiator->cap.max_recv_wr == 0);
  core::QpInitAttr tgt;
  tgt.qp_type = QpType::xrc_recv;
  tgt.xrcd = xrcd;
  const auto target = s.dev->create_qp(tgt);
  REQUIRE(target.ok());
  CHECK(target->cap.max_send_wr == 0);

  core::QpAttr a;
  a.qp_state = core::QpState::init;
  a.port_num = 1;
  for (const std::uint32_t qpn : {initiator->qpn, target->qpn})
    REQUIRE(s.dev->modify_qp(0, qpn, a, state | pkey_index | port | access_flags) == 0);
  a.qp_state = core::QpState::rtr;
  a.path_mtu = core::Mtu::mtu1024;
  const std::uint32_t peer = av | path_mtu | dest_qpn | rq_psn;
  CHECK(s.dev->modify_qp(0, initiator->qpn, a, state | peer | max_dest_rd_atomic) == EINVAL);
  CHECK(s.dev->modify_qp(0, target->qpn, a, state | peer) == EINVAL);  // a target needs its responder's
  REQUIRE(s.dev->modify_qp(0, initiator->qpn, a, state | peer) == 0);
  REQUIRE(s.dev->modify_qp(0, target->qpn, a, state | peer | max_dest_rd_atomic | min_rnr_timer) == 0);
  a.qp_state = core::QpState::rts;
  a.timeout = 14;
  CHECK(s.dev->modify_qp(0, target->qpn, a, state | sq_psn | timeout | retry_cnt) == EINVAL);
  CHECK(s.dev->modify_qp(0, initiator->qpn, a, state | sq_psn | timeout) == EINVAL);
  REQUIRE(s.dev->modify_qp(0, target->qpn, a, state | sq_psn | timeout) == 0);
  REQUIRE(s.dev->modify_qp(0, initiator->qpn, a, state | sq_psn | timeout | retry_cnt | rnr_retry | max_qp_rd_atomic) ==
          0);
}

}  // namespace

namespace {

// Each side an initiator towards the other's target and an XRC SRQ of its own, both kinds of
// completion on one CQ, as rdma-core's xrc_traffic runs them.
struct XrcSide {
  XrcSide(Side& s, std::uint32_t cq) : side(s) {
    xrcd = *s.dev->alloc_xrcd();
    srq = *s.dev->create_srq(s.pd, 4096, 1, 0, core::Device::XrcSrq{xrcd, cq});
    core::QpInitAttr ini;
    ini.qp_type = QpType::xrc_send;
    ini.pd = s.pd;
    ini.send_cq = cq;
    ini.cap = {1024, 0, 1, 0, 0};
    ini.sq_sig_all = true;
    initiator = s.dev->create_qp(ini)->qpn;
    core::QpInitAttr tgt;
    tgt.qp_type = QpType::xrc_recv;
    tgt.xrcd = xrcd;
    target = s.dev->create_qp(tgt)->qpn;
  }
  Side& side;
  std::uint32_t xrcd = 0, srq = 0, initiator = 0, target = 0;
};

}  // namespace

TEST_CASE("XRC traffic both ways survives a lossy link", "[core][xrc]") {
  Side a(1, 1 << 16), b(2, 1 << 16);
  SimNetwork net(*a.dev, *b.dev, GENERATE(51u, 52u, 53u));
  net.faults[0].loss = net.faults[1].loss = 0.05;
  XrcSide xa(a, a.send_cq), xb(b, b.send_cq);
  for (auto [from, to] : {std::pair{&xa, &xb}, std::pair{&xb, &xa}}) {
    std::swap(from->side.qpn, from->initiator);
    XrcPair::bring_up(from->side, to->target, to->side.gid(), QpType::xrc_send);
    std::swap(from->side.qpn, from->initiator);
    std::swap(to->side.qpn, to->target);
    XrcPair::bring_up(to->side, from->initiator, from->side.gid(), QpType::xrc_recv);
    std::swap(to->side.qpn, to->target);
  }
  for (XrcSide* x : {&xa, &xb})
    for (int i = 0; i < 400; ++i) REQUIRE(x->side.dev->post_srq_recv(x->srq, recv_wr(i, {x->side.sge(0, 64)})) == 0);
  for (int i = 0; i < 200; ++i) {
    for (auto [from, to] : {std::pair{&xa, &xb}, std::pair{&xb, &xa}}) {
      core::SendWr w = make_wr(WrOpcode::send, i, {from->side.sge(0, 64)});
      w.xrc_remote_srq = to->srq;
      REQUIRE(from->side.dev->post_send(net.now, from->initiator, w) == 0);
      std::size_t sent = 0, received = 0;
      const bool done = net.run_until([&] {
        for (const auto& wc : from->side.poll(from->side.send_cq)) {
          REQUIRE(wc.status == WcStatus::success);
          ++sent;
        }
        for (const auto& wc : to->side.poll(to->side.send_cq)) {
          REQUIRE(wc.status == WcStatus::success);
          ++received;
        }
        return sent == 1 && received == 1;
      });
      INFO("iteration " << i << ": sent " << sent << ", received " << received);
      REQUIRE(done);
    }
  }
}
