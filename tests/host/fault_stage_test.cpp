// The fault stage in the embedded host: seeded loss, duplication, reordering and corruption
// between two hosts on loopback. RC must deliver every byte anyway, and the receiving
// engine's ICRC counter must see exactly the corruptions injected towards it.
#include <cstring>
#include <thread>

#include "tests/host/host_fixture.hpp"

namespace test {
namespace {

using core::WcStatus;
using core::WrOpcode;

host::HostConfig faulty(const std::string& ip, const char* spec) {
  host::HostConfig c = config_at(ip);
  const auto parsed = softrdma::net::parse_faults(spec);
  INFO(parsed.error);
  REQUIRE(parsed.plan);
  c.faults = parsed.plan;
  return c;
}

constexpr std::uint32_t kWriteLength = 16 * 1024;

// `writes` RDMA WRITEs of kWriteLength from `from`'s buffer start, over its QP `qp`, to `to`'s
// buffer at `to_offset`: every one completes in order, and the bytes arrive exact.
void write_through(Node& from, std::uint32_t qp, Node& to, std::size_t to_offset, int writes, std::uint8_t seed) {
  const std::size_t total = static_cast<std::size_t>(writes) * kWriteLength;
  fill_pattern(from.buffer, 0, total, seed);
  for (int i = 0; i < writes; ++i) {
    const std::size_t off = static_cast<std::size_t>(i) * kWriteLength;
    from.post_send(qp, remote_wr(WrOpcode::rdma_write, static_cast<std::uint64_t>(i), {from.sge(off, kWriteLength)},
                                 to.addr(to_offset + off), to.mr.rkey));
  }
  const std::vector<core::Wc> wcs = from.wait(from.send_cq, static_cast<std::size_t>(writes));
  for (int i = 0; i < writes; ++i) {
    CHECK(wcs[static_cast<std::size_t>(i)].status == WcStatus::success);
    CHECK(wcs[static_cast<std::size_t>(i)].wr_id == static_cast<std::uint64_t>(i));
  }
  CHECK(std::memcmp(from.buffer.data(), to.buffer.data() + to_offset, total) == 0);
}

TEST_CASE("under 5% loss, duplication, reordering and 1% corruption RC WRITEs arrive byte-exact", "[host][faults]") {
  // Corruption on receive only: a packet corrupted on one side's tx could still be lost on
  // the other's rx, and the count below is exact.
  Node a(faulty("127.83.40.1", "loss=5%,dup=5%,reorder=5%:depth=4,rx.corrupt=1%,seed=11"));
  Node b(faulty("127.83.40.2", "loss=5%,dup=5%,reorder=5%:depth=4,rx.corrupt=1%,seed=12"));
  RcOptions o;
  // 16 ms: losses are retransmitted quickly, yet the timer outlasts both the fault line's 1 ms
  // hold of a reordered ACK and the backlog of a go-back-N resend of ~1000 packets that GSO
  // puts into the peer's socket at once. At 1 ms, on a loaded machine, timeouts fired while
  // the expected packet still sat in that backlog, seven in a row (18 of 40 runs; none with
  // --no-gso, which paces the sender by its per-packet syscalls); at 4 ms it still happened
  // once in CI's ASan run under ctest -j2.
  o.timeout = 12;
  RcPair p(a, b, o);
  write_through(a, p.qa, b, 0, 64, 5);

  for (Node* n : {&a, &b}) {
    const host::HostStats s = n->host->stats();
    CHECK(s.faults.rx.lost + s.faults.tx.lost > 0);
    // Corruption flips a bit after the BTH, so the packet parses and only its ICRC can tell.
    CHECK(s.device.icrc_err == s.faults.rx.corrupted);
    CHECK(s.device.malformed == 0);
  }
  CHECK(b.host->stats().faults.rx.corrupted > 0);  // b receives the 1024 data packets
  const core::QpCounters qa = qp_counters(a, p.qa);
  CHECK(qa.retransmitted_pkts > 0);
}

TEST_CASE("packets a device loops back to itself meet the fault stage too, and corruption is caught by the ICRC",
          "[host][faults]") {
  // Two QPs of one device: no wire, but faults apply as sent and as received, and the engine
  // checks the ICRC of looped-back packets whenever a fault stage could have changed them.
  Node a(faulty("127.83.45.1", "loss=2%,rx.corrupt=2%,seed=21"));
  RcOptions o;
  o.timeout = 12;
  RcPair p(a, a, o);
  write_through(a, p.qa, a, 16 * kWriteLength, 16, 6);
  const host::HostStats s = a.host->stats();
  CHECK(s.udp.tx_packets == 0);
  CHECK(s.udp.loopback_packets > 0);
  CHECK(s.faults.rx.corrupted > 0);
  CHECK(s.device.icrc_err == s.faults.rx.corrupted);
  CHECK(s.faults.tx.lost + s.faults.rx.lost > 0);
}

TEST_CASE("the same seed drops the same packets: two runs of one exchange lose alike", "[host][faults]") {
  std::uint64_t lost[2] = {0, 0};
  for (int run = 0; run < 2; ++run) {
    Node a(faulty("127.83.41." + std::to_string(run * 2 + 1), "tx.loss=20%,seed=3"));
    Node b("127.83.41." + std::to_string(run * 2 + 2));
    RcOptions o;
    o.timeout = 12;  // 16 ms: no timer fires early, even on a loaded machine
    RcPair p(a, b, o);
    // One packet at a time: the order of packets through the stage is the same in both runs.
    for (int i = 0; i < 20; ++i) {
      a.post_send(p.qa, remote_wr(WrOpcode::rdma_write, 1, {a.sge(0, 64)}, b.addr(0), b.mr.rkey));
      CHECK(a.wait(a.send_cq, 1).at(0).status == WcStatus::success);
    }
    lost[run] = a.host->stats().faults.tx.lost;
  }
  CHECK(lost[0] > 0);
  CHECK(lost[0] == lost[1]);
}

TEST_CASE("link down past retry_cnt: the WR completes with RETRY_EXC_ERR and the rest are flushed", "[host][faults]") {
  // The link goes down 500 ms after a's device starts, for good; timeout 14 (67 ms) x 3
  // retries: long enough that both WRITEs are sent before the first resend, even under ASan
  // (with 4.2 ms the second one's first try sometimes came with the first resend: 7 packets).
  Node a(faulty("127.83.42.1", "linkdown=500ms"));
  Node b("127.83.42.2");
  RcOptions o;
  o.timeout = 14;
  o.retry_cnt = 3;
  RcPair p(a, b, o);
  a.post_send(p.qa, remote_wr(WrOpcode::rdma_write, 1, {a.sge(0, 64)}, b.addr(0), b.mr.rkey));
  CHECK(a.wait(a.send_cq, 1).at(0).status == WcStatus::success);  // before the link goes down
  std::this_thread::sleep_for(550ms);
  a.post_send(p.qa, remote_wr(WrOpcode::rdma_write, 2, {a.sge(0, 64)}, b.addr(0), b.mr.rkey));
  a.post_send(p.qa, remote_wr(WrOpcode::rdma_write, 3, {a.sge(0, 64)}, b.addr(0), b.mr.rkey));
  const std::vector<core::Wc> wcs = a.wait(a.send_cq, 2);
  CHECK(wcs[0].wr_id == 2);
  CHECK(wcs[0].status == WcStatus::retry_exc_err);
  CHECK(wcs[1].wr_id == 3);
  CHECK(wcs[1].status == WcStatus::wr_flush_err);
  const host::HostStats s = a.host->stats();
  CHECK(s.faults.tx.link_down == 8);  // both WRITEs, the first try and 3 retries (go-back-N)
  CHECK(s.device.qps.retry_exceeded_err == 1);
}

TEST_CASE("a link that comes back within retry_cnt loses nothing, forced RNRs are retried", "[host][faults]") {
  Node a(faulty("127.83.43.1", "linkdown=0s:for=30ms"));
  Node b(faulty("127.83.43.2", "rnr=2"));
  RcOptions o;
  o.timeout = 12;  // 16.8 ms x 7 retries outlasts the 30 ms outage
  o.min_rnr_timer = 1;
  RcPair p(a, b, o);
  b.post_recv(p.qb, 7, 0, 256);
  fill_pattern(a.buffer, 0, 128, 3);
  a.post_send(p.qa, make_wr(WrOpcode::send, 5, {a.sge(0, 128)}));
  const core::Wc sent = a.wait(a.send_cq, 1).at(0);
  CHECK(sent.status == WcStatus::success);
  const core::Wc got = b.wait(b.recv_cq, 1).at(0);
  CHECK(got.status == WcStatus::success);
  CHECK(got.byte_len == 128);
  CHECK(std::memcmp(a.buffer.data(), b.buffer.data(), 128) == 0);
  CHECK(b.host->stats().device.qps.send_rnr_err == 2);
  CHECK(a.host->stats().device.qps.rcvd_rnr_err == 2);
}

TEST_CASE("drop=N with an opcode filter loses exactly that packet: one ACK, and RC recovers", "[host][faults]") {
  Node a("127.83.44.1");
  Node b(faulty("127.83.44.2", "tx.opcode=ack,tx.drop=2"));
  RcOptions o;
  o.timeout = 8;
  RcPair p(a, b, o);
  for (std::uint64_t i = 0; i < 4; ++i) {
    a.post_send(p.qa, remote_wr(WrOpcode::rdma_write, i, {a.sge(0, 64)}, b.addr(0), b.mr.rkey));
    CHECK(a.wait(a.send_cq, 1).at(0).status == WcStatus::success);
  }
  const host::HostStats s = b.host->stats();
  CHECK(s.faults.tx.dropped_nth == 1);
  CHECK(s.faults.tx.lost == 0);
  CHECK(qp_counters(a, p.qa).retransmitted_pkts >= 1);  // the WRITE whose ACK was lost
}

}  // namespace
}  // namespace test
