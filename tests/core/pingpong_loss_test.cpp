// ibv_rc_pingpong's pattern over a seeded faulty link: both sides post receives ahead and
// re-post them as rc_pingpong does, and each side posts its next signaled SEND only once both
// its previous send completion and the receive completion of the peer's message are in.
// A lost completion, or a requester that stops, hangs the ping-pong for ever: the run must
// finish with every completion a success.
//
// A failing run names its seed, lossy side and the counts each side reached (INFO).
#include <catch2/catch.hpp>
#include <cstring>
#include <random>
#include <string>

#include "tests/core/engine_fixture.hpp"

using namespace test;
using core::WcStatus;

namespace {

constexpr std::uint64_t kSendWrid = 2, kRecvWrid = 1;  // rc_pingpong's PINGPONG_*_WRID
constexpr std::uint32_t kSize = 4096;                  // 4 packets at MTU 1024
constexpr int kRxDepth = 500;                          // rc_pingpong's default rx_depth

// One side of rc_pingpong: its counters and pending bits, as in its main loop.
struct PingPong {
  Side& s;
  int iters;
  int routs = 0, scnt = 0, rcnt = 0;
  unsigned pending = kRecvWrid;
  bool failed = false;

  void post_recvs(int n) {
    for (int i = 0; i < n; ++i) {
      core::RecvWr r;
      r.wr_id = kRecvWrid;
      r.sg_list = {s.sge(0, kSize)};  // rc_pingpong receives into the buffer it sends from
      if (s.dev->post_recv(s.qpn, r) != 0) break;
      ++routs;
    }
  }

  void post_send(Time now) {
    core::SendWr w;
    w.wr_id = kSendWrid;
    w.opcode = core::WrOpcode::send;
    w.flags = core::send_flags::signaled;
    w.sg_list = {s.sge(0, kSize)};
    if (s.dev->post_send(now, s.qpn, w) != 0) failed = true;
    pending = kRecvWrid | kSendWrid;
  }

  // One pass of rc_pingpong's poll loop (it polls one CQ for both queues; two CQs here).
  void step(Time now) {
    auto wcs = s.poll(s.send_cq);
    for (const auto& wc : s.poll(s.recv_cq)) wcs.push_back(wc);
    for (const auto& wc : wcs) {
      if (wc.status != WcStatus::success) {
        failed = true;
        continue;
      }
      if (wc.wr_id == kSendWrid) {
        ++scnt;
      } else if (wc.wr_id == kRecvWrid) {
        if (--routs <= 1) post_recvs(kRxDepth - routs);
        ++rcnt;
      }
      pending &= ~static_cast<unsigned>(wc.wr_id);
      if (scnt < iters && !pending) post_send(now);
    }
  }

