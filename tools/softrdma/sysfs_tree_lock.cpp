#include "tools/softrdma/sysfs_tree_lock.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <string_view>

namespace softrdma::run {

namespace fs = std::filesystem;

namespace {

constexpr const char* kLockFile = ".in-use";
constexpr std::string_view kTreePrefix = "sysfs-";

bool same_file(int fd, const fs::path& path) {
  struct stat held {};
  struct stat now {};
  return ::fstat(fd, &held) == 0 && ::stat(path.c_str(), &now) == 0 && held.st_dev == now.st_dev &&
         held.st_ino == now.st_ino;
}

// Shares the lock on an open lock file; no O_CLOEXEC on FD, so the program inherits it.
int share(int fd) {
  if (fd >= 0 && ::flock(fd, LOCK_SH) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

}  // namespace

int create_and_hold_tree(const fs::path& root) {
  return share(::open((root / kLockFile).c_str(), O_RDONLY | O_CREAT | O_EXCL, 0444));
}

int hold_tree(const fs::path& root) {
  const fs::path lock = root / kLockFile;
  const int fd = share(::open(lock.c_str(), O_RDONLY));
  if (fd >= 0 && !same_file(fd, lock)) {
    ::close(fd);
    return -1;
  }
  return fd;
}

void remove_unheld_trees(const fs::path& dir) {
  std::error_code ec;
  for (const fs::directory_entry& entry : fs::directory_iterator(dir, ec)) {
    if (!entry.path().filename().string().starts_with(kTreePrefix)) continue;
    const int fd = ::open((entry.path() / kLockFile).c_str(), O_RDONLY | O_CLOEXEC);
    // A tree without a lock file is one an earlier softrdma wrote, which held none.
    if (fd < 0 || ::flock(fd, LOCK_EX | LOCK_NB) == 0) fs::remove_all(entry.path(), ec);
    if (fd >= 0) ::close(fd);
  }
}

}  // namespace softrdma::run
