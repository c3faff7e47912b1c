// A growable byte buffer whose resize() leaves the new bytes unset, for buffers that are
// written over at once (by a copy or the kernel): zero-filling them first costs as much as the
// copy. The capture stage queues frames in one; the daemon stages DMA and reads ahead in two;
// the iWARP host queues each connection's outgoing stream in one. Not a std::vector with an
// allocator that skips construction: without optimisation (the sanitizer build) such a vector
// still constructs and destroys each byte with a call of its own.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <utility>

namespace softrdma::core {

class UninitialisedBytes {
 public:
  UninitialisedBytes() = default;
  explicit UninitialisedBytes(std::size_t size) { resize(size); }
  UninitialisedBytes(const std::uint8_t* first, const std::uint8_t* last) { append(first, last); }
  UninitialisedBytes(const UninitialisedBytes& other) : UninitialisedBytes(other.begin(), other.end()) {}
  UninitialisedBytes(UninitialisedBytes&& other) noexcept
      : bytes_(std::move(other.bytes_)),
        size_(std::exchange(other.size_, 0)),
        capacity_(std::exchange(other.capacity_, 0)) {}
  UninitialisedBytes& operator=(UninitialisedBytes other) noexcept {
    swap(other);
    return *this;
  }

  std::uint8_t* data() { return bytes_.get(); }
  const std::uint8_t* data() const { return bytes_.get(); }
  std::size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  std::uint8_t* begin() { return data(); }
  std::uint8_t* end() { return data() + size_; }
  const std::uint8_t* begin() const { return data(); }
  const std::uint8_t* end() const { return data() + size_; }
  std::uint8_t& operator[](std::size_t i) { return bytes_[i]; }

  void clear() { size_ = 0; }
  void reserve(std::size_t n) {
    if (n > capacity_) reallocate(n);
  }
  // Bytes beyond the old size are unset.
  void resize(std::size_t n) {
    if (n > capacity_) reallocate(std::max(n, capacity_ * 2));
    size_ = n;
  }
  void append(const std::uint8_t* first, const std::uint8_t* last) {
    const std::size_t at = size_, n = static_cast<std::size_t>(last - first);
    resize(at + n);
    if (n != 0) std::memcpy(data() + at, first, n);
  }
  // Drops the first n bytes.
  void erase_front(std::size_t n) {
    if (n < size_) std::memmove(data(), data() + n, size_ - n);
    size_ = n < size_ ? size_ - n : 0;
  }
  void swap(UninitialisedBytes& other) noexcept {
    std::swap(bytes_, other.bytes_);
    std::swap(size_, other.size_);
    std::swap(capacity_, other.capacity_);
  }

 private:
  void reallocate(std::size_t capacity) {
    auto bigger = std::make_unique_for_overwrite<std::uint8_t[]>(capacity);
    if (size_ != 0) std::memcpy(bigger.get(), bytes_.get(), size_);
    bytes_ = std::move(bigger);
    capacity_ = capacity;
  }

  std::unique_ptr<std::uint8_t[]> bytes_;
  std::size_t size_ = 0;
  std::size_t capacity_ = 0;
};

}  // namespace softrdma::core
