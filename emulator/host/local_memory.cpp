#include "emulator/host/local_memory.hpp"

#include <sys/uio.h>
#include <unistd.h>

namespace softrdma::host {

namespace {

bool is_on_demand(std::uint64_t addr) { return (addr & kOnDemandTag) != 0; }
void* pointer(std::uint64_t addr) { return reinterpret_cast<void*>(addr & ~kOnDemandTag); }

// Whether all of [addr, addr + n) could be read: the kernel copies what is mapped and stops at
// the first page that is not.
bool copy_in(std::uint64_t addr, void* out, std::size_t n) {
  const iovec local{out, n};
  const iovec remote{pointer(addr), n};
  return ::process_vm_readv(::getpid(), &local, 1, &remote, 1, 0) == static_cast<ssize_t>(n);
}

bool copy_out(std::uint64_t addr, const void* in, std::size_t n) {
  const iovec local{const_cast<void*>(in), n};
  const iovec remote{pointer(addr), n};
  return ::process_vm_writev(::getpid(), &local, 1, &remote, 1, 0) == static_cast<ssize_t>(n);
}

}  // namespace

bool LocalMemory::read(std::uint64_t addr, std::span<std::uint8_t> out) {
  if (!is_on_demand(addr)) return direct_.read(addr, out);
  return out.empty() || copy_in(addr, out.data(), out.size());
}

bool LocalMemory::write(std::uint64_t addr, std::span<const std::uint8_t> in) {
  if (!is_on_demand(addr)) return direct_.write(addr, in);
  return in.empty() || copy_out(addr, in.data(), in.size());
}

bool LocalMemory::compare_swap(std::uint64_t addr, std::uint64_t compare, std::uint64_t swap, std::uint64_t& original) {
  if (is_on_demand(addr) && !copy_in(addr, &original, sizeof original)) return false;
  return direct_.compare_swap(addr & ~kOnDemandTag, compare, swap, original);
}

bool LocalMemory::fetch_add(std::uint64_t addr, std::uint64_t add, std::uint64_t& original) {
  if (is_on_demand(addr) && !copy_in(addr, &original, sizeof original)) return false;
  return direct_.fetch_add(addr & ~kOnDemandTag, add, original);
}

}  // namespace softrdma::host
