// The requester's response to loss (completer.cpp, shrink_window) against a bottleneck: a
// tail-drop queue drained at a fixed rate, as an AF_PACKET receive ring or a socket buffer
// is. Go-back-N that resends its whole window into such a queue loses most of it again; the
// loss window must keep the resends near what the queue takes, and no QP may run out of
// retries while the others fill the queue.
#include <catch2/catch.hpp>
#include <memory>

#include "tests/core/engine_fixture.hpp"

using namespace test;
using core::WcStatus;

namespace {

constexpr std::uint32_t kMessage = 64 * 1024;  // 64 packets at MTU 1024
constexpr std::uint32_t kPacketsPerMessage = kMessage / 1024;

// Signaled WRITEs of kMessage from a to b, `messages` of them on each of a's `qps` QPs, all posted at
// once (a perftest ib_write_bw window); b's link back is clean.
struct Blast {
  Blast(int qps, int messages, std::size_t queue) : a(ipv4_gid(1), 1 << 20), b(ipv4_gid(2), 1 << 20) {
    // QPNs are allocated from first_qpn in order, so a's QP i and b's QP i share a number (as Pair).
    const std::uint32_t first = a.dev->config().first_qpn;
    const std::uint32_t end = first + static_cast<std::uint32_t>(qps);
    const QpOptions o;
    for (std::uint32_t qpn = first; qpn != end; ++qpn) {
      bring_up(a, qpn, b.gid(), o.a_psn, o.b_psn, o);
      bring_up(b, qpn, a.gid(), o.b_psn, o.a_psn, o);
    }
    net = std::make_unique<SimNetwork>(*a.dev, *b.dev, 1);
    net->faults[0].queue = queue;
    net->faults[0].drain_every = 1000;  // 1 M packets/s
    for (std::uint32_t qpn = first; qpn != end; ++qpn) {
      for (int m = 0; m < messages; ++m) {
        core::SendWr w;
        w.wr_id = qpn;
        w.opcode = core::WrOpcode::rdma_write;
        w.flags = core::send_flags::signaled;
        w.sg_list = {a.sge(0, kMessage)};
        w.remote_addr = b.addr(0);
        w.rkey = b.mr.rkey;
        REQUIRE(a.dev->post_send(net->now, qpn, w) == 0);
      }
    }
    needed = static_cast<std::uint64_t>(qps) * messages * kPacketsPerMessage;
    expected = qps * messages;
  }

  // Runs until every WRITE completed; counts the completions and the failed ones.
  bool run() {
    return net->run_until([&] {
      for (const auto& wc : a.poll(a.send_cq)) {
        ++completed;
        if (wc.status != WcStatus::success) ++failed;
      }
      return completed == expected;
    });
  }

  Side a, b;
  std::unique_ptr<SimNetwork> net;
  std::uint64_t needed = 0;
  int expected = 0, completed = 0, failed = 0;
};

// Runs `blast` to the end: every WRITE succeeds (no QP runs out of retries), the queue
// overflowed (it was the bottleneck), and at most `most_sent` packets left a.
void check_finishes(Blast& blast, std::uint64_t most_sent) {
  REQUIRE(blast.run());
  const auto& s = blast.net->stats[0];
  INFO("sent " << s.sent << " for " << blast.needed << " packets, " << s.overflowed << " overflowed the queue");
  CHECK(blast.failed == 0);
  CHECK(s.overflowed > 0);
  CHECK(s.sent <= most_sent);
}

}  // namespace

TEST_CASE("behind a 64-packet tail-drop queue one QP's 64 KiB WRITEs resend at most half again their packets",
          "[core][loss-window]") {
  Blast blast(1, 64, 64);
  check_finishes(blast, blast.needed * 3 / 2);
}

// Their first windows alone (16 x 512 packets at once) overflow the queue seven times over.
TEST_CASE("16 QPs into one 1024-packet queue all finish, sending at most 2.5 times their packets",
          "[core][loss-window]") {
  Blast blast(16, 16, 1024);
  check_finishes(blast, blast.needed * 5 / 2);
}
