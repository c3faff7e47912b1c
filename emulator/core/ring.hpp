// A first-in first-out queue on one array that doubles when full: the send queue's WQEs.
// std::deque gives an element of more than 256 bytes (a SendWqe) a heap node of its own, so
// every post allocated one and every retirement freed it. A Ring's slots stay constructed
// after a pop, and a post into one can reuse the capacity of the vectors it holds.
#pragma once

#include <cstddef>
#include <utility>
#include <vector>

namespace softrdma::core {

template <class T>
class Ring {
 public:
  // Front to back, as a range-for walks a std::deque.
  template <class R, class V>
  class Iterator {
   public:
    Iterator(R* ring, std::size_t index) : ring_(ring), index_(index) {}
    V& operator*() const { return (*ring_)[index_]; }
    Iterator& operator++() {
      ++index_;
      return *this;
    }
    bool operator!=(const Iterator& other) const { return index_ != other.index_; }

   private:
    R* ring_;
    std::size_t index_;
  };

  std::size_t size() const { return count_; }
  bool empty() const { return count_ == 0; }
  T& operator[](std::size_t i) { return slots_[slot(i)]; }
  const T& operator[](std::size_t i) const { return slots_[slot(i)]; }
  T& front() { return (*this)[0]; }
  const T& front() const { return (*this)[0]; }

  // A new last element: the slot still holds whatever was popped from it last, for the caller
  // to overwrite.
  T& push_back_slot() {
    if (count_ == slots_.size()) grow();
    ++count_;
    return (*this)[count_ - 1];
  }
  void push_back(T&& value) { push_back_slot() = std::move(value); }
  void pop_front() {
    head_ = slot(1);
    --count_;
  }
  void clear() { head_ = count_ = 0; }

  Iterator<Ring, T> begin() { return {this, 0}; }
  Iterator<Ring, T> end() { return {this, count_}; }
  Iterator<const Ring, const T> begin() const { return {this, 0}; }
  Iterator<const Ring, const T> end() const { return {this, count_}; }

 private:
  // Sizes are powers of two, so the wrap is a mask.
  std::size_t slot(std::size_t i) const { return (head_ + i) & (slots_.size() - 1); }
  void grow() {
    std::vector<T> bigger(slots_.empty() ? kFirstSlots : 2 * slots_.size());
    for (std::size_t i = 0; i < count_; ++i) bigger[i] = std::move((*this)[i]);
    slots_ = std::move(bigger);
    head_ = 0;
  }

  static constexpr std::size_t kFirstSlots = 8;
  std::vector<T> slots_;
  std::size_t head_ = 0, count_ = 0;
};

}  // namespace softrdma::core
