// SpinningMutex: a spin_lock() waiter whose holder lets go within the spin takes the lock
// without sleeping, and one whose holder keeps it sleeps rather than spin on; lock() sleeps at
// once. The thread's own context switch count and CPU time tell (getrusage RUSAGE_THREAD).
// CqArming: how long an armed CQ says the application sleeps on completion events.
#include "emulator/host/spinning_mutex.hpp"

#include <sys/resource.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <thread>

using softrdma::host::CqArming;
using softrdma::host::SpinningMutex;
using softrdma::host::steady_now;
using namespace std::chrono_literals;

namespace {

rusage thread_usage() {
  rusage u{};
  getrusage(RUSAGE_THREAD, &u);
  return u;
}

double cpu_seconds(const rusage& u) {
  const auto s = [](const timeval& t) { return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) / 1e6; };
  return s(u.ru_utime) + s(u.ru_stime);
}

// The holder takes the lock, signals, and keeps it for `hold_ns` of busy work; the caller's
// thread then waits for it, with spin_lock() or lock(). Returns the waiter's voluntary context
// switches while it waited.
long voluntary_switches_waiting(std::uint64_t hold_ns, bool spin) {
  SpinningMutex m;
  std::atomic<bool> held{false};
  std::thread holder([&] {
    m.lock();
    held.store(true);
    const std::uint64_t until = steady_now() + hold_ns;
    while (steady_now() < until) {
    }
    m.unlock();
  });
  while (!held.load()) {
  }
  const long before = thread_usage().ru_nvcsw;
  if (spin) {
    m.spin_lock();
  } else {
    m.lock();
  }
  const long switches = thread_usage().ru_nvcsw - before;
  m.unlock();
  holder.join();
  return switches;
}

}  // namespace

// Timed in microseconds against a second thread: an uninstrumented build, run alone.
TEST_CASE("a waiter whose holder lets go within the spin does not sleep", "[host][uninstrumented]") {
  // A holder the scheduler takes off its core for longer than the spin makes the waiter sleep
  // in some rounds; most must not (a std::mutex's waiter sleeps in every one).
  constexpr int kRounds = 50;
  int slept = 0;
  for (int round = 0; round < kRounds; ++round) slept += voluntary_switches_waiting(5'000, true) > 0 ? 1 : 0;
  CHECK(slept < kRounds / 2);
}

// The same rounds with lock(), which the host takes beside an application asleep on completion
// events: it sleeps at once, as std::mutex does.
TEST_CASE("a waiter that takes lock() sleeps though its holder lets go soon", "[host][uninstrumented]") {
  constexpr int kRounds = 50;
  int slept = 0;
  for (int round = 0; round < kRounds; ++round) slept += voluntary_switches_waiting(5'000, false) > 0 ? 1 : 0;
  CHECK(slept > kRounds / 2);
}

TEST_CASE("lock_for takes the lock whether the application spins or sleeps", "[host]") {
  SpinningMutex m;
  CqArming spins, sleeps;
  const std::uint64_t now = steady_now();
  sleeps.armed(now);
  for (const CqArming* arming : {&spins, &sleeps}) {
    std::unique_lock lock = m.lock_for(*arming, now);
    CHECK(lock.owns_lock());
    CHECK_FALSE(m.try_lock());
  }
  CHECK(m.try_lock());
  m.unlock();
}

TEST_CASE("an armed CQ says the application sleeps for a window, and not before it was armed", "[host]") {
  CqArming arming;
  const std::uint64_t t = 5'000'000'000;
  CHECK_FALSE(arming.lately(t));
  arming.armed(t);
  CHECK(arming.lately(t));
  CHECK(arming.lately(t + CqArming::kWindow - 1));
  CHECK_FALSE(arming.lately(t + CqArming::kWindow));
}

TEST_CASE("a waiter whose holder keeps the lock sleeps rather than spin", "[host]") {
  SpinningMutex m;
  std::atomic<bool> held{false};
  std::thread holder([&] {
    m.lock();
    held.store(true);
    std::this_thread::sleep_for(200ms);
    m.unlock();
  });
  while (!held.load()) {
  }
  const double cpu_before = cpu_seconds(thread_usage());
  m.spin_lock();
  const double cpu_spent = cpu_seconds(thread_usage()) - cpu_before;
  m.unlock();
  holder.join();
  CHECK(cpu_spent < 0.1);  // asleep for most of the 200 ms
}

TEST_CASE("a spinning mutex excludes: two threads' increments all count", "[host]") {
  SpinningMutex m;
  std::uint64_t count = 0;
  const auto add = [&] {
    for (int i = 0; i < 100'000; ++i) {
      std::lock_guard lock(m);
      ++count;
    }
  };
  std::thread other(add);
  add();
  other.join();
  CHECK(count == 200'000);
}
