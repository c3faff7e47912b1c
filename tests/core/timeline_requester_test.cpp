// RC requester timelines (IBTA vol. 1 s9.7.4, requester.cpp): the engine turns posted WRs into
// request packets and the test, playing the responding peer, asserts each one field by field.
// Covered: segmentation into FIRST/MIDDLE/LAST by path MTU and the PSN sequence (across the
// 0xFFFFFF wrap too), RETH on the first packet, ImmDt and the solicited event bit on the last,
// AckReq on a message's last packet and every 64 within it, max_rd_atomic holding a READ and
// what follows it, SQD draining at a message boundary, and immediate data's byte order from
// the WR to the wire to the WC.
#include <catch2/catch.hpp>
#include <cerrno>
#include <cstring>

#include "tests/core/timeline_test_util.hpp"

using namespace test;
using namespace test::timeline;

TEST_CASE("requester: a 3-packet SEND is FIRST/MIDDLE/LAST, AckReq on the last, its ACK completes it",
          "[timeline][requester]") {
  Timeline tl;
  const std::uint32_t s = tl.config.sq_psn;
  const auto m = bytes(700, 9);
  tl.put(0, m);

  tl.post_send(1'000, tl.wr(WrOpcode::send, 1, 0, 700));
  tl.expect(1'000, send_first(s, slice(m, 0, 256)));
  tl.expect(1'000, send_middle(psn(s, 1), slice(m, 256, 256)));
  tl.expect(1'000, send_last(psn(s, 2), slice(m, 512, 188)).ackreq());
  tl.expect_nothing(1'000);
  CHECK(tl.deadline() == 1'000 + kT10);  // armed by the first packet
  CHECK(tl.send_wcs().empty());

  tl.deliver(2'000, ack(psn(s, 2), 1));
  const auto wcs = tl.send_wcs();
  REQUIRE(wcs.size() == 1);
  check_wc(wcs[0], 1, WcStatus::success);
  CHECK(wcs[0].opcode == WcOpcode::send);
  CHECK(wcs[0].byte_len == 700);
  CHECK_FALSE(tl.deadline());  // nothing outstanding: no timer
  tl.expect_nothing(10 * kT10);

  // The next message continues the PSN sequence.
  tl.post_send(10 * kT10, tl.wr(WrOpcode::send, 2, 0, 10));
  tl.expect(10 * kT10, send_only(psn(s, 3), slice(m, 0, 10)).ackreq());
}

TEST_CASE("requester: a 4-packet SEND across the PSN wrap", "[timeline][requester][wrap]") {
  Config c;
  c.sq_psn = 0xFFFFFE;
  Timeline tl(c);
  const auto m = bytes(1000, 12);
  tl.put(0, m);
  tl.post_send(1'000, tl.wr(WrOpcode::send, 1, 0, 1000));
  tl.expect(1'000, send_first(0xFFFFFE, slice(m, 0, 256)));
  tl.expect(1'000, send_middle(0xFFFFFF, slice(m, 256, 256)));
  tl.expect(1'000, send_middle(0x000000, slice(m, 512, 256)));
  tl.expect(1'000, send_last(0x000001, slice(m, 768, 232)).ackreq());
  tl.expect_nothing(1'000);

  // The peer acknowledges up to 0xFFFFFF; the rest is lost and resent after the timeout.
  tl.deliver(2'000, ack(0xFFFFFF, 0));
  tl.expect_nothing(2'000 + kT10 - 1);
  tl.expect(2'000 + kT10, send_middle(0x000000, slice(m, 512, 256)));
  tl.expect(2'000 + kT10, send_last(0x000001, slice(m, 768, 232)).ackreq());
  tl.expect_nothing(2'000 + kT10);

  tl.deliver(3'000 + kT10, ack(0x000001, 1));
  const auto wcs = tl.send_wcs();
  REQUIRE(wcs.size() == 1);
  check_wc(wcs[0], 1, WcStatus::success);
  CHECK_FALSE(tl.deadline());
  tl.post_send(4'000 + kT10, tl.wr(WrOpcode::send, 2, 0, 4));
  tl.expect(4'000 + kT10, send_only(0x000002, slice(m, 0, 4)).ackreq());
}

TEST_CASE("requester: WRITE with immediate over 3 packets: RETH on FIRST only, ImmDt and SE on LAST",
          "[timeline][requester]") {
  Timeline tl;
  const std::uint32_t s = tl.config.sq_psn;
  const auto m = bytes(600, 31);
  tl.put(0, m);
  auto w = remote(tl.wr(WrOpcode::rdma_write_with_imm, 1, 0, 600));
  w.imm_data = core::imm_number(0x01020304);  // a __be32, as ibv_send_wr carries it
  w.flags |= core::send_flags::solicited;
  tl.post_send(1'000, w);
  tl.expect(1'000, write_first(s, kRemoteVa, kRemoteRkey, 600, slice(m, 0, 256)));
  tl.expect(1'000, write_middle(psn(s, 1), slice(m, 256, 256)));
  tl.expect(1'000,
            write_last(psn(s, 2), slice(m, 512, 88)).as(Operation::write_last_imm).imm(0x01020304).se().ackreq());
  tl.expect_nothing(1'000);

  auto snd = tl.wr(WrOpcode::send_with_imm, 2, 0, 8);
  snd.imm_data = core::imm_number(0xCAFE);
  tl.post_send(2'000, snd);
  tl.expect(2'000, send_only(psn(s, 3), slice(m, 0, 8)).as(Operation::send_only_imm).imm(0xCAFE).ackreq());

  tl.deliver(3'000, ack(psn(s, 3), 2));
  const auto wcs = tl.send_wcs();
  REQUIRE(wcs.size() == 2);
  check_wc(wcs[0], 1, WcStatus::success);
  CHECK(wcs[0].opcode == WcOpcode::rdma_write);
  check_wc(wcs[1], 2, WcStatus::success);
}

TEST_CASE("requester: a long message asks for an ACK every 64 packets and on its last", "[timeline][requester]") {
  Timeline tl;
  const std::uint32_t s = tl.config.sq_psn;
  REQUIRE(tl.dev().config().ack_req_every == 64);
  tl.post_send(1'000, tl.wr(WrOpcode::send, 1, 0, 65 * 256));
  for (std::uint32_t i = 0; i < 65; ++i) {
    INFO("packet " << i);
    const Pkt p = tl.expect(1'000);
    CHECK(p.h.psn == psn(s, i));
    CHECK(p.h.ack_req == (i == 63 || i == 64));
  }
  tl.expect_nothing(1'000);
  tl.deliver(2'000, ack(psn(s, 63), 0));  // the mid-message ACK: progress, no completion
  CHECK(tl.send_wcs().empty());
  CHECK(tl.deadline() == 2'000 + kT10);
}

TEST_CASE("requester: max_rd_atomic 1 holds the second READ, and what follows it, until the first completes",
          "[timeline][requester][read]") {
  Config c;
  c.rd_atomic = 1;
  Timeline tl(c);
  const std::uint32_t s = tl.config.sq_psn;
  const auto v1 = bytes(40, 1), v2 = bytes(40, 2);
  tl.post_send(1'000, remote(tl.wr(WrOpcode::rdma_read, 1, 4096, 40)));
  tl.post_send(1'000, remote(tl.wr(WrOpcode::rdma_read, 2, 8192, 40), kRemoteVa + 64));
  tl.post_send(1'000, tl.wr(WrOpcode::send, 3, 0, 4));
  tl.expect(1'000, read_request(s, kRemoteVa, kRemoteRkey, 40).ackreq());
  tl.expect_nothing(1'000);  // in order: the SEND waits behind the held READ

  tl.deliver(2'000, read_only(s, 1, v1));
  tl.expect(2'000, read_request(psn(s, 1), kRemoteVa + 64, kRemoteRkey, 40).ackreq());
  tl.expect(2'000, send_only(psn(s, 2), tl.get(0, 4)).ackreq());
  tl.expect_nothing(2'000);
  tl.deliver(3'000, read_only(psn(s, 1), 2, v2));
  tl.deliver(3'000, ack(psn(s, 2), 3));
  const auto wcs = tl.send_wcs();
  REQUIRE(wcs.size() == 3);
  for (std::size_t i = 0; i < 3; ++i) check_wc(wcs[i], i + 1, WcStatus::success);
  CHECK(tl.get(4096, 40) == v1);
  CHECK(tl.get(8192, 40) == v2);
}

TEST_CASE("requester: the solicited event bit goes only on the last packet of a SEND or WRITE with immediate",
          "[timeline][requester]") {
  // IBTA s9.2.2 and rxe: SE means something only where a receive completes. A solicited
  // plain WRITE, READ or atomic goes without it.
  Timeline tl;
  const std::uint32_t s = tl.config.sq_psn;
  const auto m = bytes(300, 1);
  tl.put(0, m);
  auto solicited = [](core::SendWr w) {
    w.flags |= core::send_flags::solicited;
    return w;
  };
  tl.post_send(1'000, solicited(tl.wr(WrOpcode::send, 1, 0, 300)));
  tl.post_send(1'000, solicited(remote(tl.wr(WrOpcode::rdma_write, 2, 0, 8))));
  tl.post_send(1'000, solicited(remote(tl.wr(WrOpcode::rdma_read, 3, 4096, 8))));
  auto faa = solicited(remote(tl.wr(WrOpcode::atomic_fetch_and_add, 4, 512, 8)));
  faa.compare_add = 1;
  tl.post_send(1'000, faa);
  tl.expect(1'000, send_first(s, slice(m, 0, 256)));
  tl.expect(1'000, send_last(psn(s, 1), slice(m, 256, 44)).se().ackreq());
  tl.expect(1'000, write_only(psn(s, 2), kRemoteVa, kRemoteRkey, slice(m, 0, 8)).ackreq());
  tl.expect(1'000, read_request(psn(s, 3), kRemoteVa, kRemoteRkey, 8).ackreq());
  tl.expect(1'000, fetch_add(psn(s, 4), kRemoteVa, kRemoteRkey, 1).ackreq());
  tl.expect_nothing(1'000);
}

TEST_CASE("requester: SQD finishes the message it started, raises SQ_DRAINED, and RTS resumes",
          "[timeline][requester]") {
  Timeline tl;
  const std::uint32_t s = tl.config.sq_psn;
  const auto m = bytes(700, 6);
  tl.put(0, m);
  tl.post_send(1'000, tl.wr(WrOpcode::send, 1, 0, 700));
  tl.post_send(1'000, tl.wr(WrOpcode::send, 2, 0, 16));
  tl.expect(1'000, send_first(s, slice(m, 0, 256)));

  core::QpAttr a;
  a.qp_state = QpState::sqd;
  a.en_sqd_async_notify = 1;
  REQUIRE(tl.side.dev->modify_qp(1'000, tl.side.qpn, a, core::qp_attr::state | core::qp_attr::en_sqd_async_notify) ==
          0);
  // The started message goes out whole; the next one waits.
  tl.expect(1'000, send_middle(psn(s, 1), slice(m, 256, 256)));
  tl.expect(1'000, send_last(psn(s, 2), slice(m, 512, 188)).ackreq());
  tl.expect_nothing(1'000);
  core::QpAttr now;
  core::QpInitAttr init;
  REQUIRE(tl.side.dev->query_qp(tl.side.qpn, now, init) == 0);
  CHECK(now.sq_draining);
  // While draining, only a move to ERR is allowed (s10.3.1).
  core::QpAttr again;
  again.qp_state = QpState::sqd;
  CHECK(tl.side.dev->modify_qp(1'000, tl.side.qpn, again, core::qp_attr::state) == EINVAL);
  CHECK_FALSE(tl.side.dev->next_async_event().has_value());

  tl.deliver(2'000, ack(psn(s, 2), 1));
  const auto wcs = tl.send_wcs();
  REQUIRE(wcs.size() == 1);
  check_wc(wcs[0], 1, WcStatus::success);
  const auto drained = tl.side.dev->next_async_event();
  REQUIRE(drained.has_value());
  CHECK(drained->type == core::AsyncEventType::sq_drained);
  CHECK(drained->element == tl.side.qpn);
  REQUIRE(tl.side.dev->query_qp(tl.side.qpn, now, init) == 0);
  CHECK_FALSE(now.sq_draining);

  tl.modify_state(3'000, QpState::rts);
  tl.expect(3'000, send_only(psn(s, 3), slice(m, 0, 16)).ackreq());
}

TEST_CASE("requester and responder: immediate data keeps its bytes' order from the WR to the wire to the WC",
          "[timeline][requester][responder]") {
  // ibv_send_wr.imm_data = htobe32(0x11) (udaddy sends its QPN so): 00 00 00 11 in memory, on
  // the wire (ImmDt, s9.3.5) and in the peer's ibv_wc.imm_data, whose be32toh gives 0x11 back.
  const std::uint8_t be_bytes[4] = {0x00, 0x00, 0x00, 0x11};
  std::uint32_t be = 0;
  std::memcpy(&be, be_bytes, 4);
  Timeline tl;
  const std::uint32_t s = tl.config.sq_psn;
  const auto m = bytes(8, 3);
  tl.put(0, m);
  auto snd = tl.wr(WrOpcode::send_with_imm, 1, 0, 8);
  snd.imm_data = be;
  tl.post_send(1'000, snd);
  tl.expect(1'000, send_only(s, m).as(Operation::send_only_imm).imm(0x00000011).ackreq());

  Timeline peer;
  peer.post_recv(2, 0, 64);
  peer.deliver(1'000, send_only(peer.epsn(), m).as(Operation::send_only_imm).imm(0x00000011).ackreq());
  const auto rwc = peer.recv_wcs();
  REQUIRE(rwc.size() == 1);
  std::uint8_t got[4];
  std::memcpy(got, &rwc[0].imm_data, 4);
  CHECK(std::equal(got, got + 4, be_bytes));
}
