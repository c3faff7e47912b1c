// A completion queue in shared memory between softrdmad and one client: the daemon writes
// work completions, the client's ibv_poll_cq reads them with no system call
// (docs/architecture.md, "The daemon: softrdmad").
//
// The client creates the memory (sealed_memory.hpp) and passes it with create_cq (SCM_RIGHTS). Layout, fixed for both
// ends of one build (Hello's kLayout covers core::Wc):
//
//   offset   0  CqRingHeader (capacity, then head, tail, pending on cache lines of their own)
//   offset 256  capacity x core::Wc
//
// Single producer, single consumer, indices free-running mod 2^32:
//   head     owner: the daemon. Release-stored after the entries it publishes are written;
//            the client load-acquires it before reading them.
//   tail     owner: the client. Release-stored after it has read entries; the daemon
//            load-acquires it before reusing their slots. The daemon trusts nothing it reads
//            here: a tail that makes no sense reads as a full ring.
//   pending  owner: the daemon (set and cleared under the host's lock). 1 while completions
//            wait in the engine because the ring was full; the client then asks the daemon to
//            move them (Op::drain_cq) once it has made room. Completions therefore always pass
//            through the ring, in the engine's order.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "emulator/core/device.hpp"

namespace softrdma::host {

struct CqRingHeader {
  std::uint32_t capacity = 0;  // entries, a power of two; written by the client before sharing
  alignas(64) std::atomic<std::uint32_t> head{0};
  alignas(64) std::atomic<std::uint32_t> tail{0};
  alignas(64) std::atomic<std::uint32_t> pending{0};
};
static_assert(std::atomic<std::uint32_t>::is_always_lock_free, "ring indices are shared between processes");
static_assert(sizeof(CqRingHeader) <= 256);

class CqRing {
 public:
  static constexpr std::size_t kEntriesOffset = 256;
  static constexpr std::uint32_t kMaxCapacity = 1u << 20;

  // The client's side: a ring for a CQ of `cqe` entries, and the memfd to pass to the daemon
  // (the caller closes it once sent). Null with `error` on failure.
  static std::unique_ptr<CqRing> create(std::uint32_t cqe, int& fd, std::string& error);
  // The daemon's side: maps a client's memfd after checking its seals and size; null when it
  // is not a ring this build made.
  static std::unique_ptr<CqRing> adopt(int fd);

  CqRing(const CqRing&) = delete;
  CqRing& operator=(const CqRing&) = delete;
  ~CqRing();

  // Daemon: moves the engine's completions of `cq` into the ring while it has room; sets or
  // clears `pending`; appends the QPN of each completion moved to `qpns`. Under the host's lock.
  void fill(core::Device& device, std::uint32_t cq, std::vector<std::uint32_t>& qpns);
  // Daemon: completions in the ring the client has not taken (a nonsensical tail: all of them).
  // Under the host's lock.
  std::uint32_t unread() const;
  // Client: takes up to out.size() completions; one thread at a time.
  std::size_t take(std::span<core::Wc> out);
  bool pending() const { return header().pending.load(std::memory_order_acquire) != 0; }
  // Client: completions published and not yet taken.
  std::uint32_t held() const;

 private:
  CqRing(void* base, std::size_t bytes, std::uint32_t capacity);
  CqRingHeader& header() const { return *static_cast<CqRingHeader*>(base_); }
  core::Wc* entries() const { return reinterpret_cast<core::Wc*>(static_cast<std::uint8_t*>(base_) + kEntriesOffset); }

  void* base_;
  std::size_t bytes_;
  std::uint32_t capacity_;  // the daemon's own copy: never re-read from shared memory
  std::uint32_t head_ = 0;  // the daemon's own copy of head
};

}  // namespace softrdma::host
