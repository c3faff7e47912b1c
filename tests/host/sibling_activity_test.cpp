// SiblingActivity: the progress thread tells a process whose other threads run from one whose
// other threads sleep, by the process's CPU clock less its own.
#include "emulator/host/sibling_activity.hpp"

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <thread>

#include "emulator/host/host_clock.hpp"

using softrdma::core::Time;
using softrdma::host::SiblingActivity;

namespace {

// Measures once, waits `interval` (sleeping, so that the measuring thread's own time is
// nothing), and measures again.
bool busy_after(SiblingActivity& siblings, std::chrono::milliseconds interval) {
  siblings.busy(softrdma::host::steady_now());
  std::this_thread::sleep_for(interval);
  return siblings.busy(softrdma::host::steady_now());
}

// Another thread of this process, spinning until destroyed.
class Spinner {
 public:
  Spinner()
      : thread_([this] {
          while (!stop_.load(std::memory_order_relaxed)) {
          }
        }) {}
  ~Spinner() {
    stop_ = true;
    thread_.join();
  }

 private:
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace

TEST_CASE("a quarter of a CPU or more is busy", "[sibling-activity]") {
  CHECK(SiblingActivity::busy_share(250'000, 1'000'000));
  CHECK_FALSE(SiblingActivity::busy_share(249'999, 1'000'000));
  CHECK_FALSE(SiblingActivity::busy_share(0, 1'000'000));
  CHECK(SiblingActivity::busy_share(1'800'000, 1'000'000));  // two threads spinning
}

TEST_CASE("until it has measured an interval, the rest of the process counts as busy", "[sibling-activity]") {
  SiblingActivity siblings;
  CHECK(siblings.busy(softrdma::host::steady_now()));
}

TEST_CASE("another thread spinning makes the process busy, its sleeping does not", "[sibling-activity]") {
  SiblingActivity siblings;
  CHECK_FALSE(busy_after(siblings, std::chrono::milliseconds(25)));

  bool busy = false;
  {
    Spinner spinner;
    busy = busy_after(siblings, std::chrono::milliseconds(25));
  }
  CHECK(busy);
}

TEST_CASE("within an interval the last answer stands, without reading the clocks", "[sibling-activity]") {
  SiblingActivity siblings;
  REQUIRE_FALSE(busy_after(siblings, std::chrono::milliseconds(25)));
  const Time now = softrdma::host::steady_now();
  CHECK_FALSE(siblings.busy(now + SiblingActivity::kMeasureEvery - 1'000));
}

TEST_CASE("a thread spinning on another CPU without pause reads busy in nearly every interval", "[sibling-activity]") {
  // The process's clock has a thread running elsewhere only as of its last tick: an interval
  // shorter than a tick would often read it idle.
  int busy = 0;
  {
    Spinner spinner;
    SiblingActivity siblings;
    siblings.busy(softrdma::host::steady_now());
    for (int i = 0; i < 10; ++i) {
      std::this_thread::sleep_for(std::chrono::nanoseconds(SiblingActivity::kMeasureEvery) +
                                  std::chrono::milliseconds(1));
      busy += siblings.busy(softrdma::host::steady_now()) ? 1 : 0;
    }
  }
  CHECK(busy >= 8);
}
