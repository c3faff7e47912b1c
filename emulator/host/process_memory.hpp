// Registered memory of other processes, for the daemon's engine: core::Memory over
// process_vm_readv / process_vm_writev (DESIGN.md §3, §5).
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
#pragma once

#include <sys/types.h>

#include <array>
#include <cstdint>
#include <optional>

#include "emulator/core/memory.hpp"

namespace softrdma::host {

class ProcessMemory final : public core::Memory {
 public:
  static constexpr unsigned kTagShift = 48;
  static constexpr std::uint64_t kAddressMask = (std::uint64_t{1} << kTagShift) - 1;
  static constexpr std::size_t kSlots = 1u << 12;  // clients at once (slot 0 is never used)

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

 private:
  pid_t pid_of(std::uint64_t addr) const;  // 0 for a slot no one holds

  std::array<pid_t, kSlots> pids_{};
};

}  // namespace softrdma::host
