#include "emulator/host/process_memory.hpp"

#include <limits.h>
#include <sys/uio.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "emulator/core/copy_bytes.hpp"

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
  if (slot >= kSlots) return;
  // What is staged for a departing client goes nowhere: its process is gone or going, and its
  // pid may soon name another.
  if (staged_pid_ == pids_[slot]) {
    staged_.clear();
    staged_to_.clear();
  }
  if (ahead_pid_ == pids_[slot]) ahead_pid_ = 0;
  pids_[slot] = 0;
}

std::optional<std::uint64_t> ProcessMemory::tag(std::uint16_t slot, std::uint64_t addr) {
  if (addr > kAddressMask) return std::nullopt;
  return std::uint64_t{slot} << kTagShift | addr;
}

pid_t ProcessMemory::pid_of(std::uint64_t addr) const {
  const std::uint64_t slot = (addr & ~kOnDemandTag) >> kTagShift;
  return slot < kSlots ? pids_[slot] : 0;
}

// A read moves the whole range or fails: a partial transfer means the range crossed into an
// unmapped page, which is an access error for the engine as for a NIC's IOMMU.
bool ProcessMemory::read(std::uint64_t addr, std::span<std::uint8_t> out) {
  const pid_t pid = pid_of(addr);
  if (pid == 0) return false;
  if (out.empty()) return true;
  if (!staged_.empty()) write_staged();  // reads see every earlier write
  const std::uint64_t at = addr & kAddressMask;
  if (pid == ahead_pid_ && at >= ahead_addr_ && at - ahead_addr_ + out.size() <= ahead_.size()) {
    core::copy_bytes(out.data(), ahead_.data() + (at - ahead_addr_), out.size());
    last_read_end_ = addr + out.size();
    return true;
  }
  const bool streaming = addr == last_read_end_;
  last_read_end_ = addr + out.size();
  ++read_calls_;
  if (!streaming) {
    iovec local{out.data(), out.size()};
    iovec remote{reinterpret_cast<void*>(at), out.size()};
    return process_vm_readv(pid, &local, 1, &remote, 1, 0) == static_cast<ssize_t>(out.size());
  }
  ahead_.resize(std::max(out.size(), std::min(kReadAhead, out.size() * kReadAheadPackets)));
  iovec local{ahead_.data(), ahead_.size()};
  iovec remote{reinterpret_cast<void*>(at), ahead_.size()};
  const ssize_t got = process_vm_readv(pid, &local, 1, &remote, 1, 0);
  if (got < static_cast<ssize_t>(out.size())) {
    ahead_pid_ = 0;
    return false;
  }
  ahead_.resize(static_cast<std::size_t>(got));
  ahead_pid_ = pid;
  ahead_addr_ = at;
  core::copy_bytes(out.data(), ahead_.data(), out.size());
  return true;
}

bool ProcessMemory::write(std::uint64_t addr, std::span<const std::uint8_t> in) {
  const pid_t pid = pid_of(addr);
  if (pid == 0) return false;
  if (in.empty()) return true;
  ahead_pid_ = 0;  // what was read ahead may be what this overwrites
  if (addr & kOnDemandTag) {
    write_staged();  // earlier writes first
    ++write_calls_;
    iovec local{const_cast<std::uint8_t*>(in.data()), in.size()};
    iovec remote{reinterpret_cast<void*>(addr & kAddressMask), in.size()};
    return process_vm_writev(pid, &local, 1, &remote, 1, 0) == static_cast<ssize_t>(in.size());
  }
  if (pid != staged_pid_ || staged_to_.size() == IOV_MAX || staged_.size() + in.size() > kStagedBytes) write_staged();
  staged_pid_ = pid;
  auto* to = reinterpret_cast<std::uint8_t*>(addr & kAddressMask);
  // The packets of one message land back to back: one destination run for all of them.
  if (!staged_to_.empty() && static_cast<std::uint8_t*>(staged_to_.back().iov_base) + staged_to_.back().iov_len == to) {
    staged_to_.back().iov_len += in.size();
  } else {
    staged_to_.push_back({to, in.size()});
  }
  const std::size_t at = staged_.size();
  staged_.resize(at + in.size());
  core::copy_bytes(staged_.data() + at, in.data(), in.size());
  return true;
}

void ProcessMemory::flush() {
  if (!staged_.empty()) write_staged();
  ahead_pid_ = 0;
  last_read_end_ = 0;
}

void ProcessMemory::write_staged() {
  if (staged_.empty()) return;
  iovec local{staged_.data(), staged_.size()};
  ++write_calls_;
  const ssize_t n = process_vm_writev(staged_pid_, &local, 1, staged_to_.data(), staged_to_.size(), 0);
  const std::size_t written = n < 0 ? 0 : static_cast<std::size_t>(n);
  if (written < staged_.size()) {
    lost_write_bytes_ += staged_.size() - written;
    std::fprintf(
        stderr, "softrdmad: %zu bytes could not be written into process %d (%s): was registered memory unmapped?\n",
        staged_.size() - written, static_cast<int>(staged_pid_), n < 0 ? std::strerror(errno) : "partial write");
  }
  staged_.clear();
  staged_to_.clear();
}

std::vector<net::NamedCount> ProcessMemory::counters() const {
  return {{"read_calls", read_calls_}, {"write_calls", write_calls_}, {"lost_write_bytes", lost_write_bytes_}};
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
