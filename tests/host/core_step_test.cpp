// CoreStep: a polling thread that waits for its CPU as long as a scheduler slice steps to
// another CPU, once per interval; a short preemption does not make it move.
#include "emulator/host/core_step.hpp"

#include <sched.h>

#include <catch2/catch.hpp>
#include <cstdio>

using softrdma::core::Time;
using softrdma::host::CoreStep;

TEST_CASE("a poller that waits a scheduler slice for its CPU steps, once per interval", "[core-step]") {
  CoreStep step;
  const Time start = 1'000'000'000;
  CHECK(step.shared(start, 1'400'000, 1));  // a 1.4 ms slice of another thread
  CHECK_FALSE(step.shared(start + 10'000'000, 1'400'000, 1));
  CHECK_FALSE(step.shared(start + CoreStep::kStepInterval - 1, 1'400'000, 1));
  CHECK(step.shared(start + CoreStep::kStepInterval, 1'400'000, 1));
}

TEST_CASE("a wake-up's preemption does not make a poller step", "[core-step]") {
  CoreStep step;
  CHECK_FALSE(step.shared(1'000'000'000, 0, 0));
  CHECK_FALSE(step.shared(1'000'000'000, 20'000, 1));  // a progress thread's pass
  CHECK_FALSE(step.shared(1'000'000'000, CoreStep::kSharedDelay - 1, 1));
  CHECK(step.shared(1'000'000'000, CoreStep::kSharedDelay, 1));
}

TEST_CASE("many short waits do not make a poller step, however long together", "[core-step]") {
  // ib_write_lat: the progress threads' passes preempt the program 20-30 times a millisecond.
  CoreStep step;
  CHECK_FALSE(step.shared(1'000'000'000, 700'000, 25));
  CHECK_FALSE(step.shared(1'000'000'000, 2'000'000, 9));
  CHECK(step.shared(1'000'000'000, 2'000'000, 8));  // 250 us a wait: slices of a busy thread
}

TEST_CASE("the run delay and the slices are the second and third fields of a schedstat line", "[core-step]") {
  const auto parsed = softrdma::host::parse_run_delay("236488526 483692 97\n");
  REQUIRE(parsed.has_value());
  CHECK(parsed->waited == Time{483692});
  CHECK(parsed->slices == 97);
  CHECK_FALSE(softrdma::host::parse_run_delay("236488526 483692").has_value());
  CHECK_FALSE(softrdma::host::parse_run_delay("").has_value());
}

TEST_CASE("this kernel's schedstat line for the thread parses", "[core-step]") {
  std::FILE* f = std::fopen("/proc/thread-self/schedstat", "r");
  REQUIRE(f != nullptr);
  char line[96] = {};
  REQUIRE(std::fgets(line, sizeof line, f) != nullptr);
  std::fclose(f);
  CHECK(softrdma::host::parse_run_delay(line).has_value());
}

TEST_CASE("a step moves the thread to another CPU and keeps its mask", "[core-step]") {
  cpu_set_t before;
  REQUIRE(sched_getaffinity(0, sizeof before, &before) == 0);
  if (CPU_COUNT(&before) < 2) {
    WARN("one CPU allowed: nothing to step to");
    CHECK_FALSE(softrdma::host::step_to_another_cpu());
    return;
  }
  const int here = sched_getcpu();
  REQUIRE(softrdma::host::step_to_another_cpu());
  CHECK(sched_getcpu() != here);
  cpu_set_t after;
  REQUIRE(sched_getaffinity(0, sizeof after, &after) == 0);
  CHECK(CPU_EQUAL(&before, &after));
}

TEST_CASE("a thread allowed one CPU does not step", "[core-step]") {
  cpu_set_t all, one;
  REQUIRE(sched_getaffinity(0, sizeof all, &all) == 0);
  CPU_ZERO(&one);
  CPU_SET(sched_getcpu(), &one);
  REQUIRE(sched_setaffinity(0, sizeof one, &one) == 0);
  const bool stepped = softrdma::host::step_to_another_cpu();
  cpu_set_t now;
  sched_getaffinity(0, sizeof now, &now);
  sched_setaffinity(0, sizeof all, &all);
  CHECK_FALSE(stepped);
  CHECK(CPU_EQUAL(&now, &one));
}
