// Registered memory of other processes, for the daemon's engine: core::Memory over
// process_vm_readv / process_vm_writev, since the engine reaches application memory only
// through that interface (docs/architecture.md, "The engine: sans-I/O").
//
// One engine serves many clients, but core::Memory names memory by a 64-bit host address
// alone. So the daemon registers a client's MR at a *tagged* address: the client's slot in the
// top 16 bits, its own virtual address below. User virtual addresses on x86-64 and AArch64
// fit in 48 bits (57-bit addresses exist only for a process that asks mmap for them, and
// tag() refuses those), so the engine's bounds arithmetic never carries into the tag, and an
// MR can only ever reach the process that registered it.
//
// Atomics are a read and a write: the engine runs under the host's lock, so they are atomic
// with respect to every other RDMA operation on the device, which is what the device
// advertises (IBV_ATOMIC_HCA), though not with respect to the client's own CPU stores.
//
// System calls are batched (issue 6: "batched"). Measured on a receiving daemon, one
// process_vm_writev per packet was two thirds of its time, most of it the per-call part
// (looking up the process, the ptrace access check) rather than the copy. So:
// - write() stages the bytes and their destination; flush() moves everything staged with one
//   process_vm_writev (contiguous destinations merged). Anything that reads flushes first, so
//   reads and atomics see every earlier write; core::Memory::flush() says who else flushes.
//   A write the kernel refuses at flush time (the client unmapped registered memory, or died)
//   cannot fail its operation any more: it is counted (lost_write_bytes) and logged. Writes to
//   an on-demand MR or a datagram's receive buffer (kOnDemandTag, above the slot;
//   local_memory.hpp) are not staged but made at once, so that memory unmapped under them
//   fails the operation, as on-demand paging promises and a pinned buffer would not notice.
// - A read that continues where the previous one ended (the packets of one message) reads
//   ahead, up to kReadAhead bytes, and later reads are served from that until flush() or a
//   write: a message's payload costs a few system calls instead of one per packet. Bytes read
//   ahead past the registered region are never handed out (the engine asks only for bytes it
//   has checked), and a shorter read-ahead (the next page unmapped) is fine.
#pragma once

#include <sys/types.h>
#include <sys/uio.h>

#include <array>
#include <cstdint>
#include <optional>
#include <vector>

#include "emulator/core/memory.hpp"
#include "emulator/core/uninitialised_bytes.hpp"
#include "emulator/host/local_memory.hpp"
#include "emulator/net/backend.hpp"

namespace softrdma::host {

class ProcessMemory final : public core::Memory {
 public:
  static constexpr unsigned kTagShift = 48;
  static constexpr std::uint64_t kAddressMask = (std::uint64_t{1} << kTagShift) - 1;
  static constexpr std::size_t kSlots = 1u << 12;  // clients at once (slot 0 is never used)
  static_assert(kOnDemandTag >> kTagShift >= kSlots, "the on-demand mark lies above every slot");

  // A slot for `pid`, or none when all are taken. The caller serialises attach, detach and the
  // engine's accesses (the daemon does all three under the host's lock).
  std::optional<std::uint16_t> attach(pid_t pid);
  void detach(std::uint16_t slot);

  // The address the engine uses for `addr` in the process of `slot`; none when `addr` does not
  // fit below the tag.
  static std::optional<std::uint64_t> tag(std::uint16_t slot, std::uint64_t addr);

  bool read(std::uint64_t addr, std::span<std::uint8_t> out) override;
  bool write(std::uint64_t addr, std::span<const std::uint8_t> in) override;
  bool compare_swap(std::uint64_t addr, std::uint64_t compare, std::uint64_t swap, std::uint64_t& original) override;
  bool fetch_add(std::uint64_t addr, std::uint64_t add, std::uint64_t& original) override;
  std::uint64_t on_demand(std::uint64_t addr) override { return addr | kOnDemandTag; }
  void flush() override;

  // For `softrdma stats` ("dma"): the system calls made, and the bytes staged by write() that
  // the kernel refused to write at flush time.
  std::vector<net::NamedCount> counters() const;
  std::uint64_t lost_write_bytes() const { return lost_write_bytes_; }

  static constexpr std::size_t kReadAhead = 64 * 1024;
  static constexpr std::size_t kReadAheadPackets = 16;  // a read-ahead is at most this many reads' size
  static constexpr std::size_t kStagedBytes = 1 << 20;  // flush when this much is staged

 private:
  pid_t pid_of(std::uint64_t addr) const;  // 0 for a slot no one holds
  void write_staged();

  std::array<pid_t, kSlots> pids_{};
  // Writes to one process waiting for flush(): the bytes in order, and where each run goes.
  pid_t staged_pid_ = 0;
  core::UninitialisedBytes staged_;
  std::vector<iovec> staged_to_;
  // What the last reads fetched: bytes of process ahead_pid_ from ahead_addr_ on.
  pid_t ahead_pid_ = 0;
  std::uint64_t ahead_addr_ = 0;
  core::UninitialisedBytes ahead_;
  std::uint64_t last_read_end_ = 0;  // tagged address just past the last read
  std::uint64_t read_calls_ = 0;
  std::uint64_t write_calls_ = 0;
  std::uint64_t lost_write_bytes_ = 0;
};

}  // namespace softrdma::host
