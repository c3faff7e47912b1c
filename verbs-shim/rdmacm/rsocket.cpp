// rsockets (rsocket(7)): stream sockets over RDMA, the 27 names of RDMACM_1.0 that rstream,
// riostream and rdma-core's librspreload.so call, speaking rdma-core's rsocket protocol so
// that either end may be rdma-core's library. The files, one job each: rsocket_wire.hpp (the
// protocol's layouts and numbers), rsocket_state.hpp (a socket), rsocket_table.cpp (socket
// numbers), rsocket_connect.cpp (rsocket, rbind, rlisten, raccept, rconnect, names),
// rsocket_endpoint.cpp (QP, CQ, buffers, connection data), rsocket_progress.cpp (completions,
// credits, waiting), rsocket_data.cpp (rsend/rrecv and kin), rsocket_poll.cpp (rpoll,
// rselect), rsocket_iomap.cpp (riomap, riounmap, riowrite), rsocket_options.cpp (options),
// and this one: shutting down and closing. SOCK_DGRAM rsockets are not implemented
// (EOPNOTSUPP from rsocket).
#include <cerrno>

#include "verbs-shim/rdmacm/rsocket_state.hpp"

namespace softrdma::rsockets {
namespace {

// Tells the peer we send no more (ctrl shutdown), or are gone (ctrl disconnect), and waits
// until what we sent has completed: rshutdown blocks, whatever O_NONBLOCK says, as
// rdma-core's does. A connection closed both ways then has its QP flushed.
int shutdown_locked(Rsocket& s, std::unique_lock<std::mutex>& lock, int how) {
  progress(s);
  if (s.phase != Phase::connected) {
    return s.phase == Phase::disconnected || s.phase == Phase::error ? 0 : ENOTCONN;
  }
  wire::Ctrl ctrl = wire::Ctrl::disconnect;
  if (how == SHUT_RDWR) {
    s.readable = s.writable = false;
  } else if (how == SHUT_WR) {
    s.writable = false;
    ctrl = s.readable ? wire::Ctrl::shutdown : wire::Ctrl::disconnect;
  } else {
    s.readable = false;
    if (s.writable) return 0;  // the peer may go on sending: it is not told
  }
  // An accepted socket sends nothing before its RTU.
  wait_until(s, lock, false, [&s] { return s.established || s.phase != Phase::connected; });
  wait_until(s, lock, false, [&s] { return s.ctrl_in_flight < wire::kCtrlSlots || s.phase != Phase::connected; });
  if (s.phase == Phase::connected) {
    if (post_ctrl(s, wire::message(wire::Op::ctrl, static_cast<std::uint32_t>(ctrl))) == 0) ++s.ctrl_in_flight;
  }
  wait_until(s, lock, false, [&s] { return all_sends_done(s); });
  if (s.phase == Phase::connected && !s.readable && !s.writable) s.phase = Phase::disconnected;
  if (s.phase != Phase::connected) flush_qp(s);  // posted receives flush: a waiting rpoll wakes
  return 0;
}

// A listener's requests nobody will take: refused, so that their clients hear a REJ.
void refuse_waiting(Rsocket& s) {
  if (s.phase != Phase::listening || s.channel == nullptr) return;
  rdma_cm_event* e = nullptr;
  while (rdma_get_cm_event(s.channel, &e) == 0) {
    rdma_cm_id* child = e->event == RDMA_CM_EVENT_CONNECT_REQUEST ? e->id : nullptr;
    rdma_ack_cm_event(e);
    if (child != nullptr) {
      rdma_reject(child, nullptr, 0);
      rdma_destroy_id(child);
    }
  }
}

}  // namespace

int close_socket(int fd) {
  const Ptr p = find(fd);
  if (!p) return fail(EBADF);
  erase(fd);  // the number is gone at once; calls already inside keep the socket alive
  Rsocket& s = *p;
  std::unique_lock lock(s.mutex);
  if (s.phase == Phase::connected) shutdown_locked(s, lock, SHUT_RDWR);
  refuse_waiting(s);
  destroy(s);
  return 0;
}

}  // namespace softrdma::rsockets

using namespace softrdma::rsockets;

SRDMA_RDMACM_VERSION(rshutdown, "RDMACM_1.0")
int srdma_rdmacm_rshutdown(int socket, int how) {
  const Ptr p = find(socket);
  if (!p) return fail(EBADF);
  if (how != SHUT_RD && how != SHUT_WR && how != SHUT_RDWR) return fail(EINVAL);
  std::unique_lock lock(p->mutex);
  const int err = shutdown_locked(*p, lock, how);
  return err == 0 ? 0 : fail(err);
}

// rdma-core's rclose returns EBADF itself for an unknown number; this one fails as close(2)
// does, -1 with errno EBADF.
SRDMA_RDMACM_VERSION(rclose, "RDMACM_1.0")
int srdma_rdmacm_rclose(int socket) { return close_socket(socket); }
