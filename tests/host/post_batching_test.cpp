// EmbeddedHost::post (the shim's ibv_post_send): while the application busy-polls a CQ, posted
// packets wait for its next poll_cq and leave together, as do those of posts made back to back;
// otherwise, and when it stops polling, they leave without it, and before their QP when it is
// destroyed first. Posts a work source (softrdmad's rings) makes in its pull leave together
// after it. The ACK a polling receive calls for waits with them, past polls that reap other
// completions. Counted at the sender's UDP socket, received byte-exact at the peer.
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstring>
#include <optional>
#include <utility>

#include "tests/host/host_fixture.hpp"
#include "tests/net/capture_files.hpp"

namespace test {
namespace {

using core::WcStatus;
using core::WrOpcode;

constexpr std::uint32_t kMessage = 64;  // perftest's message-rate size: every packet the same length
// In a captured RoCEv2 frame: Ethernet (14), IPv4 (20), UDP (8), then the BTH's opcode.
constexpr std::size_t kIpv4Source = 14 + 12;
constexpr std::size_t kBthOpcode = 14 + 20 + 8;
// RC RDMA WRITE Only and Acknowledge (IBTA vol. 1 table 35).
constexpr int kRcWriteOnly = 0x0A, kRcAcknowledge = 0x11;

std::uint64_t udp_sent(Node& n) { return n.host->stats().udp.tx_packets; }

// Empty polls in quick succession, as perftest's loop makes while its send window is full,
// for long enough (past the host's kSteadyPolling) that the lease is the steady one: the short
// lease ends after tens of microseconds, which a loaded machine (sanitizers, parallel tests)
// may spend between the last poll and the post.
void busy_poll(Node& n) {
  std::vector<core::Wc> none(16);
  const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(1500);
  for (int i = 0; i < 64 || std::chrono::steady_clock::now() < until; ++i)
    REQUIRE(n.host->poll_cq(n.send_cq, none) == 0);
}

void post_sends(Node& n, std::uint32_t qpn, std::uint64_t first_id, int count) {
  const int err = n.host->post([&](core::Device& d, core::Time now) {
    for (int i = 0; i < count; ++i) {
      const std::uint64_t id = first_id + static_cast<std::uint64_t>(i);
      if (const int e = d.post_send(now, qpn, make_wr(WrOpcode::send, id, {n.sge(id * kMessage, kMessage)}))) return e;
    }
    return 0;
  });
  REQUIRE(err == 0);
}

// Busy-polls, posts `count` SENDs and reports whether they were still unsent after the post
// returned. The progress thread may send them first if a timer wakes it at that moment, so a
// caller tries again a few times.
bool posted_while_polling_wait(Node& n, std::uint32_t qpn, std::uint64_t first_id, int count) {
  busy_poll(n);
  const std::uint64_t before = udp_sent(n);
  post_sends(n, qpn, first_id, count);
  return udp_sent(n) == before;
}

void expect_received(Node& from, Node& to, std::size_t count, std::uint64_t first_id) {
  const std::vector<core::Wc> got = to.wait(to.recv_cq, count, true);
  for (const core::Wc& wc : got) {
    CHECK(wc.status == WcStatus::success);
    CHECK(wc.byte_len == kMessage);
  }
  const std::size_t offset = first_id * kMessage;
  CHECK(std::memcmp(from.buffer.data() + offset, to.buffer.data() + offset, count * kMessage) == 0);
}

void post_receives(Node& n, std::uint32_t qpn, int count) {
  for (int i = 0; i < count; ++i)
    n.post_recv(qpn, static_cast<std::uint64_t>(i), static_cast<std::size_t>(i) * kMessage, kMessage);
}

// Two hosts on `subnet`.1 and .2, one RC QP each, the receiver ready for every SEND a test posts.
struct Batching {
  static constexpr int kRounds = 20;

  Batching(const std::string& subnet, int batch_, std::uint32_t seed)
      : a(subnet + ".1"), b(subnet + ".2"), p(a, b), batch(batch_) {
    fill_pattern(a.buffer, 0, static_cast<std::size_t>(kRounds * batch) * kMessage, seed);
    post_receives(b, p.qb, kRounds * batch);
  }

