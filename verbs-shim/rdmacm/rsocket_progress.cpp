// What every rsocket call does before it looks at its socket: take the CM's events, reap the
// CQ (data and control messages in, the send queue and staging ring back), and give the peer
// credits and buffer space as the application reads. Waiting is here too: a short spin, then
// the CQ armed and poll() on its completion channel and on the ID's event channel.
#include <arpa/inet.h>
#include <poll.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <optional>
#include <thread>

#include "verbs-shim/rdmacm/rsocket_state.hpp"

namespace softrdma::rsockets {
namespace {

// The longest one sleep lasts: a notification another thread took must not strand us.
constexpr int kWakeMs = 100;

void break_connection(Rsocket& s, int err) {
  s.phase = Phase::error;
  s.readable = s.writable = false;
  s.err = err;
}

std::uint64_t unread_bytes(const Rsocket& s) {
  std::uint64_t n = 0;
  for (std::uint32_t m : s.rmsg) n += m;
  return n;
}

bool qp_usable(const Rsocket& s) { return s.id != nullptr && s.id->qp != nullptr && (s.phase == Phase::connected); }

// An SGE the peer wrote into our target SGL (op sgl with 16 bytes): the next half of its
// receive buffer. The peer fills entries in turn, starting at 1; each is read once its
// message has completed, so it is never read half-written.
void take_region(Rsocket& s) {
  std::uint8_t* entry = s.target.get() + s.next_entry * wire::kSgeSize;
  const wire::Sge sge = wire::parse_sge(std::span<const std::uint8_t, wire::kSgeSize>(entry, wire::kSgeSize));
  if (sge.length != 0) s.regions.push_back(sge);
  std::memset(entry, 0, wire::kSgeSize);  // read as empty until the peer fills it again
  s.next_entry = (s.next_entry + 1) % wire::kSglEntries;
}

// Whether an sgl message came with a new SGE: its WRITE's length says so; a SEND says nothing
// (iWARP), but the entry is no longer empty.
bool region_written(const Rsocket& s, const ibv_wc& wc) {
  if (!s.msg_send) return wc.byte_len >= wire::kSgeSize;
  const std::uint8_t* entry = s.target.get() + s.next_entry * wire::kSgeSize;
  return wire::parse_sge(std::span<const std::uint8_t, wire::kSgeSize>(entry, wire::kSgeSize)).length != 0;
}

// The 32-bit message a receive brought: its immediate data, or on iWARP its slot's bytes.
std::optional<std::uint32_t> message_of(const Rsocket& s, const ibv_wc& wc) {
  if (!s.msg_send) {
    if (!(wc.wc_flags & IBV_WC_WITH_IMM)) return std::nullopt;
    return ntohl(wc.imm_data);
  }
  if (wc.byte_len != wire::kMsgSize) return std::nullopt;
  std::uint32_t msg = 0;
  std::memcpy(&msg, s.msg_slots.get() + (wc.wr_id & ~kRecvTag) * wire::kMsgSize, sizeof msg);
  return msg;
}

void take_iomap(Rsocket& s, std::uint32_t index) {
  if (index >= s.peer_maps.size()) return;
  const std::uint8_t* entry = s.target.get() + wire::kSglEntries * wire::kSgeSize + index * wire::kIomapSize;
  s.peer_maps[index] = wire::parse_iomap(std::span<const std::uint8_t, wire::kIomapSize>(entry, wire::kIomapSize));
}

void on_ctrl(Rsocket& s, std::uint32_t what) {
  if (s.phase != Phase::connected) return;
  if (what == static_cast<std::uint32_t>(wire::Ctrl::disconnect)) {
    s.readable = s.writable = false;
    s.phase = Phase::disconnected;
  } else if (what == static_cast<std::uint32_t>(wire::Ctrl::shutdown)) {
    // The peer sends no more. If we do not either, the connection is over.
    s.readable = false;
    if (!s.writable) s.phase = Phase::disconnected;
  }
  // keepalive: nothing to do, its receive was the point.
}

void on_receive(Rsocket& s, const ibv_wc& wc) {
  const std::optional<std::uint32_t> message = message_of(s, wc);
  if (!message) return;  // not an rsocket message
  const std::uint32_t msg = *message;
  const std::uint32_t arg = wire::arg_of(msg);
  switch (static_cast<wire::Op>(wire::op_bits(msg))) {
    case wire::Op::sgl:
      s.sseq_comp = static_cast<std::uint16_t>(arg);
      if (region_written(s, wc)) take_region(s);
      break;
    case wire::Op::iomap_sgl:
      take_iomap(s, arg & 0xFFFF);
      break;
    case wire::Op::ctrl:
      on_ctrl(s, arg);
      break;
    case wire::Op::write:
      break;  // never sent with immediate data
    default:  // data (and the reserved data-like ops): bytes now in the receive buffer
      if (arg == 0) break;
      // The peer writes only into the buffer halves we offered: a longer message is not
      // rsockets', and reading it would run past the buffer.
      if (unread_bytes(s) + arg > s.opt.rbuf_size) {
        break_connection(s, EPROTO);
        break;
      }
      s.rmsg.push_back(arg);
      break;
  }
}

void on_send(Rsocket& s, const ibv_wc& wc) {
  const auto msg = static_cast<std::uint32_t>(wc.wr_id);
  const auto ring = static_cast<std::uint32_t>((wc.wr_id >> 32) & 0x7FFFFFFF);
  switch (static_cast<wire::Op>(wire::op_bits(msg))) {
    case wire::Op::sgl:
      --s.ctrl_in_flight;
      break;
    case wire::Op::ctrl:
      --s.ctrl_in_flight;
      // Our DISCONNECT reached the peer: nothing more will come or go.
      if (wire::arg_of(msg) == static_cast<std::uint32_t>(wire::Ctrl::disconnect) && s.phase == Phase::connected &&
          !s.readable && !s.writable)
        s.phase = Phase::disconnected;
      break;
    default:  // data, write, iomap_sgl
      ++s.sqe_avail;
      s.sbuf_used -= std::min(ring, s.sbuf_used);
      break;
  }
  if (wc.status != IBV_WC_SUCCESS && s.phase == Phase::connected) break_connection(s, EIO);
}

void poll_cq(Rsocket& s) {
  // The peer may send once its QP is in RTS, which on iWARP can be before our ESTABLISHED
  // brings its connection data: what came is taken after save_conn_data, not undone by it.
  if (s.cq == nullptr || s.phase == Phase::connecting) return;
  ibv_wc wc[32];
  int received = 0;
  for (int n; (n = ibv_poll_cq(s.cq, 32, wc)) > 0;) {
    for (int i = 0; i < n; ++i) {
      if (wc[i].wr_id & kRecvTag) {
        if (wc[i].status != IBV_WC_SUCCESS) continue;  // flushed
        ++received;
        on_receive(s, wc[i]);
      } else {
        on_send(s, wc[i]);
      }
    }
  }
  if (!qp_usable(s)) return;
  while (received-- > 0) {
    if (post_recv(s) != 0) {
      break_connection(s, EIO);
      return;
    }
  }
}

// Gives the peer more credits, and the freed half of the receive buffer once there is one:
// when half the buffer has been read, or half the receive queue's messages (rdma-core's rule).
void update_credits(Rsocket& s) {
  if (!qp_usable(s) || !s.established || s.ctrl_in_flight >= wire::kCtrlSlots) return;
  const std::uint32_t half = s.opt.rbuf_size / 2;
  const bool space = s.rbuf_bytes_avail >= half;
  if (!space && static_cast<std::int16_t>(s.rseq_no - s.rseq_comp) < 0) return;
  s.rseq_comp = static_cast<std::uint16_t>(s.rseq_no + s.opt.rq_size / 2);
  const std::uint32_t msg = wire::message(wire::Op::sgl, static_cast<std::uint32_t>(s.rseq_no) + s.opt.rq_size);
  if (!space) {
    if (post_ctrl(s, msg) == 0) ++s.ctrl_in_flight;
    return;
  }
  std::uint8_t bytes[wire::kSgeSize];
  const wire::Sge sge{reinterpret_cast<std::uintptr_t>(s.rbuf.get() + s.rbuf_free_offset), s.rmr->rkey, half};
  wire::emit_sge(sge, s.peer_big, std::span<std::uint8_t, wire::kSgeSize>(bytes));
  ibv_sge local{reinterpret_cast<std::uintptr_t>(bytes), wire::kSgeSize, 0};
  const std::uint64_t where = s.remote_sgl.addr + std::uint64_t{wire::kSgeSize} * s.remote_sge;
  if (post_write(s, &local, 1, msg, 0, true, true, where, s.remote_sgl.key) != 0) return;
  ++s.ctrl_in_flight;
  s.rbuf_bytes_avail -= half;
  s.rbuf_free_offset = (s.rbuf_free_offset + half) % (2 * half);
  s.remote_sge = (s.remote_sge + 1) % static_cast<int>(std::max<std::uint32_t>(s.remote_sgl.length, 1));
}

}  // namespace

void progress(Rsocket& s) {
  handle_cm_events(s);
  poll_cq(s);
  update_credits(s);
}

bool can_send(const Rsocket& s) {
  return s.phase == Phase::connected && s.established && s.sqe_avail > 0 && s.sseq_no != s.sseq_comp &&
         !s.regions.empty() && s.opt.sbuf_size - s.sbuf_used >= std::min(kSendLowWater, s.opt.sbuf_size);
}

bool all_sends_done(const Rsocket& s) {
  return s.phase != Phase::connected || (s.ctrl_in_flight == 0 && s.sqe_avail == s.opt.sq_size - wire::kCtrlSlots);
}

std::uint32_t ring_space(const Rsocket& s, std::uint32_t want) {
  // Contiguous from the head: to the end of the ring, and no further than the free bytes.
  const std::uint32_t free = s.opt.sbuf_size - s.sbuf_used;
  return std::min({want, free, s.opt.sbuf_size - s.sbuf_head});
}

int post_write(Rsocket& s, ibv_sge* sge, int nsge, std::uint32_t msg, std::uint32_t ring_bytes, bool imm,
               bool inline_data, std::uint64_t remote_addr, std::uint32_t rkey) {
  ibv_send_wr wr{};
  ibv_send_wr* bad = nullptr;
  wr.wr_id = send_tag(msg, ring_bytes);
  wr.sg_list = sge;
  wr.num_sge = nsge;
  wr.opcode = imm ? IBV_WR_RDMA_WRITE_WITH_IMM : IBV_WR_RDMA_WRITE;
  wr.send_flags = IBV_SEND_SIGNALED | (inline_data ? IBV_SEND_INLINE : 0);
  wr.imm_data = htonl(msg);
  wr.wr.rdma.remote_addr = remote_addr;
  wr.wr.rdma.rkey = rkey;
  if (!imm || !s.msg_send) return ibv_post_send(s.id->qp, &wr, &bad);
  // iWARP: the message follows in a SEND, whose completion stands for both.
  ibv_sge carried{reinterpret_cast<std::uintptr_t>(&msg), wire::kMsgSize, 0};
  ibv_send_wr message{};
  message.wr_id = wr.wr_id;
  message.sg_list = &carried;
  message.num_sge = 1;
  message.opcode = IBV_WR_SEND;
  message.send_flags = IBV_SEND_SIGNALED | IBV_SEND_INLINE;
  if (nsge == 0) return ibv_post_send(s.id->qp, &message, &bad);
  wr.opcode = IBV_WR_RDMA_WRITE;
  wr.send_flags &= ~IBV_SEND_SIGNALED;
  wr.next = &message;
  return ibv_post_send(s.id->qp, &wr, &bad);
}

int post_ctrl(Rsocket& s, std::uint32_t msg) {
  // A zero-length WRITE touches no memory: its address and key go unchecked.
  return post_write(s, nullptr, 0, msg, 0, true, false, 0, 0);
}

int wait_fds(const Rsocket& s, int out[2]) {
  int n = 0;
  if (s.cq_channel != nullptr) out[n++] = s.cq_channel->fd;
  // The event channel: connection steps, ESTABLISHED of an accepted socket, the peer's DREQ.
  if (s.channel != nullptr && s.phase != Phase::disconnected && s.phase != Phase::error &&
      s.phase != Phase::connect_error)
    out[n++] = s.channel->fd;
  return n;
}

void arm(Rsocket& s) {
  if (s.cq == nullptr || s.armed) return;
  if (ibv_req_notify_cq(s.cq, 0) == 0) s.armed = true;
}

void take_cq_events(Rsocket& s) {
  if (s.cq_channel == nullptr) return;
  ibv_cq* cq = nullptr;
  void* context = nullptr;
  while (ibv_get_cq_event(s.cq_channel, &cq, &context) == 0) {
    s.armed = false;
    if (++s.cq_events >= 64) {
      ibv_ack_cq_events(s.cq, s.cq_events);
      s.cq_events = 0;
    }
  }
}

void sleep_on(Rsocket& s, std::unique_lock<std::mutex>& lock) {
  int fds[2];
  const int n = wait_fds(s, fds);
  pollfd p[2] = {{fds[0], POLLIN, 0}, {n > 1 ? fds[1] : -1, POLLIN, 0}};
  lock.unlock();
  if (n == 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  } else {
    ::poll(p, static_cast<nfds_t>(n), kWakeMs);
  }
  lock.lock();
  take_cq_events(s);
}

}  // namespace softrdma::rsockets
