#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "verbs-shim/unsupported.hpp"

namespace softrdma::shim {

void note_unsupported(const char* verb) noexcept {
  static const bool enabled = std::getenv("SOFTRDMA_DEBUG") != nullptr;
  if (!enabled) return;
  // A short fixed table of names already reported; verbs are few and this is a debug path.
  static std::mutex mutex;
  static const char* seen[256];
  static std::size_t count = 0;
  std::lock_guard lock(mutex);
  for (std::size_t i = 0; i < count; ++i) {
    if (seen[i] == verb || std::strcmp(seen[i], verb) == 0) return;
  }
  if (count < sizeof seen / sizeof seen[0]) seen[count++] = verb;
  std::fprintf(stderr, "softrdma: %s: not supported (EOPNOTSUPP)\n", verb);
}

}  // namespace softrdma::shim