  bool done() const { return scnt >= iters && rcnt >= iters; }
};

struct Result {
  bool finished = false, failed = false;
  int a_scnt = 0, a_rcnt = 0, b_scnt = 0, b_rcnt = 0;
};

// `lossy` is the sending node whose packets the faults hit (0: a->b, 1: b->a); a always
// starts (rc_pingpong's client), so the two values cover both roles of the lossy side.
Result run(std::uint64_t seed, int lossy, const Faults& faults, const Faults& other, int iters) {
  QpOptions o;
  o.mtu = core::Mtu::mtu1024;
  o.timeout = 14;  // rc_pingpong's
  o.retry_cnt = 7;
  o.rnr_retry = 7;
  Pair p(o, 1 << 16, seed);
  p.net.faults[lossy] = faults;
  p.net.faults[1 - lossy] = other;
  PingPong a{p.a, iters}, b{p.b, iters};
  a.post_recvs(kRxDepth);
  b.post_recvs(kRxDepth);
  a.post_send(p.net.now);
  Result r;
  // 120 s of virtual time: the interop run hung for that long.
  r.finished = p.net.run_until(
      [&] {
        a.step(p.net.now);
        b.step(p.net.now);
        return (a.done() && b.done()) || a.failed || b.failed;
      },
      120'000'000'000ull);
  r.failed = a.failed || b.failed;
  r.a_scnt = a.scnt;
  r.a_rcnt = a.rcnt;
  r.b_scnt = b.scnt;
  r.b_rcnt = b.rcnt;
  return r;
}

void check(std::uint64_t seed, int lossy, const Faults& f, const Faults& other, int iters) {
  const Result r = run(seed, lossy, f, other, iters);
  INFO("seed " << seed << " lossy " << lossy << " a " << r.a_scnt << "/" << r.a_rcnt << " b " << r.b_scnt << "/"
               << r.b_rcnt);
  REQUIRE_FALSE(r.failed);
  REQUIRE(r.finished);
}

}  // namespace

TEST_CASE("rc_pingpong 4096 B at MTU 1024 with 5% loss on one direction finishes, both roles", "[core][pingpong]") {
  Faults f;
  f.loss = 0.05;
  for (int lossy = 0; lossy < 2; ++lossy)
    for (std::uint64_t seed = 1; seed <= 50; ++seed) check(seed, lossy, f, Faults{}, 60);
}

TEST_CASE("rc_pingpong with loss one way and delay or reordering either way finishes", "[core][pingpong]") {
  for (int variant = 0; variant < 7; ++variant) {
    Faults f, other;
    f.loss = 0.05;
    switch (variant) {
      // The peer's ACK can come after its next SEND.
      case 0:
        other.reorder = 0.2;
        break;
      case 1:
        f.reorder = 0.2;
        break;
      case 2:
        f.delay = other.delay = 2'000'000;
        break;  // 2 ms each way
      // ACKs later than the 67 ms timeout: they arrive during the go-back-N resend.
      case 3:
        f.loss = 0.15, other.reorder = 0.3, other.reorder_by = 80'000'000;
        break;
      // The peer's ACKs lost too: only the timer and a duplicate's ACK complete a SEND.
      case 4:
        other.loss = 0.05;
        break;
      case 5:
        other.loss = 0.1, other.reorder = 0.2, other.reorder_by = 80'000'000;
        break;
      case 6:
        f.reorder = other.reorder = 0.2, f.reorder_by = other.reorder_by = 80'000'000, other.loss = 0.05;
        break;
    }
    for (int lossy = 0; lossy < 2; ++lossy)
      for (std::uint64_t seed = 1; seed <= 10; ++seed) {
        INFO("variant " << variant);
        check(seed, lossy, f, other, 60);
      }
  }
}

TEST_CASE("rc_pingpong under random mixes of loss, duplication, delay and reordering finishes", "[core][pingpong]") {
  // Each seed draws its own mix: loss on the lossy side, and on the other side anything from
  // a clean link to ACKs lost, duplicated or held back past the 67 ms local ACK timeout (a
  // slow peer: rxe in a guest answers tens of milliseconds late, after its own next SEND).
  for (std::uint64_t seed = 1; seed <= 100; ++seed) {
    std::mt19937_64 rng(seed * 7919);
    const auto percent = [&](std::uint64_t below) { return static_cast<double>(rng() % below) / 100.0; };
    Faults f, other;
    f.loss = 0.02 + percent(10);
    other.loss = rng() % 3 == 0 ? percent(8) : 0;
    other.reorder = rng() % 2 ? percent(40) : 0;
    other.reorder_by = 1000 + rng() % 150'000'000;
    other.delay = 1000 + rng() % 30'000'000;
    f.delay = 1000 + rng() % 5'000'000;
    f.reorder = rng() % 3 == 0 ? percent(20) : 0;
    f.reorder_by = 1000 + rng() % 100'000'000;
    f.duplicate = rng() % 4 == 0 ? 0.05 : 0;
    other.duplicate = rng() % 4 == 0 ? 0.05 : 0;
    check(seed, static_cast<int>(seed % 2), f, other, 60);
  }
}
