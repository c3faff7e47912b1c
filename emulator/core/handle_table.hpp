// Objects addressed by small integer handles, as verbs objects are. Handle 0 is never used,
// so it can mean "none" (no SRQ, no AH). Freed handles are reused, most recently freed first.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

namespace softrdma::core {

template <typename T>
class HandleTable {
 public:
  explicit HandleTable(std::uint32_t capacity) : capacity_(capacity) {}

  // nullopt when the table is full.
  std::optional<std::uint32_t> insert(T value) {
    if (!free_.empty()) {
      const std::uint32_t handle = free_.back();
      free_.pop_back();
      slots_[handle - 1] = std::move(value);
      ++size_;
      return handle;
    }
    if (slots_.size() >= capacity_) return std::nullopt;
    slots_.push_back(std::move(value));
    ++size_;
    return static_cast<std::uint32_t>(slots_.size());
  }
  T* find(std::uint32_t handle) {
    return handle == 0 || handle > slots_.size() || !slots_[handle - 1] ? nullptr : &*slots_[handle - 1];
  }
  const T* find(std::uint32_t handle) const { return const_cast<HandleTable*>(this)->find(handle); }
  bool erase(std::uint32_t handle) {
    if (!find(handle)) return false;
    slots_[handle - 1].reset();
    free_.push_back(handle);
    --size_;
    return true;
  }
  std::uint32_t size() const { return size_; }
  std::uint32_t slots() const { return static_cast<std::uint32_t>(slots_.size()); }  // handles are 1..slots()

  template <typename F>
  void for_each(F&& f) {
    for (std::uint32_t i = 0; i < slots_.size(); ++i)
      if (slots_[i]) f(i + 1, *slots_[i]);
  }

 private:
  std::uint32_t capacity_;
  std::uint32_t size_ = 0;
  std::vector<std::optional<T>> slots_;
  std::vector<std::uint32_t> free_;
};

}  // namespace softrdma::core
