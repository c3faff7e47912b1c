#include "emulator/host/cq_ring.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <new>

namespace softrdma::host {

namespace {

std::size_t ring_bytes(std::uint32_t capacity) { return CqRing::kEntriesOffset + capacity * sizeof(core::Wc); }

// The seals that make a shared mapping safe for the daemon: the client can no longer shrink
// the file under it (a store beyond the end would be SIGBUS), nor remove the seals.
constexpr int kSeals = F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL;

}  // namespace

CqRing::CqRing(void* base, std::size_t bytes, std::uint32_t capacity) : base_(base), bytes_(bytes), capacity_(capacity) {}

CqRing::~CqRing() { ::munmap(base_, bytes_); }

std::unique_ptr<CqRing> CqRing::create(std::uint32_t cqe, int& fd, std::string& error) {
  // One slot more than the CQ holds, so that a full CQ fits whole.
  const std::uint32_t capacity = std::bit_ceil(std::clamp<std::uint32_t>(cqe + 1, 64, kMaxCapacity));
  const std::size_t bytes = ring_bytes(capacity);
  fd = ::memfd_create("softrdma-cq", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0 || ::ftruncate(fd, static_cast<off_t>(bytes)) != 0 || ::fcntl(fd, F_ADD_SEALS, kSeals) != 0) {
    error = std::string("cannot make shared memory for a CQ: ") + std::strerror(errno);
    if (fd >= 0) ::close(fd);
    fd = -1;
    return nullptr;
  }
  void* base = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (base == MAP_FAILED) {
    error = std::string("cannot map a CQ's shared memory: ") + std::strerror(errno);
    ::close(fd);
    fd = -1;
    return nullptr;
  }
  auto* header = new (base) CqRingHeader;
  header->capacity = capacity;
  return std::unique_ptr<CqRing>(new CqRing(base, bytes, capacity));
}

std::unique_ptr<CqRing> CqRing::adopt(int fd) {
  struct stat st{};
  if ((::fcntl(fd, F_GET_SEALS) & kSeals) != kSeals || ::fstat(fd, &st) != 0) return nullptr;
  // The capacity is the client's word: read once, checked against the file's sealed size.
  std::uint32_t capacity = 0;
  if (::pread(fd, &capacity, sizeof capacity, 0) != static_cast<ssize_t>(sizeof capacity)) return nullptr;
  if (!std::has_single_bit(capacity) || capacity > kMaxCapacity ||
      static_cast<std::size_t>(st.st_size) != ring_bytes(capacity)) {
    return nullptr;
  }
  void* base = ::mmap(nullptr, ring_bytes(capacity), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (base == MAP_FAILED) return nullptr;
  std::unique_ptr<CqRing> ring(new CqRing(base, ring_bytes(capacity), capacity));
  ring->head_ = ring->header().head.load(std::memory_order_relaxed);
  return ring;
}

void CqRing::fill(core::Device& device, std::uint32_t cq) {
  const std::uint32_t tail = header().tail.load(std::memory_order_acquire);
  const std::uint32_t used = head_ - tail;
  std::uint32_t room = used <= capacity_ ? capacity_ - used : 0;  // nonsense from the client: full
  while (room > 0) {
    // Up to the end of the slots, then from slot 0.
    const std::uint32_t at = head_ & (capacity_ - 1);
    const std::uint32_t span = std::min(room, capacity_ - at);
    const int n = device.poll_cq(cq, std::span<core::Wc>(entries() + at, span));
    if (n <= 0) break;
    head_ += static_cast<std::uint32_t>(n);
    room -= static_cast<std::uint32_t>(n);
    if (static_cast<std::uint32_t>(n) < span) break;
  }
  header().head.store(head_, std::memory_order_release);
  // A ring that filled up may have left completions in the engine (or, by chance, none: then
  // the client's drain request finds nothing and clears this).
  header().pending.store(room == 0 ? 1 : 0, std::memory_order_release);
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
