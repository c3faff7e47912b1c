// How a verb the shim does not (yet) implement fails: the way rdma-core fails a verb the
// provider lacks, with EOPNOTSUPP. The rdma-core test suite skips a test on EOPNOTSUPP and
// fails it on any other errno (conformance.md), and programs print strerror(errno), so both
// the return value and errno carry it. Never abort: an abort loses the program's buffered
// stdout (verbs-abi.md §8.17).
#pragma once

#include <cerrno>

namespace softrdma::shim {

// With SOFTRDMA_DEBUG set, writes "softrdma: VERB: not supported (EOPNOTSUPP)" to stderr, once
// per verb. Silent otherwise: tests compare programs' output.
void note_unsupported(const char* verb) noexcept;

// For creators (`struct ibv_x *ibv_create_x(...)`): NULL with errno set.
template <class T>
T* unsupported_null(const char* verb) noexcept {
  note_unsupported(verb);
  errno = EOPNOTSUPP;
  return nullptr;
}

// For verbs documented to return an errno value (destroy, modify, query, post...).
inline int unsupported_errno(const char* verb) noexcept {
  note_unsupported(verb);
  errno = EOPNOTSUPP;
  return EOPNOTSUPP;
}

// For verbs documented to return -1 and set errno (ibv_get_cq_event, ibv_init_ah_from_wc...).
inline int unsupported_minus1(const char* verb) noexcept {
  note_unsupported(verb);
  errno = EOPNOTSUPP;
  return -1;
}

}  // namespace softrdma::shim
