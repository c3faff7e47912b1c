// A value or an errno, for verbs that create something (rdma-core reports failures as errno
// values: EINVAL for a bad argument, ENOMEM for exhausted resources, EOPNOTSUPP for a feature
// the device lacks).
#pragma once

#include <utility>
#include <variant>

namespace softrdma::core {

template <typename T>
class Expected {
 public:
  Expected(T value) : v_(std::move(value)) {}  // NOLINT: implicit by design
  static Expected error(int errnum) { return Expected(Errno{errnum}); }

  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }
  const T& value() const { return std::get<0>(v_); }
  const T& operator*() const { return std::get<0>(v_); }
  const T* operator->() const { return &std::get<0>(v_); }
  int error() const { return ok() ? 0 : std::get<1>(v_).value; }

 private:
  struct Errno {
    int value;
  };
  explicit Expected(Errno e) : v_(e) {}
  std::variant<T, Errno> v_;
};

}  // namespace softrdma::core
