// How the engine reaches application memory. It never dereferences an application address
// itself: the in-process host hands it DirectMemory (plain pointers); the daemon will hand it
// an implementation over process_vm_readv/writev on the client process.
#pragma once

#include <cstdint>
#include <span>

#include "emulator/core/copy_bytes.hpp"

namespace softrdma::core {

class Memory {
 public:
  virtual ~Memory() = default;
  // Copies between host address `addr` and a buffer; false when the memory is not readable
  // or writable (the caller turns that into a local or remote access error).
  virtual bool read(std::uint64_t addr, std::span<std::uint8_t> out) = 0;
  virtual bool write(std::uint64_t addr, std::span<const std::uint8_t> in) = 0;
  // 64-bit atomics at an 8-byte-aligned host address (IBTA vol. 1 s9.4.5): returns the
  // original value through `original`.
  virtual bool compare_swap(std::uint64_t addr, std::uint64_t compare, std::uint64_t swap, std::uint64_t& original) = 0;
  virtual bool fetch_add(std::uint64_t addr, std::uint64_t add, std::uint64_t& original) = 0;
  // The address the engine uses for `addr` in an on-demand region (access::on_demand), whose
  // memory may be unmapped when it is reached: accesses there fail instead of faulting. An
  // implementation that checks every access already needs no mark.
  virtual std::uint64_t on_demand(std::uint64_t addr) { return addr; }
  // Makes every write so far visible and forgets anything read ahead. An implementation may
  // defer writes and read ahead (the daemon's batches its system calls) until the next call:
  // the engine calls it before a completion can be seen (poll_cq), the host before packets
  // leave (an ACK tells the peer its data landed) and before events and CQ rings are published.
  virtual void flush() {}
};

// Host addresses are this process's pointers. Atomics use the compiler's atomic builtins so
// that the application's CPU atomics on the same word see them (IBV_ATOMIC_HCA semantics).
class DirectMemory final : public Memory {
 public:
  bool read(std::uint64_t addr, std::span<std::uint8_t> out) override {
    copy_bytes(out.data(), reinterpret_cast<const void*>(addr), out.size());
    return true;
  }
  bool write(std::uint64_t addr, std::span<const std::uint8_t> in) override {
    copy_bytes(reinterpret_cast<void*>(addr), in.data(), in.size());
    return true;
  }
  bool compare_swap(std::uint64_t addr, std::uint64_t compare, std::uint64_t swap, std::uint64_t& original) override {
    auto* p = reinterpret_cast<std::uint64_t*>(addr);
    original = compare;
    __atomic_compare_exchange_n(p, &original, swap, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
    return true;
  }
  bool fetch_add(std::uint64_t addr, std::uint64_t add, std::uint64_t& original) override {
    original = __atomic_fetch_add(reinterpret_cast<std::uint64_t*>(addr), add, __ATOMIC_SEQ_CST);
    return true;
  }
};

}  // namespace softrdma::core
