// How the progress thread sleeps on the socket, and how other threads wake it.
//
// The thread sleeps in ppoll() on the socket, an eventfd and a timerfd. A thread that changes
// something the socket cannot signal (packets left to send, a lease ended) calls kick(); one
// that sets a deadline earlier than the sleeper's wake-up calls ring_at(), which wakes it at
// that deadline rather than now (a kick puts the sleeper on the caller's core at once, ahead of
// the caller).
// The eventfd is written only while the thread sleeps, so a verbs call costs no system call
// while the thread is awake or spinning. No kick is lost: kick() sets `work_` before it
// reads `sleeping_`, and the thread sets `sleeping_` before it reads `work_` (both
// sequentially consistent), so at least one of them sees the other's store.
#pragma once

#include <atomic>
#include <cstdint>

namespace softrdma::host {

class Doorbell {
 public:
  Doorbell();  // check error() before use
  Doorbell(const Doorbell&) = delete;
  Doorbell& operator=(const Doorbell&) = delete;
  ~Doorbell();

  int error() const { return error_; }  // the errno of eventfd() or timerfd_create(), or 0
  // The eventfd: a write to it from anywhere (another process holding a copy) wakes a sleep().
  int fd() const { return eventfd_; }

  // Any thread: the progress thread has work to do; wakes it if it sleeps.
  void kick();
  // One thread at a time: a sleep() ends by `steady_ns` (std::chrono::steady_clock, which is
  // CLOCK_MONOTONIC), replacing the time an earlier call set; 0 cancels it. Whether it worked.
  bool ring_at(std::uint64_t steady_ns);

  // The progress thread: sleeps until `fd` has one of the poll `events` (POLLIN, POLLOUT; 0:
  // ignore it), `readable` (-1: none) is readable, a kick, the timer (ring_at) or `timeout_ns`
  // nanoseconds (negative: no limit). Returns at once after a kick that came since the last
  // call. Whether a kick, the timer or a descriptor ended it (false: the timeout).
  bool sleep(int fd, short events, int readable, std::int64_t timeout_ns);
  // The same without sleeping: whether there is a kick or a descriptor is ready now.
  bool ready_now(int fd, short events, int readable);

 private:
  bool wait(int fd, short events, int readable, std::int64_t timeout_ns);

  int eventfd_ = -1;
  int timerfd_ = -1;
  int error_ = 0;
  std::atomic<bool> sleeping_{false};
  std::atomic<bool> work_{false};
};

}  // namespace softrdma::host
