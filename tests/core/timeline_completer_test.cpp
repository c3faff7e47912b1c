// RC completer timelines (IBTA vol. 1 s9.7.5.2, completer.cpp): the engine sends requests, the
// test answers them with ACKs, NAKs, READ responses and atomic acknowledgements, and asserts
// the send completions and resends the answers bring. Covered: go-back-N after a sequence error
// NAK (which costs no retry), NAKs that fail a WR with REM_*_ERR (also in the middle of a
// READ's responses), lost READ responses asked for again (implied by a later ACK too, and
// across the PSN wrap), atomic acknowledgements, a READ response acknowledging the SEND before
// it, and a QP moved to ERR flushing its WRs and ignoring later answers.
#include <catch2/catch.hpp>

#include "tests/core/timeline_test_util.hpp"

using namespace test;
using namespace test::timeline;

TEST_CASE("requester: a sequence error NAK for the middle packet resends from it (go-back-N)",
          "[timeline][requester]") {
  Timeline tl;
  const std::uint32_t s = tl.config.sq_psn;
  const auto m = bytes(700, 4);
  tl.put(0, m);
  tl.post_send(1'000, tl.wr(WrOpcode::send, 1, 0, 700));
  tl.expect(1'000, send_first(s, slice(m, 0, 256)));
  tl.expect(1'000, send_middle(psn(s, 1), slice(m, 256, 256)));
  tl.expect(1'000, send_last(psn(s, 2), slice(m, 512, 188)).ackreq());

  tl.deliver(2'000, nak(psn(s, 1), NakCode::psn_sequence_error, 0));
  tl.expect(2'000, send_middle(psn(s, 1), slice(m, 256, 256)));
  tl.expect(2'000, send_last(psn(s, 2), slice(m, 512, 188)).ackreq());
  tl.expect_nothing(2'000);
  CHECK(tl.deadline() == 2'000 + kT10);  // the NAK acknowledged s: progress restarts the timer
  CHECK(tl.qp().counters.rcvd_seq_err == 1);
  CHECK(tl.send_wcs().empty());

  tl.deliver(3'000, ack(psn(s, 2), 1));
  const auto wcs = tl.send_wcs();
  REQUIRE(wcs.size() == 1);
  check_wc(wcs[0], 1, WcStatus::success);
  CHECK_FALSE(tl.deadline());
}

TEST_CASE("requester: NAK invalid request / remote access / remote operational fail the WR with REM_*_ERR",
          "[timeline][requester]") {
  const std::pair<NakCode, WcStatus> cases[] = {
      {NakCode::invalid_request, WcStatus::rem_inv_req_err},
      {NakCode::remote_access_error, WcStatus::rem_access_err},
      {NakCode::remote_operational_error, WcStatus::rem_op_err},
  };
  for (const auto& [code, status] : cases) {
    INFO("NAK code " << int(code));
    Timeline tl;
    const std::uint32_t s = tl.config.sq_psn;
    const auto m = bytes(300, 3);
    tl.put(0, m);
    tl.post_send(1'000, remote(tl.wr(WrOpcode::rdma_write, 1, 0, 100)));
    tl.post_send(1'000, tl.wr(WrOpcode::send, 2, 100, 100));
    tl.post_send(1'000, tl.wr(WrOpcode::send, 3, 200, 100));
    tl.expect(1'000, write_only(s, kRemoteVa, kRemoteRkey, slice(m, 0, 100)).ackreq());
    tl.expect(1'000, send_only(psn(s, 1), slice(m, 100, 100)).ackreq());
    tl.expect(1'000, send_only(psn(s, 2), slice(m, 200, 100)).ackreq());

    // The NAK names the second WR's PSN: the WRITE before it was received (s9.7.5.2.2).
    tl.deliver(2'000, nak(psn(s, 1), code, 1));
    CHECK(tl.state() == QpState::err);
    const auto wcs = tl.send_wcs();
    REQUIRE(wcs.size() == 3);
    check_wc(wcs[0], 1, WcStatus::success);
    CHECK(wcs[0].opcode == WcOpcode::rdma_write);
    check_wc(wcs[1], 2, status);
    check_wc(wcs[2], 3, WcStatus::wr_flush_err);
    CHECK_FALSE(tl.deadline());
    tl.expect_nothing(2'000 + 2 * kT10);
  }
}

TEST_CASE("requester: a READ whose MIDDLE response is lost is asked again from that PSN",
          "[timeline][requester][read]") {
  Timeline tl;
  const std::uint32_t s = tl.config.sq_psn;
  const auto v = bytes(700, 21);  // the peer's memory: responses of 256, 256 and 188 bytes
  tl.post_send(1'000, remote(tl.wr(WrOpcode::rdma_read, 1, 4096, 700)));
  tl.expect(1'000, read_request(s, kRemoteVa, kRemoteRkey, 700).ackreq());
  tl.expect_nothing(1'000);

  tl.deliver(2'000, read_first(s, 1, slice(v, 0, 256)));
  // (the MIDDLE at s+1 is lost)
  tl.deliver(2'100, read_last(psn(s, 2), 1, slice(v, 512, 188)));
  // The READ again from the missing PSN, its RETH moved on by what arrived.
  tl.expect(2'100, read_request(psn(s, 1), kRemoteVa + 256, kRemoteRkey, 444).ackreq());
  tl.expect_nothing(2'100);
  CHECK(tl.send_wcs().empty());

  tl.deliver(3'000, read_middle(psn(s, 1), slice(v, 256, 256)));
  tl.deliver(3'000, read_last(psn(s, 2), 1, slice(v, 512, 188)));
  const auto wcs = tl.send_wcs();
  REQUIRE(wcs.size() == 1);
  check_wc(wcs[0], 1, WcStatus::success);
  CHECK(wcs[0].opcode == WcOpcode::rdma_read);
  CHECK(wcs[0].byte_len == 700);
  CHECK(tl.get(4096, 700) == v);
  CHECK_FALSE(tl.deadline());

  // The READ used PSNs s .. s+2: the next request is s+3.
  tl.post_send(4'000, tl.wr(WrOpcode::send, 2, 0, 4));
  tl.expect(4'000, send_only(psn(s, 3), tl.get(0, 4)).ackreq());
}

TEST_CASE("requester: an ACK past a READ whose response never came asks for the READ again (implied NAK)",
          "[timeline][requester][read]") {
  Timeline tl;
  const std::uint32_t s = tl.config.sq_psn;
  const auto v = bytes(100, 44);
  tl.put(0, bytes(10, 1));
  tl.post_send(1'000, remote(tl.wr(WrOpcode::rdma_read, 1, 4096, 100)));
  tl.post_send(1'000, tl.wr(WrOpcode::send, 2, 0, 10));
  tl.expect(1'000, read_request(s, kRemoteVa, kRemoteRkey, 100).ackreq());
  tl.expect(1'000, send_only(psn(s, 1), tl.get(0, 10)).ackreq());

  // The peer acknowledges the SEND: the READ response before it must have been lost.
  tl.deliver(2'000, ack(psn(s, 1), 2));
  tl.expect(2'000, read_request(s, kRemoteVa, kRemoteRkey, 100).ackreq());
  // Go-back-N: everything after the READ goes again too (as rxe's retry does).
  tl.expect(2'000, send_only(psn(s, 1), tl.get(0, 10)).ackreq());
  tl.expect_nothing(2'000);
  CHECK(tl.send_wcs().empty());  // the SEND cannot complete before the READ

  tl.deliver(3'000, read_only(s, 1, v));
  auto wcs = tl.send_wcs();
  REQUIRE(wcs.size() == 1);
  check_wc(wcs[0], 1, WcStatus::success);
  CHECK(wcs[0].opcode == WcOpcode::rdma_read);
  CHECK(tl.get(4096, 100) == v);
  tl.deliver(3'000, ack(psn(s, 1), 2));
  wcs = tl.send_wcs();
  REQUIRE(wcs.size() == 1);
  check_wc(wcs[0], 2, WcStatus::success);
  CHECK_FALSE(tl.deadline());
}

TEST_CASE("requester: ATOMIC ACKNOWLEDGE delivers the original value into the local buffer",
          "[timeline][requester][atomic]") {
  Timeline tl;
  const std::uint32_t s = tl.config.sq_psn;
  auto faa = remote(tl.wr(WrOpcode::atomic_fetch_and_add, 1, 64, 8));
  faa.compare_add = 5;
  tl.post_send(1'000, faa);
  tl.expect(1'000, fetch_add(s, kRemoteVa, kRemoteRkey, 5).ackreq());

  // The answer is lost: the same request, same PSN, after the timeout.
  tl.expect_nothing(1'000 + kT10 - 1);
  tl.expect(1'000 + kT10, fetch_add(s, kRemoteVa, kRemoteRkey, 5).ackreq());
  tl.deliver(2'000 + kT10, atomic_ack(s, 1, 0x1122334455667788));
  auto wcs = tl.send_wcs();
  REQUIRE(wcs.size() == 1);
  check_wc(wcs[0], 1, WcStatus::success);
  CHECK(wcs[0].opcode == WcOpcode::fetch_add);
  CHECK(wcs[0].byte_len == 8);
  CHECK(tl.get_u64(64) == 0x1122334455667788);

  auto cas = remote(tl.wr(WrOpcode::atomic_cmp_and_swp, 2, 72, 8), kRemoteVa + 8);
  cas.compare_add = 0x10;
  cas.swap = 0x20;
  const Time t = 3'000 + kT10;
  tl.post_send(t, cas);
  tl.expect(t, compare_swap(psn(s, 1), kRemoteVa + 8, kRemoteRkey, 0x10, 0x20).ackreq());
  tl.deliver(t + 1'000, atomic_ack(psn(s, 1), 2, 0x10));
  wcs = tl.send_wcs();
  REQUIRE(wcs.size() == 1);
  check_wc(wcs[0], 2, WcStatus::success);
  CHECK(wcs[0].opcode == WcOpcode::comp_swap);
  CHECK(tl.get_u64(72) == 0x10);

  // A late duplicate ATOMIC ACKNOWLEDGE changes nothing.
  tl.deliver(t + 2'000, atomic_ack(psn(s, 1), 2, 0x99));
  CHECK(tl.get_u64(72) == 0x10);
  CHECK(tl.send_wcs().empty());
  tl.expect_nothing(t + 2'000);
}

TEST_CASE("requester: a QP moved to ERR flushes its outstanding WRs and sends nothing more",
          "[timeline][requester][flush]") {
  Timeline tl;
  const std::uint32_t s = tl.config.sq_psn;
  const auto m = bytes(800, 5);
  tl.put(0, m);
  tl.post_recv(70, 8192, 256);
  tl.post_send(1'000, tl.wr(WrOpcode::send, 1, 0, 700));
  tl.post_send(1'000, remote(tl.wr(WrOpcode::rdma_write, 2, 700, 100)));
  tl.post_send(1'000, remote(tl.wr(WrOpcode::rdma_read, 3, 4096, 100)));
  tl.expect(1'000, send_first(s, slice(m, 0, 256)));
  tl.expect(1'000, send_middle(psn(s, 1), slice(m, 256, 256)));
  tl.expect(1'000, send_last(psn(s, 2), slice(m, 512, 188)).ackreq());
  tl.expect(1'000, write_only(psn(s, 3), kRemoteVa, kRemoteRkey, slice(m, 700, 100)).ackreq());
  tl.expect(1'000, read_request(psn(s, 4), kRemoteVa, kRemoteRkey, 100).ackreq());
  tl.expect_nothing(1'000);

  tl.modify_state(2'000, QpState::err);
  const auto wcs = tl.send_wcs();
  REQUIRE(wcs.size() == 3);
  for (std::size_t i = 0; i < 3; ++i) check_wc(wcs[i], i + 1, WcStatus::wr_flush_err);
  const auto rwc = tl.recv_wcs();
  REQUIRE(rwc.size() == 1);
  check_wc(rwc[0], 70, WcStatus::wr_flush_err);
  CHECK_FALSE(tl.deadline());
  tl.expect_nothing(2'000);

  // Answers that arrive now change nothing; new work is flushed at once, never sent.
  tl.deliver(3'000, ack(psn(s, 3), 2));
  tl.deliver(3'000, read_only(psn(s, 4), 3, bytes(100, 1)));
  CHECK(tl.send_wcs().empty());
  CHECK(tl.get(4096, 100) == std::vector<std::uint8_t>(100, 0));
  tl.post_send(4'000, tl.wr(WrOpcode::send, 4, 0, 10));
  const auto late = tl.send_wcs();
  REQUIRE(late.size() == 1);
  check_wc(late[0], 4, WcStatus::wr_flush_err);
  tl.expect_nothing(4'000);
  tl.expect_nothing(1'000 + 10 * kT10);
  CHECK_FALSE(tl.deadline());
}

TEST_CASE("requester: a READ response also acknowledges the SEND before it", "[timeline][requester][read]") {
  Timeline tl;
  const std::uint32_t s = tl.config.sq_psn;
  const auto v = bytes(50, 8);
  tl.post_send(1'000, tl.wr(WrOpcode::send, 1, 0, 10));
  tl.post_send(1'000, remote(tl.wr(WrOpcode::rdma_read, 2, 4096, 50)));
  tl.expect(1'000, send_only(s, tl.get(0, 10)).ackreq());
  tl.expect(1'000, read_request(psn(s, 1), kRemoteVa, kRemoteRkey, 50).ackreq());
  tl.deliver(2'000, read_only(psn(s, 1), 2, v));  // the ACK for s was coalesced into this
  const auto wcs = tl.send_wcs();
  REQUIRE(wcs.size() == 2);
  check_wc(wcs[0], 1, WcStatus::success);
  CHECK(wcs[0].opcode == WcOpcode::send);
  check_wc(wcs[1], 2, WcStatus::success);
  CHECK(tl.get(4096, 50) == v);
  CHECK_FALSE(tl.deadline());
}

TEST_CASE("requester: a NAK in the middle of a READ's responses fails the READ", "[timeline][requester][read]") {
  // The responder found an error after its first response (say, the MR went away). A NAK
  // while READ responses are due must end the READ with the NAK's status, not restart it (a
  // requester that resends here loops for ever: a bug reported against rxe on linux-rdma).
  Timeline tl;
  const std::uint32_t s = tl.config.sq_psn;
  const auto v = bytes(600, 3);
  tl.post_send(1'000, remote(tl.wr(WrOpcode::rdma_read, 1, 4096, 600)));
  tl.post_send(1'000, tl.wr(WrOpcode::send, 2, 0, 4));
  tl.expect(1'000, read_request(s, kRemoteVa, kRemoteRkey, 600).ackreq());
  tl.expect(1'000, send_only(psn(s, 3), tl.get(0, 4)).ackreq());
  tl.deliver(2'000, read_first(s, 1, slice(v, 0, 256)));
  tl.deliver(2'000, nak(psn(s, 1), NakCode::remote_access_error, 1));
  CHECK(tl.state() == QpState::err);
  const auto wcs = tl.send_wcs();
  REQUIRE(wcs.size() == 2);
  check_wc(wcs[0], 1, WcStatus::rem_access_err);
  check_wc(wcs[1], 2, WcStatus::wr_flush_err);
  tl.expect_nothing(2'000 + 2 * kT10);
}

TEST_CASE("requester: sequence error NAKs resend at once and do not count against retry_cnt", "[timeline][requester]") {
  // Current behaviour, a design question: rxe counts a sequence error NAK that brings no
  // progress against retry_cnt (and starts only one retry per episode), so a responder that
  // NAKs for ever ends the QP with RETRY_EXC_ERR; this engine resends every time.
  Config c;
  c.retry_cnt = 1;
  Timeline tl(c);
  const std::uint32_t s = tl.config.sq_psn;
  const auto m = bytes(16, 2);
  tl.put(0, m);
  tl.post_send(1'000, tl.wr(WrOpcode::send, 1, 0, 16));
  tl.expect(1'000, send_only(s, m).ackreq());
  for (Time t = 2'000; t < 10'000; t += 1'000) {
    tl.deliver(t, nak(s, NakCode::psn_sequence_error, 0));
    tl.expect(t, send_only(s, m).ackreq());
    tl.expect_nothing(t);
  }
  CHECK(tl.state() == QpState::rts);
  CHECK(tl.send_wcs().empty());
}

TEST_CASE("requester: a READ across the PSN wrap, its MIDDLE response lost", "[timeline][requester][wrap][read]") {
  Config c;
  c.sq_psn = 0xFFFFFE;
  Timeline tl(c);
  const auto v = bytes(600, 70);
  tl.post_send(1'000, remote(tl.wr(WrOpcode::rdma_read, 1, 4096, 600)));
  tl.expect(1'000, read_request(0xFFFFFE, kRemoteVa, kRemoteRkey, 600).ackreq());
  tl.deliver(2'000, read_first(0xFFFFFE, 1, slice(v, 0, 256)));
  tl.deliver(2'000, read_last(0x000000, 1, slice(v, 512, 88)));
  tl.expect(2'000, read_request(0xFFFFFF, kRemoteVa + 256, kRemoteRkey, 344).ackreq());
  tl.deliver(3'000, read_middle(0xFFFFFF, slice(v, 256, 256)));
  tl.deliver(3'000, read_last(0x000000, 1, slice(v, 512, 88)));
  const auto wcs = tl.send_wcs();
  REQUIRE(wcs.size() == 1);
  check_wc(wcs[0], 1, WcStatus::success);
  CHECK(tl.get(4096, 600) == v);
  tl.post_send(4'000, tl.wr(WrOpcode::send, 2, 0, 4));
  tl.expect(4'000, send_only(0x000001, tl.get(0, 4)).ackreq());
}
