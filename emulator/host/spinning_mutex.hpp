// A mutex whose busy-polling waiters may spin a little before they sleep.
//
// The embedded host's lock is held for microseconds at a time, by the progress thread or an
// application thread. A std::mutex puts a waiter to sleep at once: the holder's unlock then has
// to wake it, and on a machine with as many busy threads as cores the woken application thread
// waits for a core (perf sched showed ib_write_lat's threads switching thousands of times a
// second on the host lock). Where threads spin anyway, a waiter takes the lock with
// spin_lock(), spinning for about as long as a step holds it. lock() sleeps at once: beside
// programs asleep on completion events, a spinning waiter takes the core a woken thread needs.
// lock_for() chooses between them for an application's call (both hosts take their lock so).
#pragma once

#include <atomic>
#include <mutex>

#include "emulator/host/host_clock.hpp"

namespace softrdma::host {

// Whether the application sleeps on completion events: it armed a CQ within kWindow.
class CqArming {
 public:
  static constexpr core::Time kWindow = 1'000'000;  // ns

  void armed(core::Time now) { last_.store(now, std::memory_order_relaxed); }
  bool lately(core::Time now) const { return now < last_.load(std::memory_order_relaxed) + kWindow; }

 private:
  std::atomic<core::Time> last_{0};
};

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
  // For an application thread's call at `now`: spin_lock() where its threads spin anyway (a
  // thread asleep on the lock is woken onto whichever core the scheduler picks, often one its
  // busy-polling peer spins on), lock() where it armed a CQ lately and sleeps on its events.
  std::unique_lock<SpinningMutex> lock_for(const CqArming& arming, core::Time now) {
    if (arming.lately(now)) return std::unique_lock(*this);
    spin_lock();
    return std::unique_lock(*this, std::adopt_lock);
  }

 private:
  std::mutex mutex_;
};

}  // namespace softrdma::host
