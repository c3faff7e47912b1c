// This process's memory, for the hosts that run inside the application (embedded RoCE and
// iWARP): plain pointers, as core::DirectMemory, except in on-demand MRs (IBV_ACCESS_ON_DEMAND).
// Their memory need not be mapped while registered, so the engine reaches it through
// process_vm_readv / process_vm_writev on this process, which fail where nothing is mapped:
// the operation then ends in an access error rather than a fault of the whole process.
// Datagram receive buffers (core::Device::Pinning::unpinned) are written the same way, whatever
// their MR: a real RNIC writes into the pages it pinned at registration, so a library that
// unmaps a receive pool before it destroys its UD QP gets away with it there.
//
// An on-demand address carries kOnDemandTag, a bit above every user address (x86-64 and
// AArch64 user addresses fit in 48 bits), so the engine's bounds arithmetic never reaches it.
// Atomics there check that the word can be read first, then use the CPU's atomics as
// DirectMemory does: memory unmapped in the instant between the two still faults.
#pragma once

#include "emulator/core/memory.hpp"

namespace softrdma::host {

// The mark of an on-demand address (core::Memory::on_demand) in this process's memory and in
// softrdmad's (process_memory.hpp, whose slot tag stays below it).
inline constexpr std::uint64_t kOnDemandTag = std::uint64_t{1} << 62;

class LocalMemory final : public core::Memory {
 public:
  bool read(std::uint64_t addr, std::span<std::uint8_t> out) override;
  bool write(std::uint64_t addr, std::span<const std::uint8_t> in) override;
  bool compare_swap(std::uint64_t addr, std::uint64_t compare, std::uint64_t swap, std::uint64_t& original) override;
  bool fetch_add(std::uint64_t addr, std::uint64_t add, std::uint64_t& original) override;
  std::uint64_t on_demand(std::uint64_t addr) override { return addr | kOnDemandTag; }

 private:
  core::DirectMemory direct_;
};

}  // namespace softrdma::host
