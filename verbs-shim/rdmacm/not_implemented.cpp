#include "verbs-shim/rdmacm/not_implemented.hpp"

#include <cstdio>
#include <cstring>
#include <mutex>

namespace softrdma::rdmacm {

void note_not_implemented(const char* function) noexcept {
  {
    // A short fixed table of the names already reported: the library has 63 that can fail
    // this way, and this is not a fast path.
    static std::mutex mutex;
    static const char* seen[96];
    static std::size_t count = 0;
    std::lock_guard lock(mutex);
    bool told = false;
    for (std::size_t i = 0; i < count && !told; ++i) told = seen[i] == function || std::strcmp(seen[i], function) == 0;
    if (!told) {
      if (count < sizeof seen / sizeof seen[0]) seen[count++] = function;
      std::fprintf(stderr, "softrdma: %s: not implemented yet (ENOSYS)\n", function);
    }
  }
  errno = ENOSYS;  // last: nothing above may overwrite it
}

}  // namespace softrdma::rdmacm
