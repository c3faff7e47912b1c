// The iWARP device's reading of a fault plan (emulator/host/iwarp_faults.hpp): what applies to
// FPDUs, what is named as ignored, and decisions that repeat with the seed.
#include "emulator/host/iwarp_faults.hpp"

#include <catch2/catch.hpp>
#include <cstdint>
#include <vector>

namespace {

using softrdma::host::IwarpFaults;
namespace net = softrdma::net;

net::FaultPlan plan_of(const char* spec) {
  net::FaultParse p = net::parse_faults(spec);
  INFO(spec << ": " << p.error);
  REQUIRE(p.plan);
  return *p.plan;
}

// The verdicts of `n` FPDUs of 64 bytes, and how many of them were changed.
std::vector<IwarpFaults::Verdict> run(IwarpFaults& f, int n, int& changed) {
  std::vector<IwarpFaults::Verdict> out;
  changed = 0;
  for (int i = 0; i < n; ++i) {
    std::vector<std::uint8_t> fpdu(64, 0);
    out.push_back(f.next(fpdu));
    for (std::uint8_t b : fpdu) changed += b != 0;
  }
  return out;
}

}  // namespace

TEST_CASE("iWARP faults: delay, corruption and drop=N apply, and what TCP hides is named", "[iwarp_faults]") {
  CHECK_FALSE(IwarpFaults::applies(plan_of("loss=5%,dup=1%,reorder=2%,rx.corrupt=1%,seed=2")));
  CHECK(IwarpFaults::ignored(plan_of("loss=5%,rx.corrupt=1%")) ==
        "loss, duplication and reordering (TCP hides them), rx items");
  CHECK(IwarpFaults::ignored(plan_of("delay=1ms,tx.corrupt=1%,drop=3")).empty());
  CHECK(IwarpFaults::applies(plan_of("delay=1ms")));
  CHECK(IwarpFaults::applies(plan_of("tx.corrupt=1%")));
  CHECK(IwarpFaults::applies(plan_of("drop=3")));
  CHECK_THAT(IwarpFaults::ignored(plan_of("linkdown=1s,opcode=send,loss=1%")), Catch::Contains("linkdown"));
}

TEST_CASE("iWARP faults: drop=N resets in place of the Nth FPDU, and the rest pass", "[iwarp_faults]") {
  IwarpFaults f(plan_of("drop=2+4"));
  int changed = 0;
  const auto v = run(f, 5, changed);
  CHECK_FALSE(v[0].reset);
  CHECK(v[1].reset);
  CHECK_FALSE(v[2].reset);
  CHECK(v[3].reset);
  CHECK(changed == 0);
  CHECK(f.counters().dropped_nth == 2);
  CHECK(f.counters().passed == 3);
}

TEST_CASE("iWARP faults: corruption flips one bit per chosen FPDU, the same ones for a seed", "[iwarp_faults]") {
  IwarpFaults a(plan_of("corrupt=20%,seed=9")), b(plan_of("corrupt=20%,seed=9"));
  int changed_a = 0, changed_b = 0;
  run(a, 200, changed_a);
  run(b, 200, changed_b);
  CHECK(a.counters().corrupted == b.counters().corrupted);
  CHECK(changed_a == static_cast<int>(a.counters().corrupted));  // one byte each
  CHECK(changed_a == changed_b);
  CHECK(a.counters().corrupted > 20);  // about 40 of 200
  CHECK(a.counters().corrupted < 60);
}

TEST_CASE("iWARP faults: delay with jitter holds each FPDU between delay and delay + jitter", "[iwarp_faults]") {
  IwarpFaults f(plan_of("delay=2ms:jitter=1ms,seed=4"));
  int changed = 0;
  for (const auto& v : run(f, 50, changed)) {
    CHECK(v.delay >= 2'000'000);
    CHECK(v.delay <= 3'000'000);
  }
  CHECK(f.counters().delayed == 50);
  CHECK(changed == 0);
}
