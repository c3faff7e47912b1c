// rpoll and rselect (rsocket(7)): readiness of rsockets and of ordinary fds in one call. An
// rsocket's readiness is computed from its state after making progress on it (POLLIN: data,
// a connection request, or the end of the stream; POLLOUT: rsend would not wait; POLLHUP,
// POLLERR); ordinary fds are asked with poll(). To wait, each rsocket contributes the fds of
// its completion channel (armed CQ) and event channel to one poll(), after a short spin.
#include <poll.h>
#include <sys/select.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <vector>

#include "verbs-shim/rdmacm/rsocket_state.hpp"

namespace softrdma::rsockets {
namespace {

// The longest one poll() lasts before every rsocket is looked at again: a completion event
// another thread took must not leave this one asleep.
constexpr int kWakeMs = 100;

bool readable_now(int fd) {
  pollfd p{fd, POLLIN, 0};
  return ::poll(&p, 1, 0) > 0 && (p.revents & POLLIN);
}

short revents_of(Rsocket& s, short events) {
  progress(s);
  short r = 0;
  switch (s.phase) {
    case Phase::listening:
      if ((events & POLLIN) && readable_now(s.channel->fd)) r |= POLLIN;  // a request for raccept
      return r;
    case Phase::connect_error:
      return static_cast<short>((events & (POLLIN | POLLOUT)) | POLLERR);
    case Phase::connected:
    case Phase::disconnected:
    case Phase::error:
      if ((events & POLLIN) && (!s.rmsg.empty() || !s.readable)) r |= POLLIN;
      if ((events & POLLOUT) && can_send(s)) r |= POLLOUT;
      // The end shows once what came before it is read, as after a TCP peer's FIN (rdma-core
      // says POLLHUP at once, and a reader that stops at POLLHUP loses the last bytes).
      if (s.phase == Phase::disconnected && (!(events & POLLIN) || s.rmsg.empty())) r |= POLLHUP;
      if (s.phase == Phase::error) r |= POLLERR;
      return r;
    default:  // idle, bound, opening: nothing yet
      return 0;
  }
}

struct Entry {
  Ptr socket;  // null: an ordinary fd
};

// Looks at every fd once; the number with events.
int check(pollfd* fds, nfds_t nfds, const std::vector<Entry>& entries) {
  std::vector<pollfd> plain;
  std::vector<nfds_t> where;
  int ready = 0;
  for (nfds_t i = 0; i < nfds; ++i) {
    fds[i].revents = 0;
    if (entries[i].socket) {
      std::lock_guard lock(entries[i].socket->mutex);
      fds[i].revents = revents_of(*entries[i].socket, fds[i].events);
      if (fds[i].revents) ++ready;
    } else if (fds[i].fd >= 0) {
      plain.push_back({fds[i].fd, fds[i].events, 0});
      where.push_back(i);
    }
  }
  if (!plain.empty() && ::poll(plain.data(), plain.size(), 0) > 0) {
    for (std::size_t k = 0; k < plain.size(); ++k) {
      fds[where[k]].revents = plain[k].revents;
      if (plain[k].revents) ++ready;
    }
  }
  return ready;
}

}  // namespace
}  // namespace softrdma::rsockets

using namespace softrdma::rsockets;

