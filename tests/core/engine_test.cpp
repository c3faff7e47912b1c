// The engine end to end over a perfect simulated link: every opcode moves the right bytes
// and produces the right completions.
#include <catch2/catch.hpp>
#include <cerrno>
#include <cstring>
#include <numeric>

#include "tests/core/engine_fixture.hpp"

using namespace test;
using core::WcOpcode;
using core::WcStatus;
using core::WrOpcode;

namespace {

void fill(Side& s, std::size_t offset, std::size_t n, std::uint8_t seed) {
  for (std::size_t i = 0; i < n; ++i) s.buffer[offset + i] = static_cast<std::uint8_t>(seed + i * 7);
}

core::SendWr wr(WrOpcode op, std::uint64_t id, std::vector<core::Sge> sges) {
  core::SendWr w;
  w.wr_id = id;
  w.opcode = op;
  w.flags = core::send_flags::signaled;
  w.sg_list = std::move(sges);
  return w;
}

void post_recv(Side& s, std::uint64_t id, std::size_t offset, std::uint32_t len) {
  core::RecvWr r;
  r.wr_id = id;
  r.sg_list = {s.sge(offset, len)};
  REQUIRE(s.dev->post_recv(s.qpn, r) == 0);
}

std::vector<core::Wc> wait(Pair& p, Side& s, std::uint32_t cq, std::size_t n) {
  std::vector<core::Wc> got;
  REQUIRE(p.net.run_until([&] {
    for (const auto& wc : s.poll(cq)) got.push_back(wc);
    return got.size() >= n;
  }));
  return got;
}

}  // namespace

TEST_CASE("RC SEND of several packets lands byte-exact and completes both sides", "[core][engine]") {
  Pair p;
  fill(p.a, 0, 5000, 3);
  post_recv(p.b, 77, 100, 8192);
  REQUIRE(p.a.dev->post_send(p.net.now, p.a.qpn, wr(WrOpcode::send, 1, {p.a.sge(0, 5000)})) == 0);

  const auto rwc = wait(p, p.b, p.b.recv_cq, 1);
  CHECK(rwc[0].status == WcStatus::success);
  CHECK(rwc[0].opcode == WcOpcode::recv);
  CHECK(rwc[0].byte_len == 5000);
  CHECK(rwc[0].wr_id == 77);
  CHECK(std::memcmp(p.a.buffer.data(), p.b.buffer.data() + 100, 5000) == 0);
  const auto swc = wait(p, p.a, p.a.send_cq, 1);
  CHECK(swc[0].status == WcStatus::success);
  CHECK(swc[0].opcode == WcOpcode::send);
  CHECK(swc[0].wr_id == 1);
  CHECK(p.a.dev->qp(p.a.qpn)->counters.sent_pkts == 5);  // 5000 bytes at MTU 1024
}

TEST_CASE("a completion carries the engine's time when it was made", "[core][engine]") {
  Pair p;
  const core::Time posted = p.net.now;
  post_recv(p.b, 1, 0, 64);
  REQUIRE(p.a.dev->post_send(p.net.now, p.a.qpn, wr(WrOpcode::send, 2, {p.a.sge(0, 64)})) == 0);
  const core::Wc received = wait(p, p.b, p.b.recv_cq, 1)[0];
  const core::Time received_by = p.net.now;
  const core::Wc sent = wait(p, p.a, p.a.send_cq, 1)[0];
  // The SEND arrives after it was posted; its ACK, which completes it, after that.
  CHECK(received.timestamp > posted);
  CHECK(received.timestamp <= received_by);
  CHECK(sent.timestamp > received.timestamp);
  CHECK(sent.timestamp <= p.net.now);
}

TEST_CASE("RC WRITE, READ, and both atomics", "[core][engine]") {
  Pair p;
  fill(p.a, 0, 3000, 9);
  auto w = wr(WrOpcode::rdma_write, 1, {p.a.sge(0, 3000)});
  w.remote_addr = p.b.addr(4096);
  w.rkey = p.b.mr.rkey;
  REQUIRE(p.a.dev->post_send(p.net.now, p.a.qpn, w) == 0);
  auto r = wr(WrOpcode::rdma_read, 2, {p.a.sge(8192, 3000)});
  r.remote_addr = p.b.addr(4096);
  r.rkey = p.b.mr.rkey;
  REQUIRE(p.a.dev->post_send(p.net.now, p.a.qpn, r) == 0);

  std::uint64_t word = 40;
  std::memcpy(p.b.buffer.data() + 64, &word, 8);
  auto faa = wr(WrOpcode::atomic_fetch_and_add, 3, {p.a.sge(16384, 8)});
  faa.remote_addr = p.b.addr(64);
  faa.rkey = p.b.mr.rkey;
  faa.compare_add = 2;
  REQUIRE(p.a.dev->post_send(p.net.now, p.a.qpn, faa) == 0);
  auto cas = wr(WrOpcode::atomic_cmp_and_swp, 4, {p.a.sge(16392, 8)});
  cas.remote_addr = p.b.addr(64);
  cas.rkey = p.b.mr.rkey;
  cas.compare_add = 42;
  cas.swap = 7;
  REQUIRE(p.a.dev->post_send(p.net.now, p.a.qpn, cas) == 0);

  const auto wcs = wait(p, p.a, p.a.send_cq, 4);
  for (std::size_t i = 0; i < 4; ++i) {
    INFO(i);
    CHECK(wcs[i].status == WcStatus::success);
    CHECK(wcs[i].wr_id == i + 1);
  }
  CHECK(wcs[0].opcode == WcOpcode::rdma_write);
  CHECK(wcs[1].opcode == WcOpcode::rdma_read);
  CHECK(wcs[2].opcode == WcOpcode::fetch_add);
  CHECK(wcs[3].opcode == WcOpcode::comp_swap);
  CHECK(std::memcmp(p.a.buffer.data(), p.b.buffer.data() + 4096, 3000) == 0);
  CHECK(std::memcmp(p.a.buffer.data(), p.a.buffer.data() + 8192, 3000) == 0);
  std::uint64_t fetched = 0, swapped = 0, now_word = 0;
  std::memcpy(&fetched, p.a.buffer.data() + 16384, 8);
  std::memcpy(&swapped, p.a.buffer.data() + 16392, 8);
  std::memcpy(&now_word, p.b.buffer.data() + 64, 8);
  CHECK(fetched == 40);
  CHECK(swapped == 42);
  CHECK(now_word == 7);
}

