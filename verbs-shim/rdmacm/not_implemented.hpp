// How a librdmacm function softrdma does not implement yet fails: -1 (or NULL, or nothing for
// a void function) with errno ENOSYS, which programs print through perror/strerror ("Function
// not implemented"), plus one line on stderr naming softrdma and the function, once per
// function, so that a program's own message is never the only clue. Never abort: an abort
// loses the program's buffered stdout (verbs-abi.md §8.17).
#pragma once

#include <cerrno>
#include <cstddef>

namespace softrdma::rdmacm {

// Writes "softrdma: FUNCTION: not implemented yet (ENOSYS)" to stderr the first time FUNCTION
// is named, and sets errno to ENOSYS.
void note_not_implemented(const char* function) noexcept;

// For functions documented to return -1 and set errno (rdma_create_id, rsocket, rrecv, ...).
inline int not_implemented_minus1(const char* function) noexcept {
  note_not_implemented(function);
  return -1;
}

// For creators returning a pointer (rdma_create_event_channel).
template <class T>
T* not_implemented_null(const char* function) noexcept {
  note_not_implemented(function);
  return nullptr;
}

}  // namespace softrdma::rdmacm
