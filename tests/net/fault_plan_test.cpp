// The fault stage's plan (SOFTRDMA_FAULTS) and its seeded decisions, without sockets.
#include "emulator/net/fault_plan.hpp"

#include <catch2/catch.hpp>
#include <cstdint>
#include <vector>

using softrdma::net::FaultDice;
using softrdma::net::FaultLine;
using softrdma::net::FaultPlan;
using softrdma::net::FaultRates;
using softrdma::net::parse_faults;

namespace {

struct Packet {
  int id = 0;
  std::vector<std::uint8_t> bytes = std::vector<std::uint8_t>(64, 0);
};

softrdma::net::DirectionFaults rates_only(const FaultRates& r) {
  softrdma::net::DirectionFaults d;
  d.rates = r;
  return d;
}

// A packet whose BTH names `opcode` and destination QP `qpn`.
Packet bth_packet(int id, std::uint8_t opcode, std::uint32_t qpn) {
  Packet p{id};
  p.bytes[0] = opcode;
  p.bytes[5] = static_cast<std::uint8_t>(qpn >> 16);
  p.bytes[6] = static_cast<std::uint8_t>(qpn >> 8);
  p.bytes[7] = static_cast<std::uint8_t>(qpn);
  return p;
}
struct BytesOf {
  std::vector<std::uint8_t>& operator()(Packet& p) const { return p.bytes; }
};
using Line = FaultLine<Packet, BytesOf>;

std::vector<int> ids(const std::vector<Packet>& ps) {
  std::vector<int> out;
  for (const Packet& p : ps) out.push_back(p.id);
  return out;
}

}  // namespace

