// Direct data placement (rsocket(7): riomap, riounmap, riowrite). riomap registers a buffer;
// with PROT_WRITE it takes a free entry of the peer's iomap table (as many as the peer's
// RDMA_IOMAPSIZE) and the entry (offset, address, key, length) is written there with the
// next data, as an RDMA WRITE WITH IMMEDIATE of op iomap_sgl naming the index. riowrite
// writes into the buffer the peer mapped at an offset with a plain RDMA WRITE: the peer's
// application sees the bytes appear, and is not told (its rsocket does not even poll).
#include <fcntl.h>
#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "verbs-shim/rdmacm/rsocket_state.hpp"

namespace softrdma::rsockets {
namespace {

bool nonblocking(const Rsocket& s, int flags) { return (s.fd_flags & O_NONBLOCK) || (flags & MSG_DONTWAIT); }

// A free index of the peer's table, or -1.
int free_index(const Rsocket& s) {
  for (std::uint32_t i = 0; i < s.remote_iomap.length; ++i) {
    const bool used =
        std::any_of(s.maps.begin(), s.maps.end(), [i](const Mapping& m) { return m.index == static_cast<int>(i); });
    if (!used) return static_cast<int>(i);
  }
  return -1;
}

// The peer's mapping holding `offset`.
const wire::Iomap* peer_map(const Rsocket& s, std::uint64_t offset) {
  for (const wire::Iomap& m : s.peer_maps) {
    if (m.sge.length != 0 && offset >= m.offset && offset - m.offset < m.sge.length) return &m;
  }
  return nullptr;
}

// A direct write needs a send queue entry and staging room, not the peer's credits: it
// consumes no receive and no receive buffer of the peer's.
bool can_write(const Rsocket& s) {
  return s.phase == Phase::connected && s.established && s.sqe_avail > 0 &&
         s.opt.sbuf_size - s.sbuf_used >= std::min(kSendLowWater, s.opt.sbuf_size);
}

}  // namespace

bool iomaps_pending(const Rsocket& s) {
  return std::any_of(s.maps.begin(), s.maps.end(), [](const Mapping& m) { return m.index >= 0 && !m.sent; });
}

int send_iomaps(Rsocket& s, std::unique_lock<std::mutex>& lock, bool nb) {
  for (Mapping& m : s.maps) {
    if (m.index < 0 || m.sent) continue;
    if (!can_send(s)) {
      const int err = wait_until(s, lock, nb, [&s] { return can_send(s) || send_closed(s) != 0; });
      if (err != 0) return err;
      if (!can_send(s)) return send_closed(s);
    }
    std::uint8_t entry[wire::kIomapSize];
    const wire::Iomap iom{
        m.offset, {reinterpret_cast<std::uintptr_t>(m.mr->addr), m.mr->rkey, static_cast<std::uint32_t>(m.mr->length)}};
    wire::emit_iomap(iom, s.peer_big, std::span<std::uint8_t, wire::kIomapSize>(entry));
    ibv_sge sge{reinterpret_cast<std::uintptr_t>(entry), wire::kIomapSize, 0};
    const std::uint64_t where =
        s.remote_iomap.addr + std::uint64_t{wire::kIomapSize} * static_cast<std::uint32_t>(m.index);
    const std::uint32_t msg = wire::message(wire::Op::iomap_sgl, static_cast<std::uint32_t>(m.index));
    if (post_write(s, &sge, 1, msg, 0, true, true, where, s.remote_iomap.key) != 0) return EIO;
    // It is a message like data: it takes a credit and a queue entry.
    ++s.sseq_no;
    --s.sqe_avail;
    m.sent = true;
  }
  return 0;
}

}  // namespace softrdma::rsockets

using namespace softrdma::rsockets;

