// RC operations between two embedded hosts through real kernel UDP sockets on loopback:
// every byte checked, and the ICRC of every packet verified by the receiving engine.
#include <cstring>

#include "tests/host/host_fixture.hpp"

namespace test {
namespace {

using core::WcOpcode;
using core::WcStatus;
using core::WrOpcode;

void expect_clean_wire(host::EmbeddedHost& h) {
  const host::HostStats s = h.stats();
  CHECK(s.device.icrc_err == 0);  // the kernel sent the IPv4 header the ICRC was computed for
  CHECK(s.device.malformed == 0);
  CHECK(s.udp.tx_errors == 0);
  CHECK(s.udp.rx_truncated == 0);
}

TEST_CASE("SEND, RDMA WRITE, READ and both atomics between two hosts, byte-exact", "[host]") {
  Node a("127.83.1.1"), b("127.83.1.2");
  RcPair p(a, b);
  CHECK(a.host->address() == "127.83.1.1");
  CHECK(b.host->gid() == core::Gid{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF, 127, 83, 1, 2});

  SECTION("SEND / RECV with immediate data") {
    fill_pattern(a.buffer, 0, 3000, 1);
    b.post_recv(p.qb, 7, 0, 4096);
    core::SendWr w = make_wr(WrOpcode::send_with_imm, 1, {a.sge(0, 3000)});
    w.imm_data = 0xA1B2C3D4;
    a.post_send(p.qa, w);
    const core::Wc rwc = b.wait(b.recv_cq, 1).at(0);
    CHECK(rwc.status == WcStatus::success);
    CHECK(rwc.wr_id == 7);
    CHECK(rwc.opcode == WcOpcode::recv);
    CHECK(rwc.byte_len == 3000);
    CHECK(rwc.imm_data == 0xA1B2C3D4);
    CHECK(rwc.qp_num == p.qb);
    CHECK(a.wait(a.send_cq, 1).at(0).status == WcStatus::success);
    CHECK(std::memcmp(a.buffer.data(), b.buffer.data(), 3000) == 0);
  }
  SECTION("RDMA WRITE") {
    fill_pattern(a.buffer, 100, 5000, 2);
    a.post_send(p.qa, remote_wr(WrOpcode::rdma_write, 2, {a.sge(100, 5000)}, b.addr(8192), b.mr.rkey));
    const core::Wc wc = a.wait(a.send_cq, 1).at(0);
    CHECK(wc.status == WcStatus::success);
    CHECK(wc.opcode == WcOpcode::rdma_write);
    CHECK(std::memcmp(a.buffer.data() + 100, b.buffer.data() + 8192, 5000) == 0);
    CHECK(b.buffer[8191] == 0);
    CHECK(b.buffer[8192 + 5000] == 0);
  }
  SECTION("RDMA READ") {
    fill_pattern(b.buffer, 40000, 7777, 3);
    a.post_send(p.qa, remote_wr(WrOpcode::rdma_read, 3, {a.sge(0, 7777)}, b.addr(40000), b.mr.rkey));
    const core::Wc wc = a.wait(a.send_cq, 1).at(0);
    CHECK(wc.status == WcStatus::success);
    CHECK(wc.opcode == WcOpcode::rdma_read);
    CHECK(wc.byte_len == 7777);
    CHECK(std::memcmp(a.buffer.data(), b.buffer.data() + 40000, 7777) == 0);
  }
  SECTION("compare-and-swap and fetch-and-add") {
    std::uint64_t word = 0x1122334455667788;
    std::memcpy(b.buffer.data() + 64, &word, 8);
    core::SendWr cas = remote_wr(WrOpcode::atomic_cmp_and_swp, 4, {a.sge(0, 8)}, b.addr(64), b.mr.rkey);
    cas.compare_add = 0x1122334455667788;
    cas.swap = 0xCAFEF00DDEADBEEF;
    a.post_send(p.qa, cas);
    CHECK(a.wait(a.send_cq, 1).at(0).status == WcStatus::success);
    std::uint64_t original = 0, now = 0;
    std::memcpy(&original, a.buffer.data(), 8);
    std::memcpy(&now, b.buffer.data() + 64, 8);
    CHECK(original == 0x1122334455667788);
    CHECK(now == 0xCAFEF00DDEADBEEF);

    core::SendWr missed = cas;  // the compare no longer matches: nothing is swapped
    missed.wr_id = 5;
    missed.swap = 1;
    a.post_send(p.qa, missed);
    CHECK(a.wait(a.send_cq, 1).at(0).status == WcStatus::success);
    std::memcpy(&original, a.buffer.data(), 8);
    std::memcpy(&now, b.buffer.data() + 64, 8);
    CHECK(original == 0xCAFEF00DDEADBEEF);
    CHECK(now == 0xCAFEF00DDEADBEEF);

    core::SendWr add = remote_wr(WrOpcode::atomic_fetch_and_add, 6, {a.sge(8, 8)}, b.addr(64), b.mr.rkey);
    add.compare_add = 0x10;
    a.post_send(p.qa, add);
    const core::Wc wc = a.wait(a.send_cq, 1).at(0);
    CHECK(wc.status == WcStatus::success);
    CHECK(wc.opcode == WcOpcode::fetch_add);
    std::memcpy(&original, a.buffer.data() + 8, 8);
    std::memcpy(&now, b.buffer.data() + 64, 8);
    CHECK(original == 0xCAFEF00DDEADBEEF);
    CHECK(now == 0xCAFEF00DDEADBEEF + 0x10);
  }
  expect_clean_wire(*a.host);
  expect_clean_wire(*b.host);
}

TEST_CASE("a 1 MiB RDMA WRITE arrives byte-exact", "[host]") {
  const auto mtu = GENERATE(core::Mtu::mtu1024, core::Mtu::mtu4096);
  Node a("127.83.2.1"), b("127.83.2.2");
  RcOptions o;
  o.mtu = mtu;
  RcPair p(a, b, o);
  constexpr std::size_t kSize = 1 << 20;
  fill_pattern(a.buffer, 0, kSize, 4);
  const auto start = std::chrono::steady_clock::now();
  a.post_send(p.qa, remote_wr(WrOpcode::rdma_write, 1, {a.sge(0, kSize)}, b.addr(4096), b.mr.rkey));
  CHECK(a.wait(a.send_cq, 1).at(0).status == WcStatus::success);
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  WARN("1 MiB WRITE at MTU " << core::mtu_bytes(mtu) << ": " << ms << " ms (" << (kSize / 1e3 / ms) << " MB/s), "
                             << qp_counters(a, p.qa).retransmitted_pkts << " retransmitted, "
                             << b.host->stats().udp.rx_kernel_drops << " dropped by the kernel");
  CHECK(std::memcmp(a.buffer.data(), b.buffer.data() + 4096, kSize) == 0);
  expect_clean_wire(*a.host);
  expect_clean_wire(*b.host);
}

TEST_CASE("a SEND waits out RNR NAKs until a receive is posted", "[host][rnr]") {
  Node a("127.83.3.1"), b("127.83.3.2");
  RcPair p(a, b);  // rnr_retry 7 (infinite), B's min_rnr_timer 0.64 ms
  fill_pattern(a.buffer, 0, 200, 5);
  a.post_send(p.qa, make_wr(WrOpcode::send, 1, {a.sge(0, 200)}));
  REQUIRE(eventually([&] { return qp_counters(b, p.qb).send_rnr_err >= 3; }));
  std::vector<core::Wc> none(1);
  CHECK(a.host->poll_cq(a.send_cq, none) == 0);
  b.post_recv(p.qb, 9, 1000, 256);
  CHECK(b.wait(b.recv_cq, 1).at(0).byte_len == 200);
  CHECK(a.wait(a.send_cq, 1).at(0).status == WcStatus::success);
  CHECK(std::memcmp(a.buffer.data(), b.buffer.data() + 1000, 200) == 0);
  CHECK(qp_counters(a, p.qa).rcvd_rnr_err >= 3);
}

TEST_CASE("with rnr_retry 0 a SEND to a QP without receives fails with RNR_RETRY_EXC_ERR", "[host][rnr]") {
  Node a("127.83.4.1"), b("127.83.4.2");
  RcOptions o;
  o.rnr_retry = 0;
  RcPair p(a, b, o);
  a.post_send(p.qa, make_wr(WrOpcode::send, 1, {a.sge(0, 64)}));
  const core::Wc wc = a.wait(a.send_cq, 1).at(0);
  CHECK(wc.status == WcStatus::rnr_retry_exc_err);
  CHECK(qp_counters(a, p.qa).rnr_retry_exceeded_err == 1);
}

TEST_CASE("a request to a peer that is gone times out and retries until RETRY_EXC_ERR", "[host][timers]") {
  // The retransmission timer fires on the progress thread while the application polls: with
  // pauses (the thread watches the socket and sleeps until the deadline), or busy-polling
  // (the thread leaves the socket to the application and still wakes for the deadline).
  const bool busy = GENERATE(false, true);
  Node a("127.83.6.1");
  auto b = std::make_unique<Node>("127.83.6.2");
  RcOptions o;
  o.timeout = 10;  // 4.2 ms
  o.retry_cnt = 2;
  RcPair p(a, *b, o);
  b.reset();  // nothing listens on 127.83.6.2:4791 any more
  const auto start = std::chrono::steady_clock::now();
  a.post_send(p.qa, make_wr(WrOpcode::send, 1, {a.sge(0, 64)}));
  const core::Wc wc = a.wait(a.send_cq, 1, busy).at(0);
  const auto waited = std::chrono::steady_clock::now() - start;
  CHECK(wc.status == WcStatus::retry_exc_err);
  CHECK(qp_counters(a, p.qa).retransmitted_pkts == 2);
  CHECK(waited >= 3 * 4ms);  // the first send and two retries, each waited out
  CHECK(waited < 1s);
}

TEST_CASE("two QPs of one host talk through its own socket", "[host]") {
  Node a("127.83.5.1");
  RcPair p(a, a);
  fill_pattern(a.buffer, 0, 2000, 6);
  a.post_recv(p.qb, 1, 10000, 4096);
  a.post_send(p.qa, make_wr(WrOpcode::send, 2, {a.sge(0, 2000)}));
  CHECK(a.wait(a.recv_cq, 1).at(0).byte_len == 2000);
  CHECK(std::memcmp(a.buffer.data(), a.buffer.data() + 10000, 2000) == 0);
  expect_clean_wire(*a.host);
}

}  // namespace
}  // namespace test
