// The fault stage in the embedded host: seeded loss, duplication, reordering and corruption
// between two hosts on loopback. RC must deliver every byte anyway, and the receiving
// engine's ICRC counter must see exactly the corruptions injected towards it.
#include <cstring>

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

TEST_CASE("under 5% loss, duplication, reordering and 1% corruption RC WRITEs arrive byte-exact", "[host][faults]") {
  // Corruption on receive only: a packet corrupted on one side's tx could still be lost on
  // the other's rx, and the count below is exact.
  Node a(faulty("127.83.40.1", "loss=5%,dup=5%,reorder=5%:depth=4,rx.corrupt=1%,seed=11"));
  Node b(faulty("127.83.40.2", "loss=5%,dup=5%,reorder=5%:depth=4,rx.corrupt=1%,seed=12"));
  RcOptions o;
  o.timeout = 8;  // 1 ms: losses are retransmitted quickly
  RcPair p(a, b, o);
  constexpr int kWrites = 64;
  constexpr std::uint32_t kLength = 16 * 1024;
  fill_pattern(a.buffer, 0, kWrites * kLength, 5);
  for (int i = 0; i < kWrites; ++i) {
    const std::size_t off = static_cast<std::size_t>(i) * kLength;
    a.post_send(p.qa, remote_wr(WrOpcode::rdma_write, static_cast<std::uint64_t>(i), {a.sge(off, kLength)},
                                b.addr(off), b.mr.rkey));
  }
  const std::vector<core::Wc> wcs = a.wait(a.send_cq, kWrites);
  for (int i = 0; i < kWrites; ++i) {
    CHECK(wcs[static_cast<std::size_t>(i)].status == WcStatus::success);
    CHECK(wcs[static_cast<std::size_t>(i)].wr_id == static_cast<std::uint64_t>(i));
  }
  CHECK(std::memcmp(a.buffer.data(), b.buffer.data(), kWrites * kLength) == 0);

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

}  // namespace
}  // namespace test
