#include "emulator/host/runtime_dir.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace softrdma::host {

namespace {

const char* variable(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr && *value != '\0' ? value : nullptr;
}

RuntimeDir check(bool create) {
  RuntimeDir dir{runtime_dir_path(), false, {}};
  if (create && ::mkdir(dir.path.c_str(), 0700) != 0 && errno != EEXIST) {
    dir.error = "cannot create the runtime directory " + dir.path + ": " + std::strerror(errno);
    return dir;
  }
  struct stat st;
  if (::lstat(dir.path.c_str(), &st) != 0) {
    if (errno != ENOENT) dir.error = "cannot use the runtime directory " + dir.path + ": " + std::strerror(errno);
    return dir;
  }
  if (!S_ISDIR(st.st_mode)) {
    dir.error = "the runtime directory " + dir.path + " is not a directory (a symbolic link or a file is refused)";
  } else if (st.st_uid != ::geteuid()) {
    dir.error = "the runtime directory " + dir.path + " belongs to user " + std::to_string(st.st_uid) +
                ", not to this user (" + std::to_string(::geteuid()) + "); set " + kRuntimeDirVariable;
  } else {
    dir.exists = true;
  }
  return dir;
}

}  // namespace

std::string runtime_dir_path() {
  if (const char* dir = variable(kRuntimeDirVariable)) return dir;
  if (const char* xdg = variable("XDG_RUNTIME_DIR")) return std::string(xdg) + "/softrdma";
  return "/tmp/softrdma-" + std::to_string(::geteuid());
}

RuntimeDir inspect_runtime_dir() { return check(false); }
RuntimeDir create_runtime_dir() { return check(true); }

}  // namespace softrdma::host