SRDMA_RDMACM_VERSION(riomap, "RDMACM_1.0")
off_t srdma_rdmacm_riomap(int socket, void* buf, size_t len, int prot, int, off_t offset) {
  const Ptr p = find(socket);
  if (!p) return fail(EBADF);
  if ((prot & ~PROT_WRITE) != 0 || buf == nullptr || len == 0) return fail(EINVAL);
  Rsocket& s = *p;
  std::lock_guard lock(s.mutex);
  if (s.id == nullptr || s.id->pd == nullptr) return fail(EINVAL);
  Mapping m;
  m.addr = buf;
  m.length = len;
  int access = IBV_ACCESS_LOCAL_WRITE;
  if (prot & PROT_WRITE) {
    m.index = free_index(s);
    if (m.index < 0) return fail(ENOMEM);  // the peer's table is full (or it offered none)
    access |= IBV_ACCESS_REMOTE_WRITE;
  }
  m.mr = ibv_reg_mr(s.id->pd, buf, len, access);
  if (m.mr == nullptr) return -1;
  m.offset = offset == -1 ? reinterpret_cast<std::uintptr_t>(buf) : static_cast<std::uint64_t>(offset);
  s.maps.push_back(m);
  return static_cast<off_t>(m.offset);
}

SRDMA_RDMACM_VERSION(riounmap, "RDMACM_1.0")
int srdma_rdmacm_riounmap(int socket, void* buf, size_t len) {
  const Ptr p = find(socket);
  if (!p) return fail(EBADF);
  Rsocket& s = *p;
  std::lock_guard lock(s.mutex);
  const auto it =
      std::find_if(s.maps.begin(), s.maps.end(), [&](const Mapping& m) { return m.addr == buf && m.length == len; });
  if (it == s.maps.end()) return fail(EINVAL);
  // The peer is not told (nor is it by rdma-core): its entry stays, and writes to it fail.
  ibv_dereg_mr(it->mr);
  s.maps.erase(it);
  return 0;
}

SRDMA_RDMACM_VERSION(riowrite, "RDMACM_1.0")
size_t srdma_rdmacm_riowrite(int socket, const void* buf, size_t count, off_t offset, int flags) {
  const auto failed = [](int err) { return static_cast<size_t>(fail(err)); };
  const Ptr p = find(socket);
  if (!p) return failed(EBADF);
  if (buf == nullptr && count != 0) return failed(EFAULT);
  Rsocket& s = *p;
  std::unique_lock lock(s.mutex);
  const bool nb = nonblocking(s, flags);
  if (const int err = settle_open(s, lock, nb)) return failed(err);
  if (const int err = send_closed(s)) return failed(err);
  if (iomaps_pending(s)) {
    if (const int err = send_iomaps(s, lock, nb)) return failed(err);
  }
  const auto* from = static_cast<const std::uint8_t*>(buf);
  std::size_t sent = 0;
  std::uint32_t grow = kFirstTransfer;
  int err = 0;
  while (sent < count) {
    const std::uint64_t at = static_cast<std::uint64_t>(offset) + sent;
    const wire::Iomap* m = peer_map(s, at);
    if (m == nullptr) {
      err = EINVAL;  // no buffer of the peer's is mapped there (yet)
      break;
    }
    const wire::Iomap target = *m;  // the table may change while we wait
    if (!can_write(s)) {
      err = wait_until(s, lock, nb, [&s] { return can_write(s) || send_closed(s) != 0; });
      if (err == 0 && !can_write(s)) err = send_closed(s) != 0 ? send_closed(s) : ECONNRESET;
      if (err != 0) break;
    }
    const std::size_t left = count - sent;
    std::uint32_t xfer = static_cast<std::uint32_t>(std::min<std::size_t>(left, grow));
    if (grow < left && grow < kMaxTransfer) grow <<= 1;
    xfer = static_cast<std::uint32_t>(std::min<std::uint64_t>(xfer, target.offset + target.sge.length - at));
    Staged staged;
    stage(s, staged, xfer, [from, sent](std::uint8_t* to, std::size_t n) { std::memcpy(to, from + sent, n); });
    xfer = staged.sge.length;
    const std::uint32_t msg = wire::message(wire::Op::write, xfer);  // tags the completion only
    if (post_write(s, &staged.sge, 1, msg, staged.ring, false, staged.inline_data,
                   target.sge.addr + (at - target.offset), target.sge.key) != 0) {
      err = EIO;
      break;
    }
    commit(s, staged);
    --s.sqe_avail;
    sent += xfer;
  }
  if (sent > 0 || count == 0) return sent;
  return failed(err);
}
