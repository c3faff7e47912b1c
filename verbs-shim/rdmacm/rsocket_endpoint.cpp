// An rsocket's verbs resources: one CQ (with its completion channel) for sends and receives,
// an RC QP, and three registered buffers: the send staging ring, the receive buffer the peer
// writes into, and the target area where the peer writes SGEs (two entries) and iomap
// entries; on iWARP a fourth, where each receive's message lands. Also the connection data that describes them to the
// peer in the REQ or REP, and what the peer's tells us.
#include <fcntl.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <new>

#include "verbs-shim/rdmacm/rsocket_state.hpp"

namespace softrdma::rsockets {
namespace {

std::uint16_t clamp_queue(std::uint16_t want, int device_max) {
  const int hi = std::min<int>(device_max, kQueueMax);
  return static_cast<std::uint16_t>(std::clamp<int>(want, kQueueMin, std::max<int>(hi, kQueueMin)));
}

std::uint32_t target_bytes(const Rsocket& s) {
  return static_cast<std::uint32_t>(wire::kSglEntries * wire::kSgeSize + s.opt.iomap_size * wire::kIomapSize);
}

ibv_mr* register_buffer(Rsocket& s, std::unique_ptr<std::uint8_t[]>& buffer, std::size_t size, int access) {
  buffer.reset(new (std::nothrow) std::uint8_t[size]());
  if (!buffer) {
    errno = ENOMEM;
    return nullptr;
  }
  return ibv_reg_mr(s.id->pd, buffer.get(), size, access);
}

int errno_or(int fallback) { return errno != 0 ? errno : fallback; }

}  // namespace

int create_endpoint(Rsocket& s) {
  rdma_cm_id* id = s.id;
  if (id == nullptr || id->verbs == nullptr || id->pd == nullptr) return EINVAL;
  ibv_device_attr device{};
  const int max_wr = ibv_query_device(id->verbs, &device) == 0 ? device.max_qp_wr : kQueueMax;
  // iWARP has no immediate data (RFC 5040): a message is a WRITE, then a SEND of its own.
  s.msg_send = id->verbs->device->transport_type == IBV_TRANSPORT_IWARP;
  const int sends_per_message = s.msg_send ? 2 : 1;
  Options& o = s.opt;
  o.sq_size = clamp_queue(o.sq_size, max_wr / sends_per_message);
  o.rq_size = clamp_queue(o.rq_size, max_wr);
  o.sbuf_size = std::max(o.sbuf_size, 2 * kSendLowWater);
  // The receive buffer is offered in two equal halves.
  o.rbuf_size = std::max<std::uint32_t>(o.rbuf_size, 2 * kSendLowWater) & ~1u;

  errno = 0;
  s.cq_channel = ibv_create_comp_channel(id->verbs);
  if (s.cq_channel == nullptr) return errno_or(ENOMEM);
  // Never block in ibv_get_cq_event: waits poll() the fd first (sleep_on, rpoll).
  ::fcntl(s.cq_channel->fd, F_SETFL, ::fcntl(s.cq_channel->fd, F_GETFL) | O_NONBLOCK);
  s.cq = ibv_create_cq(id->verbs, o.sq_size + o.rq_size, &s, s.cq_channel, 0);
  if (s.cq == nullptr) return errno_or(ENOMEM);

  ibv_qp_init_attr attr{};
  attr.qp_context = &s;
  attr.send_cq = s.cq;
  attr.recv_cq = s.cq;
  attr.qp_type = IBV_QPT_RC;
  // Every send is signalled but the WRITE before a message's SEND: that SEND's completion
  // returns both queue entries and the staging bytes.
  attr.sq_sig_all = 0;
  attr.cap.max_send_wr = o.sq_size * sends_per_message;
  attr.cap.max_recv_wr = o.rq_size;
  attr.cap.max_send_sge = 2;
  attr.cap.max_recv_sge = 1;
  attr.cap.max_inline_data = std::max(std::min<std::uint32_t>(o.sq_inline, kInlineLimit), kCtrlInline);
  if (rdma_create_qp(id, nullptr, &attr) != 0) return errno_or(ENOMEM);
  o.sq_inline = static_cast<std::uint16_t>(std::min<std::uint32_t>(o.sq_inline, attr.cap.max_inline_data));

  s.smr = register_buffer(s, s.sbuf, o.sbuf_size, IBV_ACCESS_LOCAL_WRITE);
  if (s.smr == nullptr) return errno_or(ENOMEM);
  const int remote = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
  s.tmr = register_buffer(s, s.target, target_bytes(s), remote);
  if (s.tmr == nullptr) return errno_or(ENOMEM);
  s.rmr = register_buffer(s, s.rbuf, o.rbuf_size, remote);
  if (s.rmr == nullptr) return errno_or(ENOMEM);
  if (s.msg_send) {
    s.mmr = register_buffer(s, s.msg_slots, std::size_t{o.rq_size} * wire::kMsgSize, IBV_ACCESS_LOCAL_WRITE);
    if (s.mmr == nullptr) return errno_or(ENOMEM);
  }

  // The first half goes to the peer in the connection data; the second is ours to offer.
  const std::uint32_t half = o.rbuf_size / 2;
  s.rbuf_offset = 0;
  s.rbuf_free_offset = half;
  s.rbuf_bytes_avail = half;
  s.rseq_no = 0;
  s.rseq_comp = o.rq_size / 2;
  s.sqe_avail = o.sq_size - wire::kCtrlSlots;
  s.ctrl_in_flight = 0;
  s.sbuf_head = s.sbuf_used = 0;
  s.next_entry = 1;
  s.next_slot = 0;
  s.peer_maps.assign(o.iomap_size, wire::Iomap{});
  for (int i = 0; i < o.rq_size; ++i) {
    if (const int err = post_recv(s)) return err;
  }
  return 0;
}

int post_recv(Rsocket& s) {
  ibv_recv_wr wr{};
  ibv_recv_wr* bad = nullptr;
  wr.wr_id = kRecvTag;
  ibv_sge slot{};
  if (s.msg_send) {
    // Receives complete in the order they were posted, at most rq_size at a time: the slot
    // used rq_size receives ago has been read.
    slot = {reinterpret_cast<std::uintptr_t>(s.msg_slots.get() + s.next_slot * wire::kMsgSize), wire::kMsgSize,
            s.mmr->lkey};
    wr.wr_id |= static_cast<std::uint64_t>(s.next_slot);
    wr.sg_list = &slot;
    wr.num_sge = 1;
    s.next_slot = (s.next_slot + 1) % s.opt.rq_size;
  }
  return ibv_post_recv(s.id->qp, &wr, &bad);
}

wire::ConnData conn_data(const Rsocket& s) {
  wire::ConnData c;
  c.version = wire::kVersion;
  c.flags = wire::kFlagIomap | (wire::host_is_big_endian() ? wire::kFlagNet : 0);
  c.credits = s.opt.rq_size;
  c.target_iomap_size = static_cast<std::uint8_t>(wire::scale_of(s.opt.iomap_size));
  c.target_sgl = {reinterpret_cast<std::uintptr_t>(s.target.get()), s.tmr->rkey, wire::kSglEntries};
  c.data_buf = {reinterpret_cast<std::uintptr_t>(s.rbuf.get()), s.rmr->rkey, s.opt.rbuf_size / 2};
  return c;
}

void save_conn_data(Rsocket& s, const wire::ConnData& peer) {
  s.remote_sgl = peer.target_sgl;
  s.remote_sge = 1;  // entry 0 is the one the peer filled from our connection data
  s.peer_big = (peer.flags & wire::kFlagNet) != 0;
  s.remote_iomap = {};
  if (peer.flags & wire::kFlagIomap) {
    // The peer's iomap table follows its target SGL, in the same registration.
    s.remote_iomap.addr = peer.target_sgl.addr + wire::kSgeSize * peer.target_sgl.length;
    s.remote_iomap.key = peer.target_sgl.key;
    s.remote_iomap.length = static_cast<std::uint32_t>(wire::value_of(peer.target_iomap_size));
  }
  s.regions.assign(1, peer.data_buf);
  s.sseq_no = 0;
  s.sseq_comp = peer.credits;
}

void flush_qp(Rsocket& s) {
  if (s.id == nullptr || s.id->qp == nullptr) return;
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_ERR;
  ibv_modify_qp(s.id->qp, &a, IBV_QP_STATE);
}

void destroy(Rsocket& s) {
  for (Mapping& m : s.maps) {
    if (m.mr != nullptr) ibv_dereg_mr(m.mr);
  }
  s.maps.clear();
  if (s.id != nullptr && s.id->qp != nullptr) rdma_destroy_qp(s.id);
  for (ibv_mr** mr : {&s.smr, &s.rmr, &s.tmr, &s.mmr}) {
    if (*mr != nullptr) ibv_dereg_mr(*mr);
    *mr = nullptr;
  }
  if (s.cq != nullptr) {
    if (s.cq_events != 0) ibv_ack_cq_events(s.cq, s.cq_events);
    ibv_destroy_cq(s.cq);
    s.cq = nullptr;
  }
  if (s.cq_channel != nullptr) ibv_destroy_comp_channel(s.cq_channel);
  s.cq_channel = nullptr;
  if (s.id != nullptr) rdma_destroy_id(s.id);
  s.id = nullptr;
  if (s.channel != nullptr) rdma_destroy_event_channel(s.channel);
  s.channel = nullptr;
}

}  // namespace softrdma::rsockets