  // Rounds of busy-polling and `batch` SENDs until a round's SENDs are still unsent after the
  // post (an earlier round's are waited for); `before`: a's counters before that round. Returns
  // how many SENDs were posted in all.
  std::uint64_t post_until_one_waits(host::HostStats& before) {
    for (int round = 0; round < kRounds; ++round) {
      before = a.host->stats();
      const auto first = static_cast<std::uint64_t>(round * batch);
      if (posted_while_polling_wait(a, p.qa, first, batch)) return first + static_cast<std::uint64_t>(batch);
      a.wait(a.send_cq, static_cast<std::size_t>(batch));  // every SEND signalled: this round is acknowledged
    }
    FAIL("no post waited for a poll in " << kRounds << " rounds of busy-polling");
    return 0;
  }

  Node a, b;
  RcPair p;
  const int batch;
};

TEST_CASE("while the application busy-polls, posted SENDs wait for its next poll and leave in one batch",
          "[host][batching]") {
  Batching t("127.83.80", 32, 80);
  host::HostStats before;
  const std::uint64_t posted = t.post_until_one_waits(before);
  std::vector<core::Wc> wcs(64);
  REQUIRE(t.a.host->poll_cq(t.a.send_cq, wcs) >= 0);  // this one poll sends the whole batch
  const host::HostStats after = t.a.host->stats();
  CHECK(after.udp.tx_packets - before.udp.tx_packets == 32);
  // Equal 64-byte packets to one peer: whole GSO datagrams, not a datagram each.
  CHECK(after.udp.tx_gso_datagrams - before.udp.tx_gso_datagrams >= 1);
  CHECK(after.udp.tx_gso_datagrams - before.udp.tx_gso_datagrams <= 16);
  expect_received(t.a, t.b, posted, 0);
}

TEST_CASE("posts of an application that stops polling leave within the busy-poll lease", "[host][batching]") {
  Batching t("127.83.81", 8, 81);
  host::HostStats before;
  const std::uint64_t posted = t.post_until_one_waits(before);
  // No poll_cq from here on: the progress thread sends them when the lease (20 us) runs out.
  CHECK(eventually([&] { return udp_sent(t.a) >= posted; }, 50ms));
  expect_received(t.a, t.b, posted, 0);
}

TEST_CASE("SENDs waiting for the next poll leave before their QP is destroyed", "[host][batching]") {
  Batching t("127.83.88", 8, 88);
  host::HostStats before;
  const std::uint64_t posted = t.post_until_one_waits(before);
  REQUIRE(t.a.host->destroy_qp(t.p.qa) == 0);
  CHECK(t.a.host->stats().udp.tx_packets - before.udp.tx_packets == 8);
  expect_received(t.a, t.b, posted, 0);
}

// b busy-polls until a's SEND completes on its receive CQ; b's packet count from before, if the
// ACK had not left by then. The progress thread sends it if the lease ends first (a loaded
// machine), so callers retry.
std::optional<std::uint64_t> ack_waits_after_receive(Node& a, Node& b, const RcPair& p, std::uint64_t id) {
  busy_poll(b);
  const std::uint64_t before = udp_sent(b);
  post_sends(a, p.qa, id, 1);  // a does not poll: its SEND leaves at once
  std::vector<core::Wc> wc(1);
  while (b.host->poll_cq(b.recv_cq, wc) == 0) {
  }
  REQUIRE(wc[0].status == WcStatus::success);
  if (udp_sent(b) != before) return std::nullopt;
  return before;
}

TEST_CASE("a SEND's ACK waits past the busy-polling receiver's poll for its next post", "[host][batching]") {
  constexpr int kRounds = 50;
  Node a("127.83.89.1"), b("127.83.89.2");
  RcPair p(a, b);
  fill_pattern(a.buffer, 0, kRounds * kMessage, 89);
  fill_pattern(b.buffer, 0, kRounds * kMessage, 90);
  post_receives(a, p.qa, kRounds);
  post_receives(b, p.qb, kRounds);
  for (int round = 0; round < kRounds; ++round) {
    const auto id = static_cast<std::uint64_t>(round);
    const std::optional<std::uint64_t> before = ack_waits_after_receive(a, b, p, id);
    if (!before) {
      a.wait(a.send_cq, 1);
      continue;
    }
    post_sends(b, p.qb, id, 1);
    std::vector<core::Wc> wcs(1);
    REQUIRE(b.host->poll_cq(b.send_cq, wcs) >= 0);  // sends what waits: the ACK and the answer
    // Two packets in all, whoever sent them: no ACK of its own went out before.
    CHECK(eventually([&] { return udp_sent(b) == *before + 2; }, 1s));
    CHECK(a.wait(a.send_cq, 1).front().status == WcStatus::success);
    const std::vector<core::Wc> answer = a.wait(a.recv_cq, 1, true);
    CHECK(answer.front().byte_len == kMessage);
    // b's only SEND lands in a's first receive, at offset 0.
    CHECK(std::memcmp(a.buffer.data(), b.buffer.data() + id * kMessage, kMessage) == 0);
    return;
  }
  FAIL("the ACK left before the receiver's next post in " << kRounds << " rounds of busy-polling");
}

// One round of ib_send_lat's order on b: b's request goes out, a answers, and b, busy-polling,
// receives the answer (its ACK now waits), reaps its request's completion from the send CQ,
// then posts its next request. Whether the reaping poll found the completion and sent nothing,
// and the ACK then left with the next request, two packets in all. On a loaded machine a round
// may outlast the lease; every WR posted completes before it returns either way, so that rounds
// follow one another cleanly.
bool ack_waits_past_reaping_poll(Node& a, Node& b, const RcPair& p, std::uint64_t id) {
  std::vector<core::Wc> wc(1);
  busy_poll(b);
  const std::uint64_t a_before = udp_sent(a);
  post_sends(b, p.qb, 2 * id, 1);
  REQUIRE(b.host->poll_cq(b.recv_cq, wc) == 0);  // sends the request
  // a's answer follows its ACK of the request; b polls on meanwhile, so that its lease holds.
  int early = 0;
  while (udp_sent(a) == a_before) early += b.host->poll_cq(b.recv_cq, wc);
  REQUIRE(early == 0);
  post_sends(a, p.qa, id, 1);
  const std::uint64_t before = udp_sent(b);
  while (b.host->poll_cq(b.recv_cq, wc) == 0) {
  }
  const int reaped = b.host->poll_cq(b.send_cq, wc);
  const bool unchanged = udp_sent(b) == before;
  post_sends(b, p.qb, 2 * id + 1, 1);
  REQUIRE(b.host->poll_cq(b.recv_cq, wc) == 0);  // sends what waits
  a.wait(a.recv_cq, 2, true);
  a.wait(a.send_cq, 1);
  b.wait(b.send_cq, reaped == 1 ? 1 : 2);
  return reaped == 1 && unchanged && udp_sent(b) == before + 2;
}

// Timed in microseconds on one thread driving two hosts: under the sanitizers a round outlasts
// the hold, so this runs in the release build (label uninstrumented).
TEST_CASE("a receive's ACK waits past a poll that reaps another completion until the next post",
          "[host][uninstrumented]") {
  constexpr int kRounds = 50;
  Node a("127.83.113.1"), b("127.83.113.2");
  RcPair p(a, b);
  post_receives(a, p.qa, 2 * kRounds);
  post_receives(b, p.qb, kRounds);
  for (int round = 0; round < kRounds; ++round)
    if (ack_waits_past_reaping_poll(a, b, p, static_cast<std::uint64_t>(round))) return;
  FAIL("in " << kRounds << " rounds, the poll that reaped the request's completion sent the answer's ACK");
}

// One round of ib_write_lat's order on b, which captures: a's WRITE comes in while b busy-polls
// its send CQ, and b's polls receive it (past polls that find packets but no completion); b then
// posts a WRITE of its own, as ib_write_lat does on seeing the peer's in its buffer. Whether b
// had sent nothing by the post (the ACK waited for it), and two packets in all after it.
bool write_ack_waits_for_post(Node& a, Node& b, const RcPair& p, std::uint64_t id) {
  std::vector<core::Wc> none(1);
  busy_poll(b);
  const std::uint64_t sent_before = udp_sent(b);
  const std::uint64_t received_before = b.host->stats().udp.rx_packets;
  a.post_send(p.qa,
              remote_wr(WrOpcode::rdma_write, id, {a.sge(id * kMessage, kMessage)}, b.addr(id * kMessage), b.mr.rkey));
  while (b.host->stats().udp.rx_packets == received_before) REQUIRE(b.host->poll_cq(b.send_cq, none) == 0);
  const bool waited = udp_sent(b) == sent_before;
  const int err = b.host->post([&](core::Device& d, core::Time now) {
    return d.post_send(
        now, p.qb,
        remote_wr(WrOpcode::rdma_write, id, {b.sge(id * kMessage, kMessage)}, a.addr(id * kMessage), a.mr.rkey));
  });
  REQUIRE(err == 0);
  const int reaped = b.host->poll_cq(b.send_cq, none);  // sends what waits for a poll
  REQUIRE(reaped >= 0);
  a.wait(a.send_cq, 1);
  if (reaped == 0) b.wait(b.send_cq, 1);
  return waited && udp_sent(b) == sent_before + 2;
}

// Timed in microseconds, as the test above.
TEST_CASE("a WRITE's ACK waits for the responder's next post and leaves behind its request", "[host][uninstrumented]") {
  constexpr int kRounds = 50;
  const std::string path = temp_capture_path("write-ack");
  host::HostConfig config = config_at("127.83.114.2");
  config.capture_path = path;
  Node a("127.83.114.1"), b(config);
  RcPair p(a, b);
  fill_pattern(a.buffer, 0, kRounds * kMessage, 114);
  fill_pattern(b.buffer, 0, kRounds * kMessage, 115);
  int round = 0;
  while (round < kRounds && !write_ack_waits_for_post(a, b, p, static_cast<std::uint64_t>(round))) ++round;
  b.host->stop();
  REQUIRE(round < kRounds);
  // b's last two frames out: its WRITE, then the ACK that waited for it, so that a has the
  // WRITE in its socket by the time the ACK completes its own.
  const std::array<std::uint8_t, 4> b_ip{127, 83, 114, 2};
  std::vector<int> opcodes;
  for (const std::vector<std::uint8_t>& frame : read_capture(path).data)
    if (std::equal(b_ip.begin(), b_ip.end(), frame.begin() + kIpv4Source)) opcodes.push_back(frame.at(kBthOpcode));
  REQUIRE(opcodes.size() >= 2);
  CHECK(opcodes[opcodes.size() - 2] == kRcWriteOnly);
  CHECK(opcodes.back() == kRcAcknowledge);
  const std::size_t at = static_cast<std::size_t>(round) * kMessage;
  CHECK(std::memcmp(a.buffer.data() + at, b.buffer.data() + at, kMessage) == 0);  // b's last WRITE landed
}

// perftest's bandwidth loop without its polls: one post() per SEND, back to back. Timed in
// microseconds (a post must follow the last within the host's burst gap), so uninstrumented.
TEST_CASE("SENDs posted back to back leave together, the last ones without a poll", "[host][uninstrumented]") {
  constexpr int kBurst = 32;
  Batching t("127.83.115", kBurst, 115);
  for (int round = 0; round < Batching::kRounds; ++round) {
    const host::HostStats before = t.a.host->stats();
    const auto first = static_cast<std::uint64_t>(round * kBurst);
    for (int i = 0; i < kBurst; ++i) post_sends(t.a, t.p.qa, first + static_cast<std::uint64_t>(i), 1);
    const bool waited = udp_sent(t.a) - before.udp.tx_packets < kBurst;
    // Nothing polls: what waits leaves when the burst's hold runs out.
    REQUIRE(eventually([&] { return udp_sent(t.a) - before.udp.tx_packets == kBurst; }, 50ms));
    const host::HostStats after = t.a.host->stats();
    t.a.wait(t.a.send_cq, kBurst);
    if (waited && after.udp.tx_gso_datagrams > before.udp.tx_gso_datagrams) {
      expect_received(t.a, t.b, first + kBurst, 0);
      return;
    }
  }
  FAIL("in " << Batching::kRounds << " rounds, no burst of posts left in a GSO datagram");
}

TEST_CASE("without busy-polling, a posted SEND has left when the post returns", "[host][batching]") {
  Node a("127.83.82.1"), b("127.83.82.2");
  RcPair p(a, b);
  fill_pattern(a.buffer, 0, kMessage, 82);
  post_receives(b, p.qb, 1);
  const std::uint64_t before = udp_sent(a);
  post_sends(a, p.qa, 0, 1);
  CHECK(udp_sent(a) == before + 1);
  expect_received(a, b, 1, 0);
}

// softrdmad's posts come through WorkSource::pull() on the progress thread. This source posts
// `wrs` once and notes the sender's counters just before. It posts on its third pull: the first
// (after the doorbell) reports work, the second none, and so the third comes while the thread
// spins on a socket it has just found empty, when only the posts themselves can make it step.
class PostsOnce final : public host::WorkSource {
 public:
  PostsOnce(Node& n, std::uint32_t qpn, std::vector<core::SendWr> wrs) : n_(n), qpn_(qpn), wrs_(std::move(wrs)) {
    n_.host->set_work_source(this);
    // The progress thread may be asleep: ring the doorbell, as a daemon client's first post does.
    const std::uint64_t one = 1;
    REQUIRE(::write(n_.host->doorbell_fd(), &one, sizeof one) == sizeof one);
  }
  ~PostsOnce() override { n_.host->set_work_source(nullptr); }

