// RC retry timelines (IBTA vol. 1 s9.7.6.1.3 and s9.7.5.2.8, completer.cpp on_timer): what
// the engine resends when the answer does not come or is an RNR NAK, and when. Covered: the
// local ACK timeout to the nanosecond, retry_cnt (7 is seven retries) and RETRY_EXC_ERR,
// timeout 0, the timer restarting on progress (a partial ACK, a READ response), RNR waits of
// the time the NAK names, rnr_retry (7 is for ever) and RNR_RETRY_EXC_ERR, RNR NAKs in the
// middle of the queue or a message, and rc_pingpong's late ACK during a timeout's resend.
#include <catch2/catch.hpp>

#include "tests/core/timeline_test_util.hpp"

using namespace test;
using namespace test::timeline;

TEST_CASE("requester: no answer resends after exactly 4.096 us << timeout, retry_cnt times, then RETRY_EXC_ERR",
          "[timeline][requester][timeout]") {
  Config c;
  c.retry_cnt = 2;
  Timeline tl(c);
  const std::uint32_t s = tl.config.sq_psn;
  const auto m = bytes(800, 2);
  tl.put(0, m);
  tl.post_recv(50, 4096, 256);

  tl.post_send(1'000, tl.wr(WrOpcode::send, 1, 0, 700));    // PSNs s .. s+2
  tl.post_send(1'000, tl.wr(WrOpcode::send, 2, 700, 100));  // PSN s+3
  const auto all_four = [&](Time t) {
    tl.expect(t, send_first(s, slice(m, 0, 256)));
    tl.expect(t, send_middle(psn(s, 1), slice(m, 256, 256)));
    tl.expect(t, send_last(psn(s, 2), slice(m, 512, 188)).ackreq());
    tl.expect(t, send_only(psn(s, 3), slice(m, 700, 100)).ackreq());
    tl.expect_nothing(t);
  };
  all_four(1'000);

  for (Time k = 1; k <= 2; ++k) {  // retry_cnt = 2 resends, each a full timeout after the last
    const Time due = 1'000 + k * kT10;
    CHECK(tl.deadline() == due);
    tl.expect_nothing(due - 1);
    all_four(due);
  }
  CHECK(tl.deadline() == 1'000 + 3 * kT10);
  tl.expect_nothing(1'000 + 3 * kT10 - 1);
  CHECK(tl.send_wcs().empty());

  // The third timeout: the retries are used up.
  tl.expect_nothing(1'000 + 3 * kT10);
  CHECK(tl.state() == QpState::err);
  const auto wcs = tl.send_wcs();
  REQUIRE(wcs.size() == 2);
  check_wc(wcs[0], 1, WcStatus::retry_exc_err);
  check_wc(wcs[1], 2, WcStatus::wr_flush_err);
  const auto rwc = tl.recv_wcs();
  REQUIRE(rwc.size() == 1);
  check_wc(rwc[0], 50, WcStatus::wr_flush_err);
  CHECK_FALSE(tl.deadline());
  CHECK(tl.qp().counters.local_ack_timeout_err == 3);
  CHECK(tl.qp().counters.retransmitted_pkts == 8);
  tl.expect_nothing(1'000 + 10 * kT10);
}

TEST_CASE("requester: an ACK for part of a message restarts the timer, the resend starts after it",
          "[timeline][requester][timeout]") {
  Timeline tl;
  const std::uint32_t s = tl.config.sq_psn;
  const auto m = bytes(700, 6);
  tl.put(0, m);
  tl.post_send(1'000, tl.wr(WrOpcode::send, 1, 0, 700));
  tl.expect(1'000, send_first(s, slice(m, 0, 256)));
  tl.expect(1'000, send_middle(psn(s, 1), slice(m, 256, 256)));
  tl.expect(1'000, send_last(psn(s, 2), slice(m, 512, 188)).ackreq());

  tl.deliver(2'000, ack(s, 0));  // the first packet only; the message is not complete (MSN 0)
  CHECK(tl.send_wcs().empty());
  CHECK(tl.deadline() == 2'000 + kT10);
  tl.expect_nothing(1'000 + kT10);  // the original deadline passes quietly
  tl.expect_nothing(2'000 + kT10 - 1);
  tl.expect(2'000 + kT10, send_middle(psn(s, 1), slice(m, 256, 256)));
  tl.expect(2'000 + kT10, send_last(psn(s, 2), slice(m, 512, 188)).ackreq());
  tl.expect_nothing(2'000 + kT10);

  tl.deliver(3'000 + kT10, ack(psn(s, 2), 1));
  const auto wcs = tl.send_wcs();
  REQUIRE(wcs.size() == 1);
  check_wc(wcs[0], 1, WcStatus::success);
}

TEST_CASE("requester: an RNR NAK resends after exactly the timer it names, rnr_retry bounds it",
          "[timeline][requester][rnr]") {
  Config c;
  c.rnr_retry = 2;
  Timeline tl(c);
  const std::uint32_t s = tl.config.sq_psn;
  const auto m = bytes(100, 1);
  tl.put(0, m);
  tl.post_send(1'000, tl.wr(WrOpcode::send, 1, 0, 100));
  tl.expect(1'000, send_only(s, m).ackreq());

  // Timer code 14: 1.28 ms. The retransmission timer is off while waiting.
  tl.deliver(2'000, rnr_nak(s, 14));
  CHECK(tl.deadline() == 2'000 + 1'280'000);
  tl.expect_nothing(2'000 + 1'279'999);
  tl.expect(2'000 + 1'280'000, send_only(s, m).ackreq());
  tl.expect_nothing(2'000 + 1'280'000);
  CHECK(tl.deadline() == 2'000 + 1'280'000 + kT10);  // the ACK timer again

  SECTION("then accepted") {
    tl.deliver(1'300'000, ack(s, 1));
    const auto wcs = tl.send_wcs();
    REQUIRE(wcs.size() == 1);
    check_wc(wcs[0], 1, WcStatus::success);
  }
  SECTION("timer code 0 is the longest, 655.36 ms") {
    tl.deliver(1'300'000, rnr_nak(s, 0));
    CHECK(tl.deadline() == 1'300'000 + 655'360'000);
    tl.expect_nothing(1'300'000 + 655'359'999);
    tl.expect(1'300'000 + 655'360'000, send_only(s, m).ackreq());
  }
  SECTION("exhausted: rnr_retry 2 allows two resends; the third RNR NAK fails the WR") {
    tl.deliver(1'300'000, rnr_nak(s, 3));  // 30 us
    tl.expect_nothing(1'329'999);
    tl.expect(1'330'000, send_only(s, m).ackreq());
    CHECK(tl.send_wcs().empty());
    tl.deliver(1'400'000, rnr_nak(s, 3));
    tl.expect_nothing(1'400'000);
    CHECK(tl.state() == QpState::err);
    const auto wcs = tl.send_wcs();
    REQUIRE(wcs.size() == 1);
    check_wc(wcs[0], 1, WcStatus::rnr_retry_exc_err);
    CHECK_FALSE(tl.deadline());
    tl.expect_nothing(2'000'000);
  }
}

TEST_CASE("requester: rnr_retry 7 retries for ever", "[timeline][requester][rnr]") {
  Config c;
  c.rnr_retry = 7;
  Timeline tl(c);
  const std::uint32_t s = tl.config.sq_psn;
  tl.post_send(1'000, tl.wr(WrOpcode::send, 1, 0, 16));
  tl.expect(1'000, send_only(s, tl.get(0, 16)).ackreq());
  Time t = 1'000;
  for (int i = 0; i < 20; ++i) {
    tl.deliver(t + 100, rnr_nak(s, 1));  // 10 us
    t += 100 + 10'000;
    tl.expect_nothing(t - 1);
    tl.expect(t, send_only(s, tl.get(0, 16)).ackreq());
  }
  CHECK(tl.state() == QpState::rts);
  tl.deliver(t + 100, ack(s, 1));
  const auto wcs = tl.send_wcs();
  REQUIRE(wcs.size() == 1);
  check_wc(wcs[0], 1, WcStatus::success);
}

TEST_CASE("requester: a READ response stream that stops mid-message is recovered by the timeout",
          "[timeline][requester][read][timeout]") {
  Timeline tl;
  const std::uint32_t s = tl.config.sq_psn;
  const auto v = bytes(700, 33);
  tl.post_send(1'000, remote(tl.wr(WrOpcode::rdma_read, 1, 4096, 700)));
  tl.expect(1'000, read_request(s, kRemoteVa, kRemoteRkey, 700).ackreq());

  tl.deliver(2'000, read_first(s, 1, slice(v, 0, 256)));
  CHECK(tl.deadline() == 2'000 + kT10);  // progress restarted the timer
  tl.expect_nothing(2'000 + kT10 - 1);
  tl.expect(2'000 + kT10, read_request(psn(s, 1), kRemoteVa + 256, kRemoteRkey, 444).ackreq());
  tl.expect_nothing(2'000 + kT10);

  tl.deliver(3'000 + kT10, read_middle(psn(s, 1), slice(v, 256, 256)));
  tl.deliver(3'000 + kT10, read_last(psn(s, 2), 1, slice(v, 512, 188)));
  const auto wcs = tl.send_wcs();
  REQUIRE(wcs.size() == 1);
  check_wc(wcs[0], 1, WcStatus::success);
  CHECK(tl.get(4096, 700) == v);
}

TEST_CASE("requester: an RNR NAK for the second WR completes the first and resends from the second",
          "[timeline][requester][rnr]") {
  Timeline tl;
  const std::uint32_t s = tl.config.sq_psn;
  tl.put(0, bytes(20, 1));
  tl.post_send(1'000, tl.wr(WrOpcode::send, 1, 0, 10));
  tl.post_send(1'000, tl.wr(WrOpcode::send, 2, 10, 10));
  tl.expect(1'000, send_only(s, tl.get(0, 10)).ackreq());
  tl.expect(1'000, send_only(psn(s, 1), tl.get(10, 10)).ackreq());
  tl.deliver(2'000, rnr_nak(psn(s, 1), 1, 1));  // 10 us
  auto wcs = tl.send_wcs();
  REQUIRE(wcs.size() == 1);
  check_wc(wcs[0], 1, WcStatus::success);
  tl.expect_nothing(11'999);
  tl.expect(12'000, send_only(psn(s, 1), tl.get(10, 10)).ackreq());
  tl.expect_nothing(12'000);
  tl.deliver(13'000, ack(psn(s, 1), 2));
  wcs = tl.send_wcs();
  REQUIRE(wcs.size() == 1);
  check_wc(wcs[0], 2, WcStatus::success);
}

TEST_CASE("requester: an RNR NAK for the LAST of a WRITE with immediate resends only that packet",
          "[timeline][requester][rnr]") {
  Timeline tl;
  const std::uint32_t s = tl.config.sq_psn;
  const auto m = bytes(600, 17);
  tl.put(0, m);
  auto w = remote(tl.wr(WrOpcode::rdma_write_with_imm, 1, 0, 600));
  w.imm_data = core::imm_number(5);
  tl.post_send(1'000, w);
  const Pkt last = write_last(psn(s, 2), slice(m, 512, 88)).as(Operation::write_last_imm).imm(5).ackreq();
  tl.expect(1'000, write_first(s, kRemoteVa, kRemoteRkey, 600, slice(m, 0, 256)));
  tl.expect(1'000, write_middle(psn(s, 1), slice(m, 256, 256)));
  tl.expect(1'000, last);
  tl.deliver(2'000, rnr_nak(psn(s, 2), 2, 0));  // 20 us; FIRST and MIDDLE were received
  tl.expect_nothing(21'999);
  tl.expect(22'000, last);
  tl.expect_nothing(22'000);
  tl.deliver(23'000, ack(psn(s, 2), 1));
  const auto wcs = tl.send_wcs();
  REQUIRE(wcs.size() == 1);
  check_wc(wcs[0], 1, WcStatus::success);
}

TEST_CASE("requester: retry_cnt 7 is seven retries, not infinite", "[timeline][requester][timeout]") {
  // IBTA: only rnr_retry 7 means "for ever". (rxe treats retry_cnt 7 as infinite too.)
  Config c;
  c.retry_cnt = 7;
  c.timeout = 1;  // 8.192 us
  Timeline tl(c);
  const std::uint32_t s = tl.config.sq_psn;
  static_assert(core::ack_timeout(1) == 8'192);
  tl.post_send(0, tl.wr(WrOpcode::send, 1, 0, 4));
  tl.expect(0, send_only(s, tl.get(0, 4)).ackreq());
  for (Time k = 1; k <= 7; ++k) {
    tl.expect_nothing(k * 8'192 - 1);
    tl.expect(k * 8'192, send_only(s, tl.get(0, 4)).ackreq());
  }
  tl.expect_nothing(8 * 8'192);
  CHECK(tl.state() == QpState::err);
  const auto wcs = tl.send_wcs();
  REQUIRE(wcs.size() == 1);
  check_wc(wcs[0], 1, WcStatus::retry_exc_err);
}

TEST_CASE("requester: timeout 0 never retransmits", "[timeline][requester][timeout]") {
  Config c;
  c.timeout = 0;
  Timeline tl(c);
  tl.post_send(1'000, tl.wr(WrOpcode::send, 1, 0, 4));
  tl.expect(1'000, send_only(tl.config.sq_psn, tl.get(0, 4)).ackreq());
  CHECK_FALSE(tl.deadline());
  tl.expect_nothing(3'600'000'000'000);  // an hour later
  CHECK(tl.state() == QpState::rts);
}

TEST_CASE("requester: rc_pingpong's late ACK, after the peer's next SEND and during the timeout's resend, completes "
          "the SEND and the next one goes out",
          "[timeline][requester][timeout][pingpong]") {
  // The interop hang's sequence (4096-byte SENDs at path MTU 1024): our SEND waits for its
  // ACK while the peer's own SEND arrives and is acknowledged; the timer resends ours from
  // its first packet; the late ACK for our last PSN arrives after one or all of the resent
  // packets (s9.7.5.2.1: it acknowledges every packet up to it).
  Config c;
  c.mtu = core::Mtu::mtu1024;
  for (const bool all_resent : {false, true}) {
    SECTION(all_resent ? "ACK after the whole resend" : "ACK after the first resent packet") {
      Timeline tl(c);
      const std::uint32_t s = tl.config.sq_psn, e = tl.epsn();
      const auto mine = bytes(4096, 3), theirs = bytes(4096, 7);
      tl.put(0, mine);
      tl.post_recv(50, 8192, 4096);
      tl.post_recv(51, 8192, 4096);

      tl.post_send(1'000, tl.wr(WrOpcode::send, 1, 0, 4096));
      const auto four = [&](Time t, std::uint32_t base, std::uint32_t from) {
        const Operation ops[] = {Operation::send_first, Operation::send_middle, Operation::send_middle,
                                 Operation::send_last};
        for (std::uint32_t i = from; i < 4; ++i)
          tl.expect(t, rc(ops[i], psn(base, i)).with_payload(slice(mine, i * 1024, 1024)).ackreq(i == 3));
      };
      four(1'000, s, 0);
      tl.expect_nothing(1'000);

      // The peer's SEND comes before its ACK for ours.
      tl.deliver(2'000, send_first(e, slice(theirs, 0, 1024)));
      tl.deliver(2'000, send_middle(psn(e, 1), slice(theirs, 1024, 1024)));
      tl.deliver(2'000, send_middle(psn(e, 2), slice(theirs, 2048, 1024)));
      tl.deliver(2'000, send_last(psn(e, 3), slice(theirs, 3072, 1024)).ackreq());
      tl.expect(2'000, ack(psn(e, 3), 1));
      const auto rwc = tl.recv_wcs();
      REQUIRE(rwc.size() == 1);
      check_wc(rwc[0], 50, WcStatus::success);

      // No ACK for ours: the timer resends it from its first packet.
      const Time due = 1'000 + kT10;
      tl.expect_nothing(due - 1);
      tl.expect(due, send_first(s, slice(mine, 0, 1024)));
      if (all_resent) four(due, s, 1);
      tl.deliver(due + 1'000, ack(psn(s, 3), 1));
      const auto wcs = tl.send_wcs();
      REQUIRE(wcs.size() == 1);
      check_wc(wcs[0], 1, WcStatus::success);
      tl.expect_nothing(due + 1'000);  // the WQE is retired: nothing more of it is resent
      CHECK_FALSE(tl.deadline());

      // rc_pingpong has both completions: its next SEND continues the PSN sequence, the timer
      // guards it, and its ACK completes it.
      tl.post_send(due + 2'000, tl.wr(WrOpcode::send, 2, 0, 4096));
      four(due + 2'000, psn(s, 4), 0);
      tl.expect_nothing(due + 2'000);
      CHECK(tl.deadline() == due + 2'000 + kT10);
      tl.deliver(due + 3'000, ack(psn(s, 7), 2));
      const auto wcs2 = tl.send_wcs();
      REQUIRE(wcs2.size() == 1);
      check_wc(wcs2[0], 2, WcStatus::success);
      CHECK_FALSE(tl.deadline());
    }
  }
}
