// The data path of a connected rsocket: rsend and the calls built on it write the caller's
// bytes into the peer's receive buffer (RDMA WRITE WITH IMMEDIATE, the immediate data saying
// how many: op data); rrecv and its kin copy out of our receive buffer, in order, what the
// peer's writes announced. Sends are staged in the send ring (or sent inline) so that the
// caller's buffer is free when rsend returns, and each WRITE grows from 2 KiB to 64 KiB
// within one call, so that the first bytes leave while the rest is copied.
#include <fcntl.h>
#include <sys/uio.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>

#include "verbs-shim/rdmacm/rsocket_state.hpp"

namespace softrdma::rsockets {
namespace {

// Walks an iovec array, copying from or into it.
class Cursor {
 public:
  Cursor(const iovec* iov, int count) : iov_(iov), count_(count) {}
  void to(std::uint8_t* dst, std::size_t n) {  // from the iovecs into dst
    walk(n, [&dst](std::uint8_t* p, std::size_t k) {
      std::memcpy(dst, p, k);
      dst += k;
    });
  }
  void from(const std::uint8_t* src, std::size_t n) {  // from src into the iovecs
    walk(n, [&src](std::uint8_t* p, std::size_t k) {
      std::memcpy(p, src, k);
      src += k;
    });
  }

