// EmbeddedHost::post (the shim's ibv_post_send): while the application busy-polls a CQ, posted
// packets wait for its next poll_cq and leave together; otherwise, and when it stops polling,
// they leave without it. Counted at the sender's UDP socket, received byte-exact at the peer.
#include <cstring>

#include "tests/host/host_fixture.hpp"

namespace test {
namespace {

using core::WcStatus;
using core::WrOpcode;

constexpr std::uint32_t kMessage = 64;  // perftest's message-rate size: every packet the same length

std::uint64_t udp_sent(Node& n) { return n.host->stats().udp.tx_packets; }

// Empty polls in quick succession, as perftest's loop makes while its send window is full.
void busy_poll(Node& n, int polls = 64) {
  std::vector<core::Wc> none(16);
  for (int i = 0; i < polls; ++i) REQUIRE(n.host->poll_cq(n.send_cq, none) == 0);
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
  for (int i = 0; i < count; ++i) n.post_recv(qpn, static_cast<std::uint64_t>(i), static_cast<std::size_t>(i) * kMessage, kMessage);
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

TEST_CASE("while the application busy-polls, posted SENDs wait for its next poll and leave in one batch", "[host][batching]") {
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
  // No poll_cq from here on: the progress thread sends them when the lease (200 us) runs out.
  CHECK(eventually([&] { return udp_sent(t.a) >= posted; }, 50ms));
  expect_received(t.a, t.b, posted, 0);
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

}  // namespace
}  // namespace test
