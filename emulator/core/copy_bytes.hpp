// The one memcpy the data path uses for payloads (MR <-> packet), and why it is not a plain
// memcpy: glibc 2.36's x86-64 memcpy switches to `rep movsb` from 4 KiB (its
// x86_rep_movsb_threshold with AVX2), and the AMD EPYC machines softrdma is tested on run a
// `rep movsb` whose source and destination differ in alignment mod 32 at a tenth of the speed
// (2.7 GB/s against 29 GB/s, measured with 4 KiB and 64 KiB copies). A packet's payload sits
// 12 or 28 bytes behind its headers, so every payload copy of a 4096-byte MTU was such a copy.
// Pieces below the threshold take glibc's vector loop, which does not care about alignment.
#pragma once

#include <cstddef>
#include <cstring>

namespace softrdma::core {

inline void copy_bytes(void* to, const void* from, std::size_t n) {
  constexpr std::size_t kPiece = 2048;
  auto* d = static_cast<unsigned char*>(to);
  const auto* s = static_cast<const unsigned char*>(from);
  for (; n > kPiece; n -= kPiece, d += kPiece, s += kPiece) std::memcpy(d, s, kPiece);
  if (n != 0) std::memcpy(d, s, n);
}

}  // namespace softrdma::core
