// `softrdma dump --follow` on captures softrdma itself writes under seeded faults: two embedded
// hosts on loopback, the sender capturing (SOFTRDMA_CAPTURE) and losing or duplicating its own
// packets (SOFTRDMA_FAULTS). The capture stage sees packets after the fault stage, so what the
// follow analysis flags must agree exactly with the engine's and the fault stage's counters.
#include <cstdio>
#include <cstring>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "emulator/net/pcap_file.hpp"
#include "tests/host/host_fixture.hpp"
#include "tests/net/capture_files.hpp"
#include "tools/softrdma/conversation.hpp"
#include "tools/softrdma/follow.hpp"
#include "tools/softrdma/frame_judge.hpp"

namespace test {
namespace {

using core::WcStatus;
using core::WrOpcode;
using softrdma::dump::Direction;
using softrdma::dump::DirectionSummary;
using softrdma::dump::NakKind;

host::HostConfig with_faults(const std::string& ip, const char* faults) {
  host::HostConfig c = config_at(ip);
  const auto parsed = softrdma::net::parse_faults(faults);
  INFO(parsed.error);
  REQUIRE(parsed.plan);
  c.faults = parsed.plan;
  return c;
}

host::HostConfig capturing(const std::string& ip, const std::string& path, const char* faults) {
  host::HostConfig c = with_faults(ip, faults);
  c.capture_path = path;
  return c;
}

struct Followed {
  DirectionSummary in, out;
  std::optional<std::uint32_t> first_out_psn;  // of the first packet the followed QP sent
};

// What `softrdma dump --follow qpn FILE` finds: the two passes of follow_dump.cpp.
Followed follow(const std::string& path, std::uint32_t qpn) {
  std::vector<std::vector<std::uint8_t>> frames;
  std::string error;
  auto reader = softrdma::net::PcapReader::open(path, error);
  INFO(path << ": " << error);
  REQUIRE(reader);
  while (const auto p = reader->next())
    if (softrdma::dump::judge_roce(*p).kind == softrdma::dump::FrameKind::roce)
      frames.emplace_back(p->data.begin(), p->data.end());
  softrdma::dump::ConversationFinder finder(qpn);
  for (const auto& b : frames) finder.add(*wire::RoceFrame::check(b));
  const auto found = finder.result(std::nullopt);
  if (const auto* why = std::get_if<std::string>(&found)) FAIL(*why);
  const auto& c = std::get<softrdma::dump::Conversation>(found);
  softrdma::dump::Follower f;
  std::optional<std::uint32_t> first_out_psn;
  for (const auto& b : frames) {
    const auto frame = wire::RoceFrame::check(b);
    const auto d = c.direction_of(*frame);
    if (!d) continue;
    f.feed(*d, frame->ib(), frame->icrc_ok());
    if (d == Direction::out && !first_out_psn) first_out_psn = frame->ib().psn();
  }
  return {f.summary(Direction::in), f.summary(Direction::out), first_out_psn};
}

// 32 RC WRITEs of 16 KiB (16 packets each at MTU 1024) from a to b; a's completions all succeed.
void write_all(Node& a, Node& b, RcPair& p) {
  constexpr int kWrites = 32;
  constexpr std::uint32_t kLength = 16 * 1024;
  fill_pattern(a.buffer, 0, kWrites * kLength, 9);
  for (int i = 0; i < kWrites; ++i) {
    const std::size_t off = static_cast<std::size_t>(i) * kLength;
    a.post_send(p.qa, remote_wr(WrOpcode::rdma_write, static_cast<std::uint64_t>(i), {a.sge(off, kLength)}, b.addr(off),
                                b.mr.rkey));
  }
  for (const core::Wc& wc : a.wait(a.send_cq, kWrites)) CHECK(wc.status == WcStatus::success);
  CHECK(std::memcmp(a.buffer.data(), b.buffer.data(), kWrites * kLength) == 0);
}

RcOptions slow_timer() {
  RcOptions o;
  o.timeout = 14;  // 67 ms: only a lost packet is resent, never one whose ACK is merely slow
  return o;
}

TEST_CASE("follow: under tx loss, the sender's capture shows its retransmissions, gaps and NAKs exactly",
          "[host][follow]") {
  const std::string path = temp_capture_path("follow-loss");
  Node a(capturing("127.83.90.1", path, "tx.loss=4%,seed=21")), b("127.83.90.2");
  RcPair p(a, b, slow_timer());
  write_all(a, b, p);
  a.host->stop();  // the capture file is complete
  const host::HostStats s = a.host->stats();
  const core::QpCounters qa = qp_counters(a, p.qa);
  REQUIRE(s.faults.tx.lost > 0);

  const Followed f = follow(path, p.qa);
  // Every PSN reached b, so the capture holds each once plus the resends that were not lost.
  CHECK(f.out.retransmissions == qa.retransmitted_pkts - s.faults.tx.lost);
  CHECK(f.out.duplicates == 0);
  CHECK(f.out.gaps > 0);
  CHECK(f.out.missing_psns <= s.faults.tx.lost);
  // Every PSN skipped came later, resent; so did those lost before the first one captured
  // (RcPair starts a's PSNs at 0x123456), which no gap can count.
  REQUIRE(f.first_out_psn);
  CHECK(f.out.late == f.out.missing_psns + (*f.first_out_psn - 0x123456));
  CHECK(f.out.nak_count(NakKind::psn_sequence_error) == 0);
  // The NAKs b sent all reached a.
  CHECK(f.in.nak_count(NakKind::psn_sequence_error) == qa.rcvd_seq_err);
  CHECK(f.in.nak_count(NakKind::psn_sequence_error) > 0);
  CHECK(f.in.gaps == 0);
  CHECK(f.in.retransmissions == 0);
  CHECK(f.in.packets + f.out.packets == s.udp.tx_packets + s.udp.rx_packets);
  std::remove(path.c_str());
}

TEST_CASE("follow: under tx duplication, every copy is flagged a duplicate and nothing a retransmission",
          "[host][follow]") {
  const std::string path = temp_capture_path("follow-dup");
  Node a(capturing("127.83.91.1", path, "tx.dup=5%,seed=22")), b("127.83.91.2");
  RcPair p(a, b, slow_timer());
  write_all(a, b, p);
  a.host->stop();
  const host::HostStats s = a.host->stats();
  REQUIRE(s.faults.tx.duplicated > 0);
  CHECK(qp_counters(a, p.qa).retransmitted_pkts == 0);

  const Followed f = follow(path, p.qa);
  CHECK(f.out.duplicates == s.faults.tx.duplicated);
  CHECK(f.out.retransmissions == 0);
  CHECK(f.out.gaps == 0);
  CHECK(f.out.late == 0);
  std::remove(path.c_str());
}

TEST_CASE("follow: forced RNR NAKs are flagged with their kind, and the SENDs resent after them", "[host][follow]") {
  const std::string path = temp_capture_path("follow-rnr");
  host::HostConfig capture = config_at("127.83.94.1");
  capture.capture_path = path;
  Node a(capture), b(with_faults("127.83.94.2", "rnr=3"));  // b answers a's first 3 SENDs with RNR NAKs
  RcPair p(a, b, slow_timer());
  for (int i = 0; i < 5; ++i) {
    b.post_recv(p.qb, static_cast<std::uint64_t>(i), static_cast<std::size_t>(i) * 64, 64);
    a.post_send(p.qa,
                make_wr(WrOpcode::send, static_cast<std::uint64_t>(i), {a.sge(static_cast<std::size_t>(i) * 64, 64)}));
    CHECK(a.wait(a.send_cq, 1).at(0).status == WcStatus::success);
  }
  a.host->stop();
  const core::QpCounters qa = qp_counters(a, p.qa);
  REQUIRE(qa.rcvd_rnr_err == 3);

  const Followed f = follow(path, p.qa);
  CHECK(f.in.nak_count(NakKind::rnr) == 3);
  CHECK(f.out.retransmissions == qa.retransmitted_pkts);
  CHECK(f.out.retransmissions >= 3);  // each RNR NAK sends its SEND again
  CHECK(f.out.duplicates == 0);
  CHECK(f.out.gaps == 0);
  std::remove(path.c_str());
}

TEST_CASE("follow: under rx loss, READ responses missing from the requester's capture are READ gaps",
          "[host][follow]") {
  const std::string path = temp_capture_path("follow-read");
  Node a(capturing("127.83.92.1", path, "rx.loss=3%,seed=23")), b("127.83.92.2");
  RcPair p(a, b, slow_timer());
  constexpr int kReads = 16;
  constexpr std::uint32_t kLength = 16 * 1024;  // 16 responses each
  fill_pattern(b.buffer, 0, kReads * kLength, 4);
  for (int i = 0; i < kReads; ++i) {
    const std::size_t off = static_cast<std::size_t>(i) * kLength;
    a.post_send(p.qa, remote_wr(WrOpcode::rdma_read, static_cast<std::uint64_t>(i), {a.sge(off, kLength)}, b.addr(off),
                                b.mr.rkey));
  }
  for (const core::Wc& wc : a.wait(a.send_cq, kReads)) CHECK(wc.status == WcStatus::success);
  CHECK(std::memcmp(a.buffer.data(), b.buffer.data(), kReads * kLength) == 0);
  a.host->stop();
  const host::HostStats s = a.host->stats();
  const core::QpCounters qa = qp_counters(a, p.qa);
  REQUIRE(s.faults.rx.lost > 1);

  const Followed f = follow(path, p.qa);
  CHECK(f.in.read_gaps > 0);
  CHECK(f.in.missing_read_psns <= s.faults.rx.lost);
  CHECK(f.in.gaps == 0);
  // a asks again from the first PSN it missed: each such READ is a retransmission, and the
  // responder's answers to it repeat responses already seen or fill the gaps.
  CHECK(f.out.retransmissions == qa.retransmitted_pkts);
  CHECK(f.out.retransmissions > 0);
  CHECK(f.out.gaps == 0);
  CHECK(f.out.duplicates == 0);
  std::remove(path.c_str());
}

}  // namespace
}  // namespace test
