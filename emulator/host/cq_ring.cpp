#include "emulator/host/cq_ring.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <new>

#include "emulator/host/sealed_memory.hpp"

namespace softrdma::host {

namespace {

std::size_t ring_bytes(std::uint32_t capacity) { return CqRing::kEntriesOffset + capacity * sizeof(core::Wc); }

}  // namespace

CqRing::CqRing(void* base, std::size_t bytes, std::uint32_t capacity)
    : base_(base), bytes_(bytes), capacity_(capacity) {}

CqRing::~CqRing() { ::munmap(base_, bytes_); }

std::unique_ptr<CqRing> CqRing::create(std::uint32_t cqe, int& fd, std::string& error) {
  // One slot more than the CQ holds, so that a full CQ fits whole.
  const std::uint32_t capacity = std::bit_ceil(std::clamp<std::uint32_t>(cqe + 1, 64, kMaxCapacity));
  void* base = create_sealed_memory("softrdma-cq", ring_bytes(capacity), fd, error);
  if (base == nullptr) return nullptr;
  auto* header = new (base) CqRingHeader;
  header->capacity = capacity;
  return std::unique_ptr<CqRing>(new CqRing(base, ring_bytes(capacity), capacity));
}

std::unique_ptr<CqRing> CqRing::adopt(int fd) {
  // The capacity is the client's word: read once, and it must match the file's sealed size.
  std::uint32_t capacity = 0;
  if (::pread(fd, &capacity, sizeof capacity, 0) != static_cast<ssize_t>(sizeof capacity)) return nullptr;
  if (!std::has_single_bit(capacity) || capacity > kMaxCapacity) return nullptr;
  void* base = map_sealed_memory(fd, ring_bytes(capacity));
  if (base == nullptr) return nullptr;
  std::unique_ptr<CqRing> ring(new CqRing(base, ring_bytes(capacity), capacity));
  ring->head_ = ring->header().head.load(std::memory_order_relaxed);
  return ring;
}

void CqRing::fill(core::Device& device, std::uint32_t cq, std::vector<std::uint32_t>& qpns) {
  const std::uint32_t tail = header().tail.load(std::memory_order_acquire);
  const std::uint32_t used = head_ - tail;
  std::uint32_t room = used <= capacity_ ? capacity_ - used : 0;  // nonsense from the client: full
  while (room > 0) {
    // Up to the end of the slots, then from slot 0.
    const std::uint32_t at = head_ & (capacity_ - 1);
    const std::uint32_t span = std::min(room, capacity_ - at);
    const int n = device.poll_cq(cq, std::span<core::Wc>(entries() + at, span));
    if (n <= 0) break;
    for (int i = 0; i < n; ++i) qpns.push_back(entries()[at + static_cast<std::uint32_t>(i)].qp_num);
    head_ += static_cast<std::uint32_t>(n);
    room -= static_cast<std::uint32_t>(n);
    if (static_cast<std::uint32_t>(n) < span) break;
  }
  header().head.store(head_, std::memory_order_release);
  // A ring that filled up may have left completions in the engine (or, by chance, none: then
  // the client's drain request finds nothing and clears this).
  header().pending.store(room == 0 ? 1 : 0, std::memory_order_release);
}

std::uint32_t CqRing::unread() const {
  const std::uint32_t used = head_ - header().tail.load(std::memory_order_acquire);
  return std::min(used, capacity_);
}

std::uint32_t CqRing::held() const {
  const CqRingHeader& h = header();
  return h.head.load(std::memory_order_acquire) - h.tail.load(std::memory_order_relaxed);
}

std::size_t CqRing::take(std::span<core::Wc> out) {
  CqRingHeader& h = header();
  const std::uint32_t head = h.head.load(std::memory_order_acquire);
  const std::uint32_t tail = h.tail.load(std::memory_order_relaxed);
  const std::size_t n = std::min<std::size_t>(out.size(), head - tail);
  for (std::size_t i = 0; i < n; ++i) out[i] = entries()[(tail + i) & (capacity_ - 1)];
  h.tail.store(tail + static_cast<std::uint32_t>(n), std::memory_order_release);
  return n;
}

}  // namespace softrdma::host