  bool pull() override {
    if (posted_.load()) return false;
    if (++pulls_ == 1) return true;
    if (pulls_ == 2) return false;
    before_ = n_.host->stats();
    // One post per WR, as the daemon makes one per ring record.
    for (const core::SendWr& wr : wrs_) {
      err_ = n_.host->post([&](core::Device& d, core::Time now) { return d.post_send(now, qpn_, wr); });
      if (err_ != 0) break;
    }
    posted_.store(true);
    return true;
  }
  bool going_to_sleep() override { return !posted_.load(); }
  void woke() override {}

  // The counters before the posts and the post's result, once the pull has happened.
  std::optional<std::pair<host::HostStats, int>> result() const {
    if (!posted_.load()) return std::nullopt;
    return std::pair(before_, err_);
  }

 private:
  Node& n_;
  const std::uint32_t qpn_;
  const std::vector<core::SendWr> wrs_;
  int pulls_ = 0;  // the progress thread's alone
  std::atomic<bool> posted_{false};
  host::HostStats before_;
  int err_ = 0;
};

TEST_CASE("posts made inside a work source's pull leave together when the pull ends", "[host][batching]") {
  constexpr int kCount = 32;
  Node a("127.83.83.1"), b("127.83.83.2");
  RcPair p(a, b);
  fill_pattern(a.buffer, 0, kCount * kMessage, 83);
  post_receives(b, p.qb, kCount);
  std::vector<core::SendWr> wrs;
  for (int i = 0; i < kCount; ++i)
    wrs.push_back(make_wr(WrOpcode::send, static_cast<std::uint64_t>(i), {a.sge(i * kMessage, kMessage)}));
  PostsOnce source(a, p.qa, std::move(wrs));
  REQUIRE(eventually([&] { return source.result().has_value(); }));
  const auto [before, err] = *source.result();
  REQUIRE(err == 0);
  expect_received(a, b, kCount, 0);
  const host::HostStats after = a.host->stats();
  CHECK(after.udp.tx_packets - before.udp.tx_packets == kCount);
  // Sent one by one, each post would have been a datagram of its own, none of them GSO.
  CHECK(after.udp.tx_gso_datagrams - before.udp.tx_gso_datagrams >= 1);
  CHECK(after.udp.tx_gso_datagrams - before.udp.tx_gso_datagrams <= kCount / 2);
}

// A daemon's host: a work source that never has work, so that the progress thread runs as
// softrdmad's does between its clients' posts.
class NoWork final : public host::WorkSource {
 public:
  explicit NoWork(Node& n) : n_(n) { n_.host->set_work_source(this); }
  ~NoWork() override { n_.host->set_work_source(nullptr); }
  bool pull() override { return false; }
  bool going_to_sleep() override { return false; }
  void woke() override {}