 private:
  template <class F>
  void walk(std::size_t n, F f) {
    while (n > 0 && index_ < count_) {
      const std::size_t k = std::min(n, iov_[index_].iov_len - offset_);
      f(static_cast<std::uint8_t*>(iov_[index_].iov_base) + offset_, k);
      n -= k;
      offset_ += k;
      if (offset_ == iov_[index_].iov_len) {
        ++index_;
        offset_ = 0;
      }
    }
  }
  const iovec* iov_;
  int count_;
  int index_ = 0;
  std::size_t offset_ = 0;
};

// 0, or an errno value: EINVAL for a bad array; the total is capped at SSIZE_MAX.
int total_of(const iovec* iov, int count, std::size_t& total) {
  if (count < 0 || (count > 0 && iov == nullptr)) return EINVAL;
  total = 0;
  for (int i = 0; i < count; ++i) {
    if (iov[i].iov_len > static_cast<std::size_t>(SSIZE_MAX) - total) return EINVAL;
    total += iov[i].iov_len;
  }
  return 0;
}

bool nonblocking(const Rsocket& s, int flags) { return (s.fd_flags & O_NONBLOCK) || (flags & MSG_DONTWAIT); }

}  // namespace

int settle_open(Rsocket& s, std::unique_lock<std::mutex>& lock, bool nb) {
  if (opening(s.phase)) wait_until(s, lock, nb, [&s] { return !opening(s.phase); });
  switch (s.phase) {
    case Phase::resolving_addr:
    case Phase::resolving_route:
    case Phase::connecting:
      return EAGAIN;
    case Phase::connected:
    case Phase::disconnected:
    case Phase::error:
      return 0;
    default:
      return ENOTCONN;
  }
}

int send_closed(const Rsocket& s) {
  if (s.phase == Phase::connected) return s.writable ? 0 : EPIPE;
  return ECONNRESET;
}

namespace {

ssize_t send_iov(int fd, const iovec* iov, int count, int flags) {
  const Ptr p = find(fd);
  if (!p) return fail(EBADF);
  if (flags & MSG_OOB) return fail(EOPNOTSUPP);
  std::size_t total = 0;
  if (const int err = total_of(iov, count, total)) return fail(err);
  Rsocket& s = *p;
  std::unique_lock lock(s.mutex);
  const bool nb = nonblocking(s, flags);
  if (const int err = settle_open(s, lock, nb)) return fail(err);
  if (const int err = send_closed(s)) return fail(err);
  if (iomaps_pending(s)) {
    if (const int err = send_iomaps(s, lock, nb)) return fail(err);
  }
  Cursor cursor(iov, count);
  std::size_t sent = 0;
  std::uint32_t grow = kFirstTransfer;
  int err = 0;
  while (sent < total) {
    if (!can_send(s)) {
      err = wait_until(s, lock, nb, [&s] { return can_send(s) || send_closed(s) != 0; });
      if (err == 0 && !can_send(s)) err = send_closed(s);
      if (err != 0) break;
    }
    const std::size_t left = total - sent;
    std::uint32_t xfer = static_cast<std::uint32_t>(std::min<std::size_t>(left, grow));
    if (grow < left && grow < kMaxTransfer) grow <<= 1;
    Region& region = s.regions.front();
    xfer = std::min(xfer, region.length);
    Staged staged;
    stage(s, staged, xfer, [&cursor](std::uint8_t* to, std::size_t n) { cursor.to(to, n); });
    xfer = staged.sge.length;
    const std::uint32_t msg = wire::message(wire::Op::data, xfer);
    if (post_write(s, &staged.sge, 1, msg, staged.ring, true, staged.inline_data, region.addr, region.key) != 0) {
      err = EIO;  // the bytes were taken from the caller: report what went before
      break;
    }
    commit(s, staged);
    region.addr += xfer;
    region.length -= xfer;
    if (region.length == 0) s.regions.pop_front();
    ++s.sseq_no;
    --s.sqe_avail;
    sent += xfer;
  }
  if (sent > 0 || total == 0) return static_cast<ssize_t>(sent);
  return fail(err);
}

// Copies what `rmsg` announces out of the receive buffer, consuming it unless peeking.
std::size_t copy_out(Rsocket& s, Cursor& cursor, std::size_t want, bool peek) {
  const std::uint32_t size = s.opt.rbuf_size;
  std::uint32_t offset = s.rbuf_offset;
  std::size_t got = 0;
  for (std::size_t i = 0; got < want && i < s.rmsg.size();) {
    const std::uint32_t n = static_cast<std::uint32_t>(std::min<std::size_t>(want - got, s.rmsg[i]));
    const std::uint32_t first = std::min(n, size - offset);  // a message never wraps; be safe
    cursor.from(s.rbuf.get() + offset, first);
    cursor.from(s.rbuf.get(), n - first);
    offset = (offset + n) % size;
    got += n;
    if (peek) {
      ++i;
      continue;
    }
    s.rbuf_bytes_avail += n;
    s.rmsg.front() -= n;
    if (s.rmsg.front() == 0) {
      s.rmsg.pop_front();
      ++s.rseq_no;
    }
  }
  if (!peek) s.rbuf_offset = offset;
  return got;
}

ssize_t recv_iov(int fd, const iovec* iov, int count, int flags) {
  const Ptr p = find(fd);
  if (!p) return fail(EBADF);
  if (flags & MSG_OOB) return fail(EOPNOTSUPP);
  std::size_t total = 0;
  if (const int err = total_of(iov, count, total)) return fail(err);
  Rsocket& s = *p;
  std::unique_lock lock(s.mutex);
  const bool nb = nonblocking(s, flags);
  if (const int err = settle_open(s, lock, nb)) return fail(err);
  const bool peek = (flags & MSG_PEEK) != 0;
  Cursor cursor(iov, count);
  std::size_t got = 0;
  int err = 0;
  do {
    progress(s);
    if (s.rmsg.empty()) {
      // Queued data is read even after the peer has gone; then end of file.
      const auto more = [&s] { return !s.rmsg.empty() || !s.readable || s.phase != Phase::connected; };
      err = wait_until(s, lock, nb, more);
      if (err != 0 || s.rmsg.empty()) break;
    }
    got += copy_out(s, cursor, total - got, peek);
  } while (got < total && (flags & MSG_WAITALL) && !peek);
  progress(s);  // credits for what was read
  if (got > 0 || total == 0) return static_cast<ssize_t>(got);
  if (err != 0) return fail(err);
  if (s.phase == Phase::error) return fail(ECONNRESET);
  return 0;  // end of file
}

}  // namespace
}  // namespace softrdma::rsockets

