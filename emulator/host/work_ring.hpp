// Work requests from one client to softrdmad through shared memory: ibv_post_send,
// ibv_post_recv and ibv_post_srq_recv write here and return, with no system call while the
// daemon is awake (docs/architecture.md, "The daemon: softrdmad").
//
// The client creates the memory (sealed_memory.hpp) and hands it to the daemon once
// (Op::attach_work_ring). Layout:
//
//   offset   0  WorkRingHeader (capacity, then head, tail, asleep on cache lines of their own)
//   offset 256  capacity bytes of records
//   then        kRoomSlots QueueRoomSlots: how many WRs each QP's queues took when the daemon
//               last looked (below)
//
// A record is a post request exactly as it would travel on the control socket (Op, queue,
// count, WRs: daemon_protocol.hpp), behind a 4-byte length, padded to 8 bytes. A record never
// wraps: when one does not fit before the end, the client writes a length of kPadRecord there
// and starts again at offset 0.
//
//   head    owner: the client (one thread at a time). Release-stored once a record is written.
//   tail    owner: the daemon (one thread at a time). Release-stored once a record is taken.
//   asleep  owner: the daemon's progress thread: 1 from just before it sleeps until it wakes.
//           The client reads it after storing head (both sequentially consistent; the daemon
//           stores asleep and then reads head), so either the daemon sees the record or the
//           client sees it asleep and rings its doorbell (an eventfd it got with Hello).
// Every value the daemon reads here is checked: a client that scribbles on its ring loses its
// own requests and nothing else.
//
// Room slots (owner: the daemon; slot qpn % kRoomSlots, a seqlock: `seq` odd while it writes).
// Whenever the daemon moves completions of a QP into a CQ ring it publishes that QP's room
// (Device::room) and how many WRs of each queue it has taken from this ring so far. The client
// then knows, without asking, that the queue takes room - (pushed - taken) more WRs: a lower
// bound, since room only grows until the next post. When that is 0 it asks (queue_room).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

namespace softrdma::host {

struct WorkRingHeader {
  std::uint32_t capacity = 0;  // bytes, a power of two; written by the client before sharing
  alignas(64) std::atomic<std::uint32_t> head{0};
  alignas(64) std::atomic<std::uint32_t> tail{0};
  alignas(64) std::atomic<std::uint32_t> asleep{0};
};
static_assert(sizeof(WorkRingHeader) <= 256);

struct QueueRoomSlot {
  std::atomic<std::uint32_t> seq{0};
  std::atomic<std::uint32_t> qpn{0};
  std::atomic<std::uint32_t> send_room{0};
  std::atomic<std::uint32_t> recv_room{0};
  std::atomic<std::uint32_t> send_taken{0};
  std::atomic<std::uint32_t> recv_taken{0};
};

struct QueueRoom {
  std::uint32_t send_room = 0, recv_room = 0;
  std::uint32_t send_taken = 0, recv_taken = 0;  // free-running WR counts
};

class WorkRing {
 public:
  static constexpr std::size_t kDataOffset = 256;
  static constexpr std::uint32_t kCapacity = 1u << 20;
  static constexpr std::uint32_t kPadRecord = 0xffffffff;
  static constexpr std::uint32_t kRoomSlots = 8192;  // more than QPNs a device hands out

  // Client: a ring and the memfd to pass to the daemon (the caller closes it once sent).
  static std::unique_ptr<WorkRing> create(int& fd, std::string& error);
  // Daemon: maps a client's memfd after checking its seals and size; null if it is no ring.
  static std::unique_ptr<WorkRing> adopt(int fd);

  WorkRing(const WorkRing&) = delete;
  WorkRing& operator=(const WorkRing&) = delete;
  ~WorkRing();

  // Client: copies one record in; false when the ring has no room for it now.
  bool push(std::span<const std::uint8_t> record);
  // Client, after push: whether the daemon sleeps and must be woken.
  bool daemon_asleep() const { return header().asleep.load() != 0; }

  // Client: the room the daemon last published for `qpn`; false when there is none (or it is
  // being written). clear_room() forgets a slot, for a new QP.
  bool read_room(std::uint32_t qpn, QueueRoom& out) const;
  void clear_room(std::uint32_t qpn);
  // Daemon: publishes a QP's room.
  void publish_room(std::uint32_t qpn, const QueueRoom& room);

  // Daemon: the oldest record, or an empty span when there is none; false when the ring holds
  // nonsense (the client is then dropped). pop() releases what next() returned.
  bool next(std::span<const std::uint8_t>& record);
  void pop();
  bool empty() const;
  void set_asleep(bool asleep) { header().asleep.store(asleep ? 1 : 0); }

 private:
  WorkRing(void* base, std::size_t bytes);
  WorkRingHeader& header() const { return *static_cast<WorkRingHeader*>(base_); }
  std::uint8_t* data() const { return static_cast<std::uint8_t*>(base_) + kDataOffset; }
  QueueRoomSlot& slot(std::uint32_t qpn) const {
    return reinterpret_cast<QueueRoomSlot*>(data() + kCapacity)[qpn % kRoomSlots];
  }

  void* base_;
  std::size_t bytes_;
  std::uint32_t head_ = 0;       // client: its own copy of head
  std::uint32_t tail_ = 0;       // daemon: its own copy of tail
  std::uint32_t next_tail_ = 0;  // daemon: tail once the record next() returned is popped
};

}  // namespace softrdma::host
