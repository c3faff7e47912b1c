// Device::recycle(): a packet built in a buffer that carried an earlier packet must be the
// packet a fresh buffer gives. packet_to() hands out recycled buffers as they are, of any size
// and content, so this holds only if building a packet writes every one of its bytes.
#include <catch2/catch.hpp>
#include <cstdint>
#include <random>
#include <vector>

#include "tests/core/verbs_test_util.hpp"

namespace test {
namespace {

using Log = std::vector<std::vector<std::uint8_t>>;

// Moves packets both ways until both devices are quiet, logging each one's bytes. With
// `recycle`, every delivered packet's buffer is filled with junk, resized at random and
// given back to its sender.
void pump(Pair& p, Log& log, std::mt19937* recycle) {
  for (bool moved = true; moved;) {
    moved = false;
    for (auto [from, to] : {std::pair{&p.a, &p.b}, std::pair{&p.b, &p.a}}) {
      while (auto pkt = from->dev->transmit(0)) {
        log.push_back(pkt->bytes);
        to->dev->receive(0, as_received(*pkt));
        if (recycle) {
          std::fill(pkt->bytes.begin(), pkt->bytes.end(), static_cast<std::uint8_t>((*recycle)()));
          pkt->bytes.resize(std::uniform_int_distribution<std::size_t>(0, 5000)(*recycle), 0xA5);
          from->dev->recycle(std::move(*pkt));
        }
        moved = true;
      }
    }
  }
}

// Every opcode the requester and responder build, at sizes that need no pad, every pad
// length, and several packets (MTU 1024): a's requests, b's ACKs, READ responses and atomic
// ACKs. Returns every packet's bytes in order.
Log run_script(std::mt19937* recycle) {
  Pair p;
  // Requests name b's buffer by a fixed iova, so that both runs' packets are comparable.
  constexpr std::uint64_t kIova = 0x10000000;
  const std::uint32_t acc =
      core::access::local_write | core::access::remote_write | core::access::remote_read | core::access::remote_atomic;
  const auto target = p.b.dev->reg_mr(p.b.pd, p.b.addr(), p.b.buffer.size(), kIova, acc);
  REQUIRE(target.ok());
  Log log;
  std::uint64_t id = 0;
  for (const std::uint32_t len : {0u, 1u, 2u, 3u, 4u, 64u, 1023u, 1024u, 3000u}) {
    for (const WrOpcode op : {WrOpcode::send, WrOpcode::send_with_imm, WrOpcode::rdma_write,
                              WrOpcode::rdma_write_with_imm, WrOpcode::rdma_read}) {
      if (op == WrOpcode::send || op == WrOpcode::send_with_imm || op == WrOpcode::rdma_write_with_imm)
        post_recv(p.b, ++id, 8192, 4096);
      core::SendWr w = remote_wr(op, ++id, {p.a.sge(0, len)}, kIova + 16384, target->rkey);
      w.imm_data = 0x01020304;
      post_send(p, p.a, w);
      pump(p, log, recycle);
    }
    core::SendWr inl = make_wr(WrOpcode::send, ++id, {}, core::send_flags::signaled | core::send_flags::inline_data);
    inl.inline_data.assign(std::min(len, 64u), 0x5A);
    post_recv(p.b, ++id, 8192, 4096);
    post_send(p, p.a, inl);
    pump(p, log, recycle);
  }
  for (const WrOpcode op : {WrOpcode::atomic_cmp_and_swp, WrOpcode::atomic_fetch_and_add}) {
    core::SendWr w = remote_wr(op, ++id, {p.a.sge(0, 8)}, kIova + 32768, target->rkey);
    w.compare_add = 7;
    w.swap = 9;
    post_send(p, p.a, w);
    pump(p, log, recycle);
  }
  for (const auto& wc : p.a.poll(p.a.send_cq)) CHECK(wc.status == WcStatus::success);
  return log;
}

}  // namespace

TEST_CASE("a packet built in a recycled buffer is the packet a fresh buffer gives", "[core][recycle]") {
  const Log fresh = run_script(nullptr);
  REQUIRE(fresh.size() > 100);
  for (const std::uint32_t seed : {1u, 2u, 3u}) {
    INFO("seed " << seed);
    std::mt19937 rng(seed);
    const Log reused = run_script(&rng);
    REQUIRE(reused.size() == fresh.size());
    for (std::size_t i = 0; i < fresh.size(); ++i) {
      INFO("packet " << i);
      REQUIRE(reused[i] == fresh[i]);
    }
  }
}

}  // namespace test
