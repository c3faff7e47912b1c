#include "emulator/host/process_memory.hpp"

#include <sys/uio.h>

namespace softrdma::host {

std::optional<std::uint16_t> ProcessMemory::attach(pid_t pid) {
  for (std::size_t slot = 1; slot < kSlots; ++slot) {
    if (pids_[slot] == 0) {
      pids_[slot] = pid;
      return static_cast<std::uint16_t>(slot);
    }
  }
  return std::nullopt;
}

void ProcessMemory::detach(std::uint16_t slot) {
  if (slot < kSlots) pids_[slot] = 0;
}

std::optional<std::uint64_t> ProcessMemory::tag(std::uint16_t slot, std::uint64_t addr) {
  if (addr > kAddressMask) return std::nullopt;
  return std::uint64_t{slot} << kTagShift | addr;
}

pid_t ProcessMemory::pid_of(std::uint64_t addr) const {
  const std::uint64_t slot = addr >> kTagShift;
  return slot < kSlots ? pids_[slot] : 0;
}

// One call moves the whole range or fails: a partial transfer means the range crossed into an
// unmapped page, which is an access error for the engine as for a NIC's IOMMU.
bool ProcessMemory::read(std::uint64_t addr, std::span<std::uint8_t> out) {
  const pid_t pid = pid_of(addr);
  if (pid == 0) return false;
  if (out.empty()) return true;
  iovec local{out.data(), out.size()};
  iovec remote{reinterpret_cast<void*>(addr & kAddressMask), out.size()};
  return process_vm_readv(pid, &local, 1, &remote, 1, 0) == static_cast<ssize_t>(out.size());
}

bool ProcessMemory::write(std::uint64_t addr, std::span<const std::uint8_t> in) {
  const pid_t pid = pid_of(addr);
  if (pid == 0) return false;
  if (in.empty()) return true;
  iovec local{const_cast<std::uint8_t*>(in.data()), in.size()};
  iovec remote{reinterpret_cast<void*>(addr & kAddressMask), in.size()};
  return process_vm_writev(pid, &local, 1, &remote, 1, 0) == static_cast<ssize_t>(in.size());
}

bool ProcessMemory::compare_swap(std::uint64_t addr, std::uint64_t compare, std::uint64_t swap,
                                 std::uint64_t& original) {
  std::uint64_t value = 0;
  if (!read(addr, {reinterpret_cast<std::uint8_t*>(&value), sizeof value})) return false;
  original = value;
  if (value != compare) return true;
  return write(addr, {reinterpret_cast<const std::uint8_t*>(&swap), sizeof swap});
}

bool ProcessMemory::fetch_add(std::uint64_t addr, std::uint64_t add, std::uint64_t& original) {
  std::uint64_t value = 0;
  if (!read(addr, {reinterpret_cast<std::uint8_t*>(&value), sizeof value})) return false;
  original = value;
  value += add;
  return write(addr, {reinterpret_cast<const std::uint8_t*>(&value), sizeof value});
}

}  // namespace softrdma::host
