// One rsocket (rsocket(7): a stream socket over an RC QP) and the functions the rsocket files
// share. The library runs no thread of its own for rsockets: every call makes progress on the
// socket it is given (CM events, completions, credits), as rdma-core's does, and a blocking
// call waits on the CQ's completion channel and the ID's event channel.
//
// Data path (rsocket_wire.hpp): each side offers the other its receive buffer in halves; the
// sender RDMA-WRITEs WITH IMMEDIATE into the current half, the immediate data saying how many
// bytes (on iWARP, which has no immediate data, a WRITE and then a SEND carrying the same 32
// bits, as rdma-core's rsockets do there); the receiver reads them in order and, as it frees
// half a buffer, offers that half again by writing an SGE into the sender's target SGL (op
// sgl), which also grants credits: a sequence number up to which the sender may send messages.
#pragma once

#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <deque>
#include <list>
#include <memory>
#include <mutex>
#include <vector>

#include "verbs-shim/rdmacm/rdmacm_api.hpp"
#include "verbs-shim/rdmacm/rsocket_wire.hpp"

namespace softrdma::rsockets {

// rdma-core's defaults (rsocket(7)'s configuration files are not read).
inline constexpr std::uint32_t kDefaultBuffer = 1 << 17;  // SO_SNDBUF / SO_RCVBUF, bytes
inline constexpr std::uint16_t kDefaultQueue = 384;       // send and receive queue entries
inline constexpr std::uint16_t kDefaultInline = 64;       // bytes sent inline
inline constexpr std::uint16_t kQueueMin = 16, kQueueMax = 0xFFFE;
inline constexpr std::uint32_t kSendLowWater = 2048;                         // POLLOUT needs this much send buffer
inline constexpr std::uint32_t kFirstTransfer = 2048, kMaxTransfer = 65536;  // per WRITE, growing
inline constexpr std::uint32_t kCtrlInline = 32;  // control messages are inline: at least an iomap entry
// The engine's limit for inline data (DeviceLimits::max_inline_data): a larger RDMA_INLINE
// would make the QP fail to create.
inline constexpr std::uint32_t kInlineLimit = 512;

// Work request ids: a receive; or a send, its message (op and argument) in the low 32 bits
// and the staging ring bytes it holds above them.
inline constexpr std::uint64_t kRecvTag = std::uint64_t{1} << 63;
inline constexpr std::uint64_t send_tag(std::uint32_t msg, std::uint32_t ring_bytes) {
  return msg | (std::uint64_t{ring_bytes} << 32);
}

enum class Phase : std::uint8_t {
  idle,
  bound,
  listening,
  resolving_addr,  // active open: rconnect's steps
  resolving_route,
  connecting,
  connected,      // also half-closed (see readable/writable); an accepted socket from raccept on
  disconnected,   // both directions closed, by us or by the peer
  connect_error,  // rconnect failed: SO_ERROR says why
  error,          // the QP failed
};

inline bool opening(Phase p) {
  return p == Phase::resolving_addr || p == Phase::resolving_route || p == Phase::connecting;
}

// A region of the peer's memory we may write: the current half of its receive buffer.
using Region = wire::Sge;

// riomap's mappings of our memory. index >= 0: offered to the peer, in its iomap table at
// that index (sent before the next data); -1: local only (PROT_NONE).
struct Mapping {
  void* addr = nullptr;
  std::size_t length = 0;
  ibv_mr* mr = nullptr;
  std::uint64_t offset = 0;
  int index = -1;
  bool sent = false;
};

struct Options {
  std::uint32_t sbuf_size = kDefaultBuffer;
  std::uint32_t rbuf_size = kDefaultBuffer;
  std::uint16_t sq_size = kDefaultQueue;
  std::uint16_t rq_size = kDefaultQueue;
  std::uint16_t sq_inline = kDefaultInline;
  std::uint16_t iomap_size = 0;  // entries of our iomap table the peer may fill (RDMA_IOMAPSIZE)
  // Flags kept for rgetsockopt, indexed by option name as rdma-core keeps them.
  std::uint64_t so_flags = 0, tcp_flags = 0, ipv6_flags = 0;
  int keepalive_time = 7200;
  std::vector<std::uint8_t> route;  // RDMA_ROUTE, as given
};

struct Rsocket {
  int fd = -1;  // the rsocket's number: the fd of its own event channel
  int domain = AF_INET;
  std::mutex mutex;  // everything below; released while a call waits
  Options opt;
  Phase phase = Phase::idle;
  bool readable = false, writable = false;  // the halves of a connected socket
  bool established = false;                 // our QP may send: the active side's REP is in, the RTU reached us
  int fd_flags = 0;                         // rfcntl's F_GETFL/F_SETFL (O_NONBLOCK)
  int err = 0;                              // SO_ERROR
  std::chrono::steady_clock::time_point connect_start{};