TEST_CASE("faults: the issue's example parses, both directions, and tx./rx. limit an item", "[faults]") {
  const auto p = parse_faults("loss=1%,reorder=2%:depth=4,dup=0.5%,delay=200us:jitter=50us,corrupt=0.1%,seed=42");
  REQUIRE(p.plan);
  for (const FaultRates* r : {&p.plan->tx.rates, &p.plan->rx.rates}) {
    CHECK(r->loss == Approx(0.01));
    CHECK(r->reorder == Approx(0.02));
    CHECK(r->reorder_depth == 4);
    CHECK(r->dup == Approx(0.005));
    CHECK(r->delay_ns == 200'000);
    CHECK(r->jitter_ns == 50'000);
    CHECK(r->corrupt == Approx(0.001));
  }
  CHECK(p.plan->seed == 42);
  const auto one_way = parse_faults("rx.loss=5%, tx.delay=1ms");
  REQUIRE(one_way.plan);
  CHECK(one_way.plan->rx.rates.loss == Approx(0.05));
  CHECK(one_way.plan->tx.rates.loss == 0);
  CHECK(one_way.plan->tx.rates.delay_ns == 1'000'000);
  CHECK(one_way.plan->rx.rates.delay_ns == 0);
  CHECK(parse_faults("").plan);
}

TEST_CASE("faults: a bad item is one line naming it", "[faults]") {
  for (const char* bad : {"loss",
                          "loss=2",
                          "loss=-1%",
                          "loss=101%",
                          "drop=1%",
                          "delay=5",
                          "delay=5parsecs",
                          "reorder=1%:depth=0",
                          "reorder=1%:depth=x",
                          "loss=1%:depth=3",
                          "seed=abc",
                          "dup=1%%",
                          "opcode=",
                          "opcode=sned",
                          "opcode=0x100",
                          "opcode=send++ack",
                          "qp=0x1000000",
                          "qp=x",
                          "drop=0",
                          "drop=1+",
                          "drop=2:x=1",
                          "rnr=-1",
                          "rnr=2:x",
                          "tx.rnr=1",
                          "linkdown=1",
                          "linkdown=1s:for=0s",
                          "linkdown=1s:during=2s",
                          "tx.linkdown=1s"}) {
    const auto p = parse_faults(bad);
    INFO(bad);
    CHECK_FALSE(p.plan);
    CHECK_FALSE(p.error.empty());
    CHECK(p.error.find('\n') == std::string::npos);
  }
}

TEST_CASE("faults: the same seed makes the same decisions, another seed others", "[faults]") {
  FaultRates r;
  r.loss = r.dup = r.corrupt = r.reorder = 0.3;
  FaultDice a(r, 7), b(r, 7), c(r, 8);
  int same = 0, differ = 0;
  for (int i = 0; i < 1000; ++i) {
    const auto fa = a.roll(100), fb = b.roll(100), fc = c.roll(100);
    same += fa.lost == fb.lost && fa.duplicated == fb.duplicated && fa.corrupt_at == fb.corrupt_at &&
            fa.overtaken_by == fb.overtaken_by;
    differ += fa.lost != fc.lost;
  }
  CHECK(same == 1000);
  CHECK(differ > 100);
  const FaultPlan plan;
  CHECK(softrdma::net::direction_seed(plan, false) != softrdma::net::direction_seed(plan, true));
}

TEST_CASE("faults: rates hold over many packets", "[faults]") {
  FaultRates r;
  r.loss = 0.10;
  r.corrupt = 0.01;
  FaultDice d(r, 3);
  int lost = 0, corrupted = 0;
  constexpr int n = 100'000;
  for (int i = 0; i < n; ++i) {
    const auto f = d.roll(1000);
    lost += f.lost;
    corrupted += f.corrupt_at.has_value();
  }
  CHECK(lost == Approx(n * 0.10).epsilon(0.05));
  CHECK(corrupted == Approx(n * 0.01).epsilon(0.15));
}

TEST_CASE("faults: a line loses, duplicates, corrupts one bit, delays and reorders", "[faults]") {
  std::vector<Packet> out;
  SECTION("loss=100%: nothing leaves") {
    FaultRates r;
    r.loss = 1;
    Line line(rates_only(r), 1);
    for (int i = 0; i < 10; ++i) line.push(0, Packet{i}, out);
    CHECK(out.empty());
    CHECK(line.counters().lost == 10);
  }
  SECTION("dup=100%: each packet twice, in order") {
    FaultRates r;
    r.dup = 1;
    Line line(rates_only(r), 1);
    for (int i = 0; i < 3; ++i) line.push(0, Packet{i}, out);
    CHECK(ids(out) == std::vector<int>{0, 0, 1, 1, 2, 2});
  }
  SECTION("corrupt=100%: exactly one bit flips") {
    FaultRates r;
    r.corrupt = 1;
    Line line(rates_only(r), 1);
    line.push(0, Packet{1}, out);
    REQUIRE(out.size() == 1);
    int bits = 0;
    for (std::uint8_t b : out[0].bytes) bits += __builtin_popcount(b);
    CHECK(bits == 1);
  }
  SECTION("corrupt=100% after a protected prefix: the prefix is never touched") {
    FaultRates r;
    r.corrupt = 1;
    Line line(rates_only(r), 1, 60);
    for (int i = 0; i < 50; ++i) line.push(0, Packet{i}, out);
    for (const Packet& p : out) {
      for (std::size_t b = 0; b < 60; ++b) CHECK(p.bytes[b] == 0);
    }
  }
  SECTION("delay: held until now + delay") {
    FaultRates r;
    r.delay_ns = 1000;
    Line line(rates_only(r), 1);
    line.push(100, Packet{1}, out);
    CHECK(out.empty());
    CHECK(line.next_release() == 1100u);
    line.release(1099, out);
    CHECK(out.empty());
    line.release(1100, out);
    CHECK(ids(out) == std::vector<int>{1});
    CHECK_FALSE(line.next_release());
  }
  SECTION("reorder=100%:depth=1: each packet overtaken by the next one") {
    FaultRates r;
    r.reorder = 1;
    r.reorder_depth = 1;
    Line line(rates_only(r), 1);
    for (int i = 0; i < 4; ++i) line.push(0, Packet{i}, out);
    // Each one waits for one later packet, which itself waits: 0 leaves when 1 arrives...
    CHECK(ids(out) == std::vector<int>{0, 1, 2});
    // ...and the last, overtaken by nothing, leaves after the reorder wait.
    line.release(999'999, out);
    CHECK(out.size() == 3);
    line.release(1'000'000, out);
    CHECK(ids(out) == std::vector<int>{0, 1, 2, 3});
  }
  SECTION("reorder=50%:depth=4: everything leaves, some out of order") {
    FaultRates r;
    r.reorder = 0.5;
    Line line(rates_only(r), 9);
    for (int i = 0; i < 200; ++i) line.push(0, Packet{i}, out);
    line.release(1'000'000, out);
    REQUIRE(out.size() == 200);
    int inversions = 0;
    for (std::size_t i = 1; i < out.size(); ++i) inversions += out[i].id < out[i - 1].id;
    CHECK(inversions > 10);
    CHECK(line.counters().reordered > 50);
  }
}

TEST_CASE("faults: filters, scripted drops, forced RNR and link down parse", "[faults]") {
  const auto p = parse_faults(
      "rx.opcode=send+RC_RDMA_READ_REQUEST+0x11,tx.qp=0x12+19,drop=5+2,rnr=3,linkdown=100ms:for=2s,seed=4");
  INFO(p.error);
  REQUIRE(p.plan);
  CHECK(p.plan->tx.drop_nth == std::vector<std::uint64_t>{2, 5});
  CHECK(p.plan->rx.drop_nth == std::vector<std::uint64_t>{2, 5});
  CHECK(p.plan->forced_rnr == 3);
  REQUIRE(p.plan->link_down);
  CHECK(p.plan->link_down->at == 100'000'000);
  CHECK(p.plan->link_down->length == 2'000'000'000);
  CHECK_FALSE(p.plan->link_down->covers(99'999'999));
  CHECK(p.plan->link_down->covers(100'000'000));
  CHECK(p.plan->link_down->covers(2'099'999'999));
  CHECK_FALSE(p.plan->link_down->covers(2'100'000'000));

  const auto opcode_byte = [](std::uint8_t op) { return bth_packet(0, op, 0).bytes; };
  const softrdma::net::FaultFilter& rx = p.plan->rx.filter;
  CHECK(rx.matches(opcode_byte(0x00)));                      // RC_SEND_FIRST: family "send"
  CHECK(rx.matches(opcode_byte(0x64)));                      // UD_SEND_ONLY: every transport's sends
  CHECK(rx.matches(opcode_byte(0x0C)));                      // by name
  CHECK(rx.matches(opcode_byte(0x11)));                      // by byte
  CHECK_FALSE(rx.matches(opcode_byte(0x0A)));                // RC_RDMA_WRITE_ONLY
  CHECK_FALSE(rx.matches(std::vector<std::uint8_t>(4, 0)));  // no BTH
  const softrdma::net::FaultFilter& tx = p.plan->tx.filter;
  CHECK(tx.matches(bth_packet(0, 0x0A, 0x12).bytes));
  CHECK(tx.matches(bth_packet(0, 0x0A, 19).bytes));
  CHECK_FALSE(tx.matches(bth_packet(0, 0x0A, 0x14).bytes));

  const auto forever = parse_faults("linkdown=0");
  REQUIRE(forever.plan);
  REQUIRE(forever.plan->link_down);
  CHECK(forever.plan->link_down->covers(0));
  CHECK(forever.plan->link_down->covers(86'400'000'000'000));
}

TEST_CASE("faults: a filter limits the faults to the packets it matches, drop=N counts only those", "[faults]") {
  std::vector<Packet> out;
  softrdma::net::DirectionFaults d;
  d.rates.loss = 1;  // every matching packet not dropped by number is lost too...
  REQUIRE(d.filter.add_opcodes("ack").empty());
  Line lossy(d, 1);
  for (int i = 0; i < 6; ++i) lossy.push(0, bth_packet(i, i % 2 ? 0x11 : 0x04, 7), out);
  CHECK(ids(out) == std::vector<int>{0, 2, 4});  // ...while SENDs pass untouched
  CHECK(lossy.counters().lost == 3);
  CHECK(lossy.counters().passed == 3);

  out.clear();
  softrdma::net::DirectionFaults s;
  REQUIRE(s.filter.add_qps("7").empty());
  s.drop_nth = {2, 3, 5};
  Line scripted(s, 1);
  // Packets to QP 7 are the 1st, 2nd, ... matching ones; packets to QP 8 are not counted.
  const std::uint32_t qpns[] = {7, 8, 7, 7, 8, 7, 7, 7};
  for (int i = 0; i < 8; ++i) scripted.push(0, bth_packet(i, 0x04, qpns[i]), out);
  // matching: ids 0 (1st), 2 (2nd), 3 (3rd), 5 (4th), 6 (5th), 7 (6th)
  CHECK(ids(out) == std::vector<int>{0, 1, 4, 5, 7});
  CHECK(scripted.counters().dropped_nth == 3);
}
