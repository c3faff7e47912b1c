// A byte vector whose resize() leaves the new bytes unset, for buffers that are written over
// at once (by a copy or the kernel): zero-filling them first costs as much as the copy. The
// capture stage queues frames in one; the daemon stages DMA and reads ahead in two (zeroing
// them was 4% of a daemon running ib_write_bw).
#pragma once

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

namespace softrdma::core {

template <class T>
struct UninitialisedAllocator : std::allocator<T> {
  template <class U>
  struct rebind {
    using other = UninitialisedAllocator<U>;
  };
  template <class U>
  void construct(U* p) noexcept {
    ::new (static_cast<void*>(p)) U;
  }
  template <class U, class... A>
  void construct(U* p, A&&... a) {
    ::new (static_cast<void*>(p)) U(std::forward<A>(a)...);
  }
};

using UninitialisedBytes = std::vector<std::uint8_t, UninitialisedAllocator<std::uint8_t>>;

}  // namespace softrdma::core
