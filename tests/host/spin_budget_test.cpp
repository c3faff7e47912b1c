// SpinBudget: the progress thread's spin after activity counts the passes it ran, so a
// preemption longer than the spin does not put it to sleep in the middle of a stream.
#include "emulator/host/spin_budget.hpp"

#include <catch2/catch.hpp>

using softrdma::host::SpinBudget;

TEST_CASE("idle passes spin for the configured time, then the thread may sleep", "[spin]") {
  SpinBudget budget(50'000, 1'000'000);
  softrdma::core::Time now = 1'000'000;
  int passes = 0;
  while (budget.keep_spinning(now += 2'000)) ++passes;
  // 2 us passes: the 25th brings the count to 50 us.
  CHECK(passes == 24);
}

TEST_CASE("a preemption counts for one pass at most", "[spin]") {
  SpinBudget budget(50'000, 0);
  budget.worked(1'000'000);
  // Three milliseconds away (a scheduler slice on a busy core), then the first look finds
  // nothing: the thread has spun for one long pass, not for three milliseconds.
  CHECK(budget.keep_spinning(4'000'000));
  softrdma::core::Time now = 4'000'000;
  int passes = 1;
  while (budget.keep_spinning(now += 1'000)) ++passes;
  CHECK(passes == 40);  // the long pass counts 10 us, then 39 passes of 1 us
}

TEST_CASE("work starts the spin again", "[spin]") {
  SpinBudget budget(5'000, 0);
  CHECK(budget.keep_spinning(3'000));
  CHECK_FALSE(budget.keep_spinning(6'000));
  budget.worked(7'000);
  CHECK(budget.keep_spinning(9'000));
  CHECK(budget.keep_spinning(11'000));
  CHECK_FALSE(budget.keep_spinning(12'000));
}

TEST_CASE("a clock read before the last pass counts nothing", "[spin]") {
  // Times come from one monotonic clock, but a caller may pass a reading taken just before the
  // previous one (here the constructor's); that must not wrap around to a huge pass.
  SpinBudget budget(5'000, 10'000);
  CHECK(budget.keep_spinning(9'000));
  CHECK(budget.keep_spinning(12'000));
  CHECK_FALSE(budget.keep_spinning(15'000));
}