  rdma_event_channel* channel = nullptr;
  rdma_cm_id* id = nullptr;
  ibv_comp_channel* cq_channel = nullptr;
  ibv_cq* cq = nullptr;  // sends and receives
  bool armed = false;
  unsigned cq_events = 0;  // taken from the channel, not yet acknowledged

  // Our memory: the send staging ring, the receive buffer, and the target area (the SGL the
  // peer writes, then the iomap table).
  std::unique_ptr<std::uint8_t[]> sbuf, rbuf, target;
  ibv_mr* smr = nullptr;
  ibv_mr* rmr = nullptr;
  ibv_mr* tmr = nullptr;
  // iWARP: messages come in SENDs, each into the receive's slot of msg_slots.
  bool msg_send = false;
  std::unique_ptr<std::uint8_t[]> msg_slots;
  ibv_mr* mmr = nullptr;
  int next_slot = 0;  // the slot of the next receive posted

  // Sending.
  std::uint16_t sseq_no = 0, sseq_comp = 0;  // messages sent; the peer's limit
  std::deque<Region> regions;                // the peer's receive buffer halves, in order
  int next_entry = 1;                        // which target SGL entry the peer fills next
  wire::Sge remote_sgl;                      // the peer's target SGL (length: entries)
  int remote_sge = 1;                        // our next SGE goes to this entry of it
  wire::Sge remote_iomap;                    // the peer's iomap table (length: entries)
  bool peer_big = false;                     // write SGEs to the peer big-endian
  int sqe_avail = 0;                         // send queue entries for data (kCtrlSlots kept back)
  int ctrl_in_flight = 0;
  std::uint32_t sbuf_head = 0, sbuf_used = 0;  // the staging ring: next byte, bytes in flight

  // Receiving.
  std::uint16_t rseq_no = 0, rseq_comp = 0;  // messages consumed; when credits are due anyway
  std::deque<std::uint32_t> rmsg;            // lengths of the messages not read yet
  std::uint32_t rbuf_offset = 0;             // next byte to read
  std::uint32_t rbuf_bytes_avail = 0;        // read, not yet offered again
  std::uint32_t rbuf_free_offset = 0;        // the next half to offer

