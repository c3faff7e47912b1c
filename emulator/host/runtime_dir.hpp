// The runtime directory: where each process running a softrdma device puts its stats endpoint
// (stats_endpoint.hpp), and where `softrdma stats` looks for them.
//
// The first of: $SOFTRDMA_RUNTIME_DIR; $XDG_RUNTIME_DIR/softrdma; /tmp/softrdma-$UID (empty
// variables count as unset). A process creates it (the last component only) with mode 0700,
// and nobody uses one that is not a directory owned by this user: in /tmp another user could
// have made it first, to read or fake every endpoint.
#pragma once

#include <string>

namespace softrdma::host {

inline constexpr const char* kRuntimeDirVariable = "SOFTRDMA_RUNTIME_DIR";

std::string runtime_dir_path();

struct RuntimeDir {
  std::string path;
  bool exists = false;  // false: nothing has created it yet (no error)
  std::string error;    // set when it exists but must not be used, or cannot be created
};

// Checks the directory as `softrdma stats` does: it may be absent, but if it is there it must
// be a directory of this user's.
RuntimeDir inspect_runtime_dir();
// The same, creating the directory with mode 0700 when it is absent (the device does this).
RuntimeDir create_runtime_dir();

}  // namespace softrdma::host
