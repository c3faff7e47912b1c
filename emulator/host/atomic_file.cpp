#include "emulator/host/atomic_file.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace softrdma::host {

std::string write_file_atomically(const std::string& path, std::string_view text) {
  // The pid keeps two processes that were given the same file from sharing a temporary.
  const std::string temporary = path + ".tmp." + std::to_string(::getpid());
  const int fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return "cannot create " + temporary + ": " + std::strerror(errno);
  std::string error;
  for (std::size_t done = 0; done < text.size() && error.empty();) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n > 0) {
      done += static_cast<std::size_t>(n);
    } else if (n == 0 || errno != EINTR) {
      error = "cannot write " + temporary + ": " + std::strerror(n == 0 ? EIO : errno);
    }
  }
  if (::close(fd) != 0 && error.empty()) error = "cannot write " + temporary + ": " + std::strerror(errno);
  if (error.empty() && std::rename(temporary.c_str(), path.c_str()) != 0) {
    error = "cannot rename " + temporary + " to " + path + ": " + std::strerror(errno);
  }
  if (!error.empty()) ::unlink(temporary.c_str());
  return error;
}

}  // namespace softrdma::host