TEST_CASE("RC ATOMIC WRITE places the 8 bytes it was posted with and completes as ATOMIC_WRITE", "[core][engine]") {
  Pair p;
  auto w = wr(WrOpcode::atomic_write, 5, {});
  w.remote_addr = p.b.addr(128);
  w.rkey = p.b.mr.rkey;
  const std::uint8_t word[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  std::memcpy(&w.compare_add, word, sizeof word);
  REQUIRE(p.a.dev->post_send(p.net.now, p.a.qpn, w) == 0);
  const auto wcs = wait(p, p.a, p.a.send_cq, 1);
  CHECK(wcs[0].status == WcStatus::success);
  CHECK(wcs[0].opcode == WcOpcode::atomic_write);
  CHECK(std::memcmp(p.b.buffer.data() + 128, word, sizeof word) == 0);
  CHECK(p.a.dev->qp(p.a.qpn)->counters.sent_pkts == 1);

  auto misaligned = w;
  misaligned.remote_addr = p.b.addr(132);
  REQUIRE(p.a.dev->post_send(p.net.now, p.a.qpn, misaligned) == 0);
  CHECK(wait(p, p.a, p.a.send_cq, 1)[0].status == WcStatus::loc_len_err);
}

TEST_CASE("ATOMIC WRITE is refused on UC and UD QPs", "[core][engine][uc]") {
  const core::QpType type = GENERATE(core::QpType::uc, core::QpType::ud);
  QpOptions o;
  o.type = type;
  Pair p(o);
  auto w = wr(WrOpcode::atomic_write, 5, {});
  w.remote_addr = p.b.addr(128);
  w.rkey = p.b.mr.rkey;
  CHECK(p.a.dev->post_send(p.net.now, p.a.qpn, w) == EINVAL);
}

TEST_CASE("RC SEND before the receive is posted: RNR NAK, then delivered", "[core][engine][rnr]") {
  Pair p;
  fill(p.a, 0, 100, 1);
  REQUIRE(p.a.dev->post_send(p.net.now, p.a.qpn, wr(WrOpcode::send, 1, {p.a.sge(0, 100)})) == 0);
  REQUIRE(p.net.run_until([&] { return p.b.dev->qp(p.b.qpn)->counters.send_rnr_err > 0; }));
  post_recv(p.b, 5, 0, 4096);
  const auto rwc = wait(p, p.b, p.b.recv_cq, 1);
  CHECK(rwc[0].byte_len == 100);
  CHECK(p.a.dev->qp(p.a.qpn)->counters.rcvd_rnr_err >= 1);
  CHECK(wait(p, p.a, p.a.send_cq, 1)[0].status == WcStatus::success);
}

TEST_CASE("RC WRITE WITH IMMEDIATE consumes a receive and reports the immediate", "[core][engine]") {
  Pair p;
  post_recv(p.b, 9, 0, 0);
  fill(p.a, 0, 2048, 5);
  auto w = wr(WrOpcode::rdma_write_with_imm, 1, {p.a.sge(0, 2048)});
  w.remote_addr = p.b.addr(8192);
  w.rkey = p.b.mr.rkey;
  w.imm_data = 0xCAFE0001;
  REQUIRE(p.a.dev->post_send(p.net.now, p.a.qpn, w) == 0);
  const auto rwc = wait(p, p.b, p.b.recv_cq, 1);
  CHECK(rwc[0].opcode == WcOpcode::recv_rdma_with_imm);
  CHECK(rwc[0].imm_data == 0xCAFE0001);
  CHECK((rwc[0].wc_flags & core::wc_flags::with_imm) != 0);
  CHECK(rwc[0].byte_len == 2048);
  CHECK(std::memcmp(p.a.buffer.data(), p.b.buffer.data() + 8192, 2048) == 0);
}

TEST_CASE("a bad rkey: remote access error, both QPs to the error state, the rest flushed", "[core][engine][errors]") {
  Pair p;
  post_recv(p.b, 1, 0, 64);
  auto w = wr(WrOpcode::rdma_write, 1, {p.a.sge(0, 64)});
  w.remote_addr = p.b.addr(0);
  w.rkey = p.b.mr.rkey ^ 0x100;
  REQUIRE(p.a.dev->post_send(p.net.now, p.a.qpn, w) == 0);
  REQUIRE(p.a.dev->post_send(p.net.now, p.a.qpn, wr(WrOpcode::send, 2, {p.a.sge(0, 8)})) == 0);
  const auto wcs = wait(p, p.a, p.a.send_cq, 2);
  CHECK(wcs[0].status == WcStatus::rem_access_err);
  CHECK(wcs[1].status == WcStatus::wr_flush_err);
  CHECK(p.a.dev->qp(p.a.qpn)->state() == core::QpState::err);
  CHECK(p.b.dev->qp(p.b.qpn)->state() == core::QpState::err);
  const auto rwc = wait(p, p.b, p.b.recv_cq, 1);
  CHECK(rwc[0].status == WcStatus::wr_flush_err);
}

TEST_CASE("UD SEND arrives behind a 40-byte GRH holding the IPv4 header", "[core][engine][ud]") {
  QpOptions o;
  o.type = core::QpType::ud;
  Pair p(o);
  post_recv(p.b, 3, 0, 40 + 512);
  core::AddressVector av;
  av.dgid = ipv4_gid(2);
  const auto ah = p.a.dev->create_ah(p.a.pd, av);
  REQUIRE(ah.ok());
  fill(p.a, 0, 512, 2);
  auto w = wr(WrOpcode::send_with_imm, 1, {p.a.sge(0, 512)});
  w.ah = *ah;
  w.remote_qpn = p.b.qpn;
  w.remote_qkey = 0x11111111;
  w.imm_data = 0x01020304;
  REQUIRE(p.a.dev->post_send(p.net.now, p.a.qpn, w) == 0);
  const auto rwc = wait(p, p.b, p.b.recv_cq, 1);
  CHECK(rwc[0].byte_len == 552);
  CHECK(rwc[0].src_qp == p.a.qpn);
  CHECK((rwc[0].wc_flags & core::wc_flags::grh) != 0);
  CHECK(rwc[0].imm_data == 0x01020304);
  CHECK(rwc[0].sl == 2);            // the network header, as ConnectX names IPv4 there
  CHECK(p.b.buffer[20] == 0x45);    // the IPv4 header starts at byte 20 of the GRH area
  CHECK(p.b.buffer[20 + 15] == 1);  // source 127.0.0.1
  CHECK(std::memcmp(p.a.buffer.data(), p.b.buffer.data() + 40, 512) == 0);
  CHECK(wait(p, p.a, p.a.send_cq, 1)[0].status == WcStatus::success);
}

TEST_CASE("UC SEND and WRITE", "[core][engine][uc]") {
  QpOptions o;
  o.type = core::QpType::uc;
  Pair p(o);
  post_recv(p.b, 3, 0, 4096);
  fill(p.a, 0, 3000, 4);
  REQUIRE(p.a.dev->post_send(p.net.now, p.a.qpn, wr(WrOpcode::send, 1, {p.a.sge(0, 3000)})) == 0);
  auto w = wr(WrOpcode::rdma_write, 2, {p.a.sge(0, 3000)});
  w.remote_addr = p.b.addr(65536);
  w.rkey = p.b.mr.rkey;
  REQUIRE(p.a.dev->post_send(p.net.now, p.a.qpn, w) == 0);
  CHECK(wait(p, p.b, p.b.recv_cq, 1)[0].byte_len == 3000);
  CHECK(wait(p, p.a, p.a.send_cq, 2).size() == 2);
  CHECK(std::memcmp(p.a.buffer.data(), p.b.buffer.data(), 3000) == 0);
  CHECK(std::memcmp(p.a.buffer.data(), p.b.buffer.data() + 65536, 3000) == 0);
}

TEST_CASE("a device told its UDP source port seals every QP's packets with it", "[core][engine]") {
  // A host that sends from one socket (emulator/net/udp_backend) sets this: the ICRC covers
  // the UDP source port, so it must be the port the packet really carries.
  core::DirectMemory memory;
  core::DeviceConfig c;
  c.gids = {ipv4_gid(1)};
  c.udp_source_port = 4791;
  core::Device dev(c, memory);
  const auto pd = dev.alloc_pd();
  const auto cq = dev.create_cq(16);
  core::QpInitAttr init;
  init.pd = *pd;
  init.send_cq = init.recv_cq = *cq;
  init.cap = {4, 4, 1, 1, 0};
  const auto a = dev.create_qp(init), b = dev.create_qp(init);
  REQUIRE(a.ok());
  REQUIRE(b.ok());
  CHECK(dev.qp(a->qpn)->udp_src_port == 4791);
  CHECK(dev.qp(b->qpn)->udp_src_port == 4791);
}
