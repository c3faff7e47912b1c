// A mutex whose busy-polling waiters may spin a little before they sleep.
//
// The embedded host's lock is held for microseconds at a time, by the progress thread or an
// application thread. A std::mutex puts a waiter to sleep at once: the holder's unlock then has
// to wake it, and on a machine with as many busy threads as cores the woken application thread
// waits for a core (perf sched showed ib_write_lat's threads switching thousands of times a
// second on the host lock). Where threads spin anyway, a waiter takes the lock with
// spin_lock(), spinning for about as long as a step holds it. lock() sleeps at once: beside
// programs asleep on completion events, a spinning waiter takes the core a woken thread needs.
#pragma once

#include <atomic>
#include <mutex>

#include "emulator/host/host_clock.hpp"

namespace softrdma::host {

class SpinningMutex {
 public:
  static constexpr core::Time kSpinNs = 10'000;

  void lock() { mutex_.lock(); }
  bool try_lock() { return mutex_.try_lock(); }
  void unlock() { mutex_.unlock(); }
  // Tries for kSpinNs before it sleeps as lock() does.
  void spin_lock() {
    if (mutex_.try_lock()) return;
    const core::Time until = steady_now() + kSpinNs;
    do {
      for (int i = 0; i < 16; ++i) __builtin_ia32_pause();
      if (mutex_.try_lock()) return;
    } while (steady_now() < until);
    mutex_.lock();
  }
  // spin_lock() where the application's threads spin anyway, lock() where they sleep.
  std::unique_lock<SpinningMutex> lock_for(bool application_spins) {
    if (!application_spins) return std::unique_lock(*this);
    spin_lock();
    return std::unique_lock(*this, std::adopt_lock);
  }

 private:
  std::mutex mutex_;
};

// Whether the application sleeps on completion events: it armed a CQ within kWindow.
class CqArming {
 public:
  static constexpr core::Time kWindow = 1'000'000;  // ns

  void armed(core::Time now) { last_.store(now, std::memory_order_relaxed); }
  bool lately(core::Time now) const { return now < last_.load(std::memory_order_relaxed) + kWindow; }

 private:
  std::atomic<core::Time> last_{0};
};

}  // namespace softrdma::host
