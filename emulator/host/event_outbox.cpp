#include "emulator/host/event_outbox.hpp"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <vector>

namespace softrdma::host {
namespace {

enum class Sent : std::uint8_t { yes, no_room };

// A socket whose client is gone (EPIPE, ECONNRESET) counts as sent: its connection's end frees
// everything, and there is no one left to tell.
Sent try_send(int fd, std::span<const std::uint8_t> message) {
  const ssize_t n = ::send(fd, message.data(), message.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
  return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == ENOBUFS) ? Sent::no_room : Sent::yes;
}

void kick(int fd) {
  const std::uint64_t one = 1;
  if (::write(fd, &one, sizeof one) < 0) {
    // An eventfd write fails only when its counter would overflow: a wake-up is pending anyway.
  }
}

}  // namespace

EventOutbox::EventOutbox() : wake_fd_(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {
  if (wake_fd_ >= 0) thread_ = std::thread([this] { run(); });
}

EventOutbox::~EventOutbox() {
  if (wake_fd_ < 0) return;
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  kick(wake_fd_);
  thread_.join();
  ::close(wake_fd_);
}

void EventOutbox::send(int fd, std::span<const std::uint8_t> message) {
  std::lock_guard lock(mutex_);
  auto it = waiting_.find(fd);  // a socket listed here has events waiting (send_waiting drops empty ones)
  if (it == waiting_.end()) {
    if (try_send(fd, message) == Sent::yes) return;
    it = waiting_.try_emplace(fd).first;
  }
  auto& queue = it->second;
  if (queue.size() >= kMaxWaiting) {
    if (dropped_++ == 0) std::fprintf(stderr, "softrdmad: a client reads no events; its newest are dropped\n");
    return;
  }
  queue.emplace_back(message.begin(), message.end());
  if (queue.size() == 1) kick(wake_fd_);  // the thread polls this socket from now on
}

void EventOutbox::forget(int fd) {
  std::lock_guard lock(mutex_);
  waiting_.erase(fd);
}

std::size_t EventOutbox::waiting_total() {
  std::lock_guard lock(mutex_);
  std::size_t n = 0;
  for (const auto& [fd, queue] : waiting_) n += queue.size();
  return n;
}

std::uint64_t EventOutbox::dropped() {
  std::lock_guard lock(mutex_);
  return dropped_;
}

void EventOutbox::send_waiting() {
  for (auto it = waiting_.begin(); it != waiting_.end();) {
    auto& queue = it->second;
    while (!queue.empty() && try_send(it->first, queue.front()) == Sent::yes) queue.pop_front();
    it = queue.empty() ? waiting_.erase(it) : std::next(it);
  }
}

void EventOutbox::run() {
  std::vector<pollfd> fds;
  for (;;) {
    fds.assign(1, {wake_fd_, POLLIN, 0});
    {
      std::lock_guard lock(mutex_);
      if (stopping_) return;
      for (const auto& [fd, queue] : waiting_) fds.push_back({fd, POLLOUT, 0});
    }
    // A socket forgotten (and closed) meanwhile reports POLLNVAL or, reused, a spurious
    // readiness: either only makes this loop look again.
    if (::poll(fds.data(), fds.size(), -1) < 0 && errno != EINTR) return;
    std::uint64_t kicks = 0;
    if (::read(wake_fd_, &kicks, sizeof kicks) < 0) {
      // EAGAIN: woken by a socket, not by a kick.
    }
    std::lock_guard lock(mutex_);
    if (stopping_) return;
    send_waiting();
  }
}

}  // namespace softrdma::host