SRDMA_RDMACM_VERSION(rpoll, "RDMACM_1.0")
int srdma_rdmacm_rpoll(pollfd* fds, nfds_t nfds, int timeout) {
  if (nfds > 0 && fds == nullptr) return fail(EFAULT);
  using clock = std::chrono::steady_clock;
  const auto start = clock::now();
  const auto deadline = timeout < 0 ? clock::time_point::max() : start + std::chrono::milliseconds(timeout);
  std::vector<Entry> entries(nfds);
  for (nfds_t i = 0; i < nfds; ++i) entries[i].socket = fds[i].fd >= 0 ? find(fds[i].fd) : nullptr;

  // A short spin (rdma-core's polling_time) before anything sleeps.
  for (const auto spin_until = start + kSpin;;) {
    const int ready = check(fds, nfds, entries);
    if (ready != 0 || timeout == 0) return ready;
    if (clock::now() >= spin_until) break;
  }
  std::vector<pollfd> waits;
  std::vector<nfds_t> owner;
  for (;;) {
    waits.clear();
    owner.clear();
    for (nfds_t i = 0; i < nfds; ++i) {
      if (const Ptr& s = entries[i].socket) {
        std::lock_guard lock(s->mutex);
        // A listener's channel holds its requests until raccept: watched only for POLLIN.
        if (s->phase == Phase::listening && !(fds[i].events & POLLIN)) continue;
        arm(*s);
        int fd2[2];
        const int n = wait_fds(*s, fd2);
        for (int k = 0; k < n; ++k) {
          waits.push_back({fd2[k], POLLIN, 0});
          owner.push_back(i);
        }
      } else if (fds[i].fd >= 0) {
        waits.push_back({fds[i].fd, fds[i].events, 0});
        owner.push_back(i);
      }
    }
    // Armed now: anything that completed before is seen by this look, later ones wake poll().
    if (const int ready = check(fds, nfds, entries)) return ready;
    const auto now = clock::now();
    if (now >= deadline) return 0;
    int wait_ms = kWakeMs;
    if (deadline != clock::time_point::max()) {
      const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - now).count();
      wait_ms = static_cast<int>(std::min<long long>(left, kWakeMs));
    }
    if (::poll(waits.data(), waits.size(), wait_ms) < 0) return -1;  // EINTR as poll(2)
    for (std::size_t k = 0; k < waits.size(); ++k) {
      const Ptr& s = entries[owner[k]].socket;
      if (s && waits[k].revents) {
        std::lock_guard lock(s->mutex);
        take_cq_events(*s);
      }
    }
    if (const int ready = check(fds, nfds, entries)) return ready;
  }
}

SRDMA_RDMACM_VERSION(rselect, "RDMACM_1.0")
int srdma_rdmacm_rselect(int nfds, fd_set* readfds, fd_set* writefds, fd_set* exceptfds, timeval* timeout) {
  if (nfds < 0 || nfds > FD_SETSIZE) return fail(EINVAL);
  std::vector<pollfd> fds;
  for (int fd = 0; fd < nfds; ++fd) {
    short events = 0;
    const bool r = readfds != nullptr && FD_ISSET(fd, readfds);
    const bool w = writefds != nullptr && FD_ISSET(fd, writefds);
    const bool x = exceptfds != nullptr && FD_ISSET(fd, exceptfds);
    if (r) events |= POLLIN;
    if (w) events |= POLLOUT;
    if (x) events |= POLLPRI;
    if (r || w || x) fds.push_back({fd, events, 0});
  }
  int ms = -1;
  if (timeout != nullptr) {
    if (timeout->tv_sec < 0 || timeout->tv_usec < 0) return fail(EINVAL);
    ms = static_cast<int>(std::min<long long>(timeout->tv_sec * 1000LL + (timeout->tv_usec + 999) / 1000, 0x7FFFFFFF));
  }
  const int ret = rpoll(fds.data(), fds.size(), ms);
  if (ret < 0) return ret;
  if (readfds != nullptr) FD_ZERO(readfds);
  if (writefds != nullptr) FD_ZERO(writefds);
  if (exceptfds != nullptr) FD_ZERO(exceptfds);
  int count = 0;
  for (const pollfd& p : fds) {
    if (p.revents & POLLNVAL) return fail(EBADF);  // as select(2) on a closed descriptor
    if (readfds != nullptr && (p.revents & (POLLIN | POLLHUP | POLLERR)) && (p.events & POLLIN)) {
      FD_SET(p.fd, readfds);
      ++count;
    }
    if (writefds != nullptr && (p.revents & (POLLOUT | POLLERR)) && (p.events & POLLOUT)) {
      FD_SET(p.fd, writefds);
      ++count;
    }
    if (exceptfds != nullptr && (p.revents & POLLPRI) && (p.events & POLLPRI)) {
      FD_SET(p.fd, exceptfds);
      ++count;
    }
  }
  return count;
}