using namespace softrdma::rsockets;

SRDMA_RDMACM_VERSION(rsend, "RDMACM_1.0")
ssize_t srdma_rdmacm_rsend(int socket, const void* buf, size_t len, int flags) {
  const iovec iov{const_cast<void*>(buf), len};
  return send_iov(socket, &iov, 1, flags);
}

SRDMA_RDMACM_VERSION(rsendto, "RDMACM_1.0")
ssize_t srdma_rdmacm_rsendto(int socket, const void* buf, size_t len, int flags, const sockaddr* dest_addr,
                             socklen_t addrlen) {
  if (dest_addr != nullptr || addrlen != 0) return find(socket) ? fail(EISCONN) : fail(EBADF);
  return rsend(socket, buf, len, flags);
}

SRDMA_RDMACM_VERSION(rsendmsg, "RDMACM_1.0")
ssize_t srdma_rdmacm_rsendmsg(int socket, const msghdr* msg, int flags) {
  if (msg == nullptr) return fail(EFAULT);
  if (msg->msg_control != nullptr && msg->msg_controllen != 0) return fail(EOPNOTSUPP);
  if (msg->msg_name != nullptr && msg->msg_namelen != 0) return find(socket) ? fail(EISCONN) : fail(EBADF);
  return send_iov(socket, msg->msg_iov, static_cast<int>(msg->msg_iovlen), flags);
}

SRDMA_RDMACM_VERSION(rwrite, "RDMACM_1.0")
ssize_t srdma_rdmacm_rwrite(int socket, const void* buf, size_t count) { return rsend(socket, buf, count, 0); }

SRDMA_RDMACM_VERSION(rwritev, "RDMACM_1.0")
ssize_t srdma_rdmacm_rwritev(int socket, const iovec* iov, int iovcnt) { return send_iov(socket, iov, iovcnt, 0); }

SRDMA_RDMACM_VERSION(rrecv, "RDMACM_1.0")
ssize_t srdma_rdmacm_rrecv(int socket, void* buf, size_t len, int flags) {
  const iovec iov{buf, len};
  return recv_iov(socket, &iov, 1, flags);
}

SRDMA_RDMACM_VERSION(rrecvfrom, "RDMACM_1.0")
ssize_t srdma_rdmacm_rrecvfrom(int socket, void* buf, size_t len, int flags, sockaddr* src_addr, socklen_t* addrlen) {
  const ssize_t n = rrecv(socket, buf, len, flags);
  if (n > 0 && src_addr != nullptr && addrlen != nullptr) {
    const int saved = errno;
    rgetpeername(socket, src_addr, addrlen);
    errno = saved;
  }
  return n;
}

SRDMA_RDMACM_VERSION(rrecvmsg, "RDMACM_1.0")
ssize_t srdma_rdmacm_rrecvmsg(int socket, msghdr* msg, int flags) {
  if (msg == nullptr) return fail(EFAULT);
  if (msg->msg_control != nullptr && msg->msg_controllen != 0) return fail(EOPNOTSUPP);
  const ssize_t n = recv_iov(socket, msg->msg_iov, static_cast<int>(msg->msg_iovlen), flags);
  if (n >= 0) {
    msg->msg_flags = 0;
    if (msg->msg_name != nullptr) {
      socklen_t len = msg->msg_namelen;
      if (rgetpeername(socket, static_cast<sockaddr*>(msg->msg_name), &len) == 0) msg->msg_namelen = len;
    }
  }
  return n;
}

SRDMA_RDMACM_VERSION(rread, "RDMACM_1.0")
ssize_t srdma_rdmacm_rread(int socket, void* buf, size_t count) { return rrecv(socket, buf, count, 0); }

SRDMA_RDMACM_VERSION(rreadv, "RDMACM_1.0")
ssize_t srdma_rdmacm_rreadv(int socket, const iovec* iov, int iovcnt) { return recv_iov(socket, iov, iovcnt, 0); }
