#include "emulator/host/sealed_memory.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace softrdma::host {

namespace {

constexpr int kSeals = F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL;

// The size of a sealed memfd, or 0 when `fd` is not one.
std::size_t sealed_memory_size(int fd) {
  struct stat st {};
  if ((::fcntl(fd, F_GET_SEALS) & kSeals) != kSeals || ::fstat(fd, &st) != 0 || st.st_size < 0) return 0;
  return static_cast<std::size_t>(st.st_size);
}

}  // namespace

void* create_sealed_memory(const char* name, std::size_t bytes, int& fd, std::string& error) {
  fd = ::memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0 || ::ftruncate(fd, static_cast<off_t>(bytes)) != 0 || ::fcntl(fd, F_ADD_SEALS, kSeals) != 0) {
    error = std::string("cannot make shared memory (") + name + "): " + std::strerror(errno);
    if (fd >= 0) ::close(fd);
    fd = -1;
    return nullptr;
  }
  void* base = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (base == MAP_FAILED) {
    error = std::string("cannot map shared memory (") + name + "): " + std::strerror(errno);
    ::close(fd);
    fd = -1;
    return nullptr;
  }
  return base;
}

void* map_sealed_memory(int fd, std::size_t bytes) {
  if (bytes == 0 || sealed_memory_size(fd) != bytes) return nullptr;
  void* base = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  return base == MAP_FAILED ? nullptr : base;
}

}  // namespace softrdma::host
