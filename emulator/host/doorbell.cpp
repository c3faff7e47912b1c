#include "emulator/host/doorbell.hpp"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include <cerrno>
#include <ctime>

#include "emulator/host/host_clock.hpp"

namespace softrdma::host {
namespace {

// An eventfd's or a timerfd's read returns its count and resets it to 0.
void reset_count(int fd) {
  std::uint64_t count = 0;
  [[maybe_unused]] const ssize_t n = read(fd, &count, sizeof count);
}

}  // namespace

Doorbell::Doorbell()
    : eventfd_(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)),
      timerfd_(timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC)) {
  if (eventfd_ < 0 || timerfd_ < 0) error_ = errno;
}

Doorbell::~Doorbell() {
  if (eventfd_ >= 0) close(eventfd_);
  if (timerfd_ >= 0) close(timerfd_);
}

void Doorbell::kick() {
  // A kick that found work_ set adds nothing: the sleeper has not yet looked since the one that
  // set it, and when it does, it sees this kick's cause too.
  if (work_.exchange(true)) return;
  if (sleeping_.load()) {
    const std::uint64_t one = 1;
    [[maybe_unused]] const ssize_t n =
        write(eventfd_, &one, sizeof one);  // fails only when the count would overflow: it is rung already
  }
}

bool Doorbell::ring_at(std::uint64_t steady_ns) {
  itimerspec at{};
  at.it_value = to_timespec(steady_ns);
  return timerfd_settime(timerfd_, TFD_TIMER_ABSTIME, &at, nullptr) == 0;
}

bool Doorbell::sleep(int fd, short events, int readable, std::int64_t timeout_ns) {
  sleeping_.store(true);
  const bool ready = work_.load() || wait(fd, events, readable, timeout_ns);
  sleeping_.store(false);
  // A kick up to here counts: the caller's next step sees whatever it was for.
  const bool kicked = work_.exchange(false);
  return ready || kicked;
}

bool Doorbell::ready_now(int fd, short events, int readable) {
  return work_.exchange(false) || wait(fd, events, readable, 0);
}

bool Doorbell::wait(int fd, short events, int readable, std::int64_t timeout_ns) {
  // ppoll skips an entry with a negative descriptor.
  pollfd fds[4] = {{fd, events, 0}, {eventfd_, POLLIN, 0}, {readable, POLLIN, 0}, {timerfd_, POLLIN, 0}};
  const timespec limit = to_timespec(static_cast<std::uint64_t>(timeout_ns < 0 ? 0 : timeout_ns));
  const int n = ppoll(fds, 4, timeout_ns < 0 ? nullptr : &limit, nullptr);
  if (n <= 0) return false;
  if (fds[1].revents & POLLIN) reset_count(eventfd_);
  if (fds[3].revents & POLLIN) reset_count(timerfd_);
  return true;
}

}  // namespace softrdma::host
