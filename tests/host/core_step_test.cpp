// CoreStep and ThreadPause: a polling thread that time-shares its core steps to another CPU,
// once per interval, and a short preemption or the first sample does not make it move.
#include "emulator/host/core_step.hpp"

#include <sched.h>

#include <catch2/catch.hpp>

#include "emulator/host/thread_pause.hpp"

using softrdma::core::Time;
using softrdma::host::CoreStep;
using softrdma::host::ThreadPause;

TEST_CASE("a poller kept off its core for a scheduler slice steps, once per interval", "[core-step]") {
  CoreStep step;
  const Time start = 1'000'000'000;
  CHECK(step.shared(start, 1'400'000));  // a 1.4 ms slice of another thread
  CHECK_FALSE(step.shared(start + 10'000'000, 1'400'000));
  CHECK_FALSE(step.shared(start + CoreStep::kStepInterval - 1, 1'400'000));
  CHECK(step.shared(start + CoreStep::kStepInterval, 1'400'000));
}

TEST_CASE("a wake-up's preemption does not make a poller step", "[core-step]") {
  CoreStep step;
  CHECK_FALSE(step.shared(1'000'000'000, 0));
  CHECK_FALSE(step.shared(1'000'000'000, 20'000));  // a progress thread's pass
  CHECK_FALSE(step.shared(1'000'000'000, CoreStep::kSharedOffCore - 1));
  CHECK(step.shared(1'000'000'000, CoreStep::kSharedOffCore));
}

TEST_CASE("ThreadPause's first sample reports no time off the core", "[core-step]") {
  // Before its first sample there is nothing to measure from: the thread's whole CPU time
  // against the steady clock since boot would read as a long preemption.
  ThreadPause pause;
  for (std::uint32_t i = 1; i < ThreadPause::kSampleEvery; ++i) CHECK(pause.call(1'000'000'000 + i) == 0);
  CHECK(pause.call(1'000'000'000 + ThreadPause::kSampleEvery) == 0);
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