 private:
  Node& n_;
};

// The rule that keeps a WRITE's ACK for the application's next post reads the application's
// polls, which a daemon's clients make on their CQ rings: on a daemon's host the ACK leaves in
// the step that received the WRITE, even right after a post (which alone would make an
// embedded host's progress thread hold it).
TEST_CASE("on a daemon's host the progress thread's ACK leaves with the step that received the WRITE",
          "[host][batching]") {
  constexpr int kRounds = 20;
  Node a("127.83.85.1"), b("127.83.85.2");
  RcPair p(a, b);
  NoWork daemon(b);
  fill_pattern(a.buffer, 0, kRounds * kMessage, 85);
  for (int round = 0; round < kRounds; ++round) {
    const auto id = static_cast<std::uint64_t>(round);
    b.post_recv(p.qb, 100 + id, 0, kMessage);  // a verbs call on b just before the WRITE comes
    const host::HostStats before = b.host->stats();
    a.post_send(
        p.qa, remote_wr(WrOpcode::rdma_write, id, {a.sge(id * kMessage, kMessage)}, b.addr(id * kMessage), b.mr.rkey));
    host::HostStats now = b.host->stats();
    while (now.udp.rx_packets == before.udp.rx_packets) now = b.host->stats();
    // One snapshot under the host's lock: the step that received the WRITE has sent its ACK.
    CHECK(now.udp.tx_packets == before.udp.tx_packets + 1);
    CHECK(a.wait(a.send_cq, 1).front().status == WcStatus::success);
  }
  CHECK(std::memcmp(a.buffer.data(), b.buffer.data(), kRounds * kMessage) == 0);
}

TEST_CASE("a pull that posts more than one step sends still gets it all sent with nothing else to wake the host",
          "[host][batching]") {
  // Both QPs on one device: the packets loop back and never make its socket readable, and no
  // retransmission timer runs (timeout 0 is infinite, IBTA vol. 1 s11.2.4.2), as on a UC QP:
  // the progress thread has no other reason to step.
  constexpr int kWrites = 8;
  constexpr std::uint32_t kSize = 64 * 1024;  // 64 packets each at MTU 1024: 512 in all
  Node a("127.83.84.1");
  RcOptions no_timer;
  no_timer.timeout = 0;
  RcPair p(a, a, no_timer);
  fill_pattern(a.buffer, 0, kWrites * kSize, 84);
  std::vector<core::SendWr> wrs;
  for (int i = 0; i < kWrites; ++i) {
    const std::size_t at = static_cast<std::size_t>(i) * kSize;
    wrs.push_back(remote_wr(WrOpcode::rdma_write, static_cast<std::uint64_t>(i), {a.sge(at, kSize)},
                            a.addr(kWrites * kSize + at), a.mr.rkey));
  }
  PostsOnce source(a, p.qa, std::move(wrs));
  REQUIRE(eventually([&] { return source.result().has_value(); }));
  REQUIRE(source.result()->second == 0);
  for (const core::Wc& wc : a.wait(a.send_cq, kWrites)) CHECK(wc.status == WcStatus::success);
  CHECK(std::memcmp(a.buffer.data(), a.buffer.data() + kWrites * kSize, kWrites * kSize) == 0);
}

}  // namespace
}  // namespace test
