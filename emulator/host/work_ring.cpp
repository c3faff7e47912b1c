#include "emulator/host/work_ring.hpp"

#include <sys/mman.h>

#include <cstring>
#include <new>

#include "emulator/host/sealed_memory.hpp"

namespace softrdma::host {

namespace {

constexpr std::size_t kBytes =
    WorkRing::kDataOffset + WorkRing::kCapacity + WorkRing::kRoomSlots * sizeof(QueueRoomSlot);
constexpr std::uint32_t kMask = WorkRing::kCapacity - 1;

std::uint32_t padded(std::uint32_t n) { return (n + 7u) & ~7u; }

}  // namespace

WorkRing::WorkRing(void* base, std::size_t bytes) : base_(base), bytes_(bytes) {}

WorkRing::~WorkRing() { ::munmap(base_, bytes_); }

std::unique_ptr<WorkRing> WorkRing::create(int& fd, std::string& error) {
  void* base = create_sealed_memory("softrdma-work", kBytes, fd, error);
  if (base == nullptr) return nullptr;
  new (base) WorkRingHeader;
  static_cast<WorkRingHeader*>(base)->capacity = kCapacity;
  new (static_cast<std::uint8_t*>(base) + kDataOffset + kCapacity) QueueRoomSlot[kRoomSlots];
  return std::unique_ptr<WorkRing>(new WorkRing(base, kBytes));
}

std::unique_ptr<WorkRing> WorkRing::adopt(int fd) {
  void* base = map_sealed_memory(fd, kBytes);
  if (base == nullptr) return nullptr;
  std::unique_ptr<WorkRing> ring(new WorkRing(base, kBytes));
  ring->tail_ = ring->next_tail_ = ring->header().tail.load();
  return ring;
}

bool WorkRing::push(std::span<const std::uint8_t> record) {
  const std::uint32_t need = padded(static_cast<std::uint32_t>(record.size()) + 4);
  const std::uint32_t at = head_ & kMask;
  const std::uint32_t before_end = kCapacity - at;
  const std::uint32_t total = need <= before_end ? need : before_end + need;  // pad to the end, then the record
  const std::uint32_t used = head_ - header().tail.load(std::memory_order_acquire);
  if (need > kCapacity / 2 || used + total > kCapacity) return false;
  if (need > before_end) {
    std::memcpy(data() + at, &kPadRecord, 4);
    head_ += before_end;
  }
  const std::uint32_t length = static_cast<std::uint32_t>(record.size());
  std::memcpy(data() + (head_ & kMask), &length, 4);
  std::memcpy(data() + (head_ & kMask) + 4, record.data(), record.size());
  head_ += need;
  header().head.store(head_);  // sequentially consistent: see `asleep` in the header comment
  return true;
}

bool WorkRing::empty() const { return header().head.load() == tail_; }

bool WorkRing::next(std::span<const std::uint8_t>& record) {
  record = {};
  const std::uint32_t head = header().head.load(std::memory_order_acquire);
  std::uint32_t tail = tail_;
  for (int skips = 0; head != tail; ++skips) {
    const std::uint32_t available = head - tail;
    const std::uint32_t at = tail & kMask;
    if (available > kCapacity || available < 8 || at % 8 != 0 || skips > 1) return false;
    std::uint32_t length = 0;
    std::memcpy(&length, data() + at, 4);
    if (length == kPadRecord) {  // the rest of the ring up to its end is padding
      tail += kCapacity - at;
      continue;
    }
    if (length == 0 || length > kCapacity) return false;  // before the sum below could wrap
    const std::uint32_t need = padded(length + 4);
    if (need > available || need > kCapacity - at) return false;
    record = std::span<const std::uint8_t>(data() + at + 4, length);
    tail_ = tail;
    next_tail_ = tail + need;
    return true;
  }
  tail_ = tail;
  header().tail.store(tail_, std::memory_order_release);
  return true;
}

bool WorkRing::read_room(std::uint32_t qpn, QueueRoom& out) const {
  const QueueRoomSlot& s = slot(qpn);
  const std::uint32_t before = s.seq.load(std::memory_order_acquire);
  if (before == 0 || before % 2 != 0 || s.qpn.load(std::memory_order_relaxed) != qpn) return false;
  out.send_room = s.send_room.load(std::memory_order_relaxed);
  out.recv_room = s.recv_room.load(std::memory_order_relaxed);
  out.send_taken = s.send_taken.load(std::memory_order_relaxed);
  out.recv_taken = s.recv_taken.load(std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_acquire);
  return s.seq.load(std::memory_order_relaxed) == before;
}

void WorkRing::clear_room(std::uint32_t qpn) {
  QueueRoomSlot& s = slot(qpn);
  s.qpn.store(0, std::memory_order_relaxed);
  s.seq.store(0, std::memory_order_release);
}

void WorkRing::publish_room(std::uint32_t qpn, const QueueRoom& room) {
  QueueRoomSlot& s = slot(qpn);
  const std::uint32_t seq = s.seq.load(std::memory_order_relaxed) | 1;  // odd: being written
  s.seq.store(seq, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  s.qpn.store(qpn, std::memory_order_relaxed);
  s.send_room.store(room.send_room, std::memory_order_relaxed);
  s.recv_room.store(room.recv_room, std::memory_order_relaxed);
  s.send_taken.store(room.send_taken, std::memory_order_relaxed);
  s.recv_taken.store(room.recv_taken, std::memory_order_relaxed);
  s.seq.store(seq + 1, std::memory_order_release);
}

void WorkRing::pop() {
  tail_ = next_tail_;
  header().tail.store(tail_, std::memory_order_release);
}

}  // namespace softrdma::host