  std::vector<wire::Iomap> peer_maps;  // the peer's riomap entries (what it wrote in our table)
  std::list<Mapping> maps;             // ours
};

using Ptr = std::shared_ptr<Rsocket>;

// The fd table (rsocket_table.cpp).
Ptr find(int fd);
void insert(const Ptr& s);
void erase(int fd);

// Sets errno and returns -1.
int fail(int err);

// Endpoint (rsocket_endpoint.cpp): the CQ, QP, buffers and their registrations of a socket
// whose ID is bound to a device; 0 or an errno value.
int create_endpoint(Rsocket& s);
wire::ConnData conn_data(const Rsocket& s);
// Takes the peer's connection data: where to write, its credits, its byte order.
void save_conn_data(Rsocket& s, const wire::ConnData& peer);
// Frees everything; the socket has left the table.
void destroy(Rsocket& s);
// Moves the QP to ERR: posted receives flush, so a waiting rpoll wakes.
void flush_qp(Rsocket& s);
// Posts one receive (receives carry no buffer but a message slot on iWARP: the data is
// WRITTEN); 0 or an errno value.
int post_recv(Rsocket& s);

// Progress (rsocket_progress.cpp), the socket's mutex held.
void progress(Rsocket& s);
bool can_send(const Rsocket& s);
bool all_sends_done(const Rsocket& s);
// Waits until `ready` (or nonblocking: EWOULDBLOCK at once); 0 or an errno value. The lock is
// released while waiting.
template <class Ready>
int wait_until(Rsocket& s, std::unique_lock<std::mutex>& lock, bool nonblocking, Ready ready);
// Sleeps until the socket's fds say something happened (or a short while): the lock released.
void sleep_on(Rsocket& s, std::unique_lock<std::mutex>& lock);
// How long a blocking call polls before it sleeps (rdma-core's default polling_time).
inline constexpr auto kSpin = std::chrono::microseconds(10);
// The fds to wait on for this socket (a CQ channel, an event channel), and taking what
// their readiness brought.
int wait_fds(const Rsocket& s, int out[2]);
void arm(Rsocket& s);
void take_cq_events(Rsocket& s);
// Posts a control message (ctrl op or bare credits) as a zero-length WRITE WITH IMMEDIATE
// (iWARP: a SEND alone).
int post_ctrl(Rsocket& s, std::uint32_t msg);
// Posts a WRITE of `sge` to the peer, with the message `msg` for its receive when `imm`;
// wr_id tags the completion.
int post_write(Rsocket& s, ibv_sge* sge, int nsge, std::uint32_t msg, std::uint32_t ring_bytes, bool imm,
               bool inline_data, std::uint64_t remote_addr, std::uint32_t rkey);
// How many of `want` bytes the staging ring takes now, contiguous from its head.
std::uint32_t ring_space(const Rsocket& s, std::uint32_t want);
// A send's bytes, ready to post: inline (copied into `small`, which the verb copies again at
// post time) up to RDMA_INLINE bytes, else in the staging ring; `fill(to, n)` copies them.
// Filled in place: the SGE may point into the object itself.
struct Staged {
  ibv_sge sge{};
  std::uint32_t ring = 0;  // staging ring bytes held until the send completes
  bool inline_data = false;
  std::uint8_t small[kInlineLimit];
};
template <class Fill>
void stage(Rsocket& s, Staged& st, std::uint32_t want, Fill fill) {
  if (want <= std::min<std::uint32_t>(s.opt.sq_inline, kInlineLimit)) {
    fill(st.small, want);
    st.sge = {reinterpret_cast<std::uintptr_t>(st.small), want, 0};
    st.ring = 0;
    st.inline_data = true;
    return;
  }
  const std::uint32_t n = ring_space(s, want);
  std::uint8_t* at = s.sbuf.get() + s.sbuf_head;
  fill(at, n);
  st.sge = {reinterpret_cast<std::uintptr_t>(at), n, s.smr->lkey};
  st.ring = n;
  st.inline_data = false;
}
// Takes a posted send's staging bytes from the ring.
inline void commit(Rsocket& s, const Staged& st) {
  s.sbuf_head = (s.sbuf_head + st.ring) % s.opt.sbuf_size;
  s.sbuf_used += st.ring;
}

// Connection management (rsocket_connect.cpp): advances an opening socket and handles the
// CM events of a connected one, without waiting.
void handle_cm_events(Rsocket& s);

// Data (rsocket_data.cpp): finishes an rconnect in progress (waiting unless `nonblocking`);
// 0 once the socket is or was connected, else an errno value (EAGAIN, ENOTCONN).
int settle_open(Rsocket& s, std::unique_lock<std::mutex>& lock, bool nonblocking);
// Why nothing more may be sent: EPIPE after our SHUT_WR, ECONNRESET at the connection's end; 0.
int send_closed(const Rsocket& s);

// Closes and frees the socket `fd` (rsocket.cpp); 0, or -1 with errno EBADF.
int close_socket(int fd);

// iomap (rsocket_iomap.cpp): sends the queued riomap entries before data; 0 or an errno value.
int send_iomaps(Rsocket& s, std::unique_lock<std::mutex>& lock, bool nonblocking);
bool iomaps_pending(const Rsocket& s);

template <class Ready>
int wait_until(Rsocket& s, std::unique_lock<std::mutex>& lock, bool nonblocking, Ready ready) {
  for (;;) {
    progress(s);
    if (ready()) return 0;
    if (nonblocking) return EWOULDBLOCK;
    // A short spin first: the engine's progress thread often answers within microseconds.
    for (const auto until = std::chrono::steady_clock::now() + kSpin; std::chrono::steady_clock::now() < until;) {
      progress(s);
      if (ready()) return 0;
    }
    arm(s);
    progress(s);  // what completed before the CQ was armed raises no event
    if (ready()) return 0;
    sleep_on(s, lock);
  }
}

}  // namespace softrdma::rsockets
