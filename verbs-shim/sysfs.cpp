// The two sysfs helpers rdma-core exports. There is no kernel RDMA device behind srdma0 or
// srdmaiw0, so reads under their ibdev_paths are answered from memory, with the files `softrdma run`'s view
// shows (sysfs_files.hpp); every other path is read from the file system, as rdma-core would
// (librdmacm asks for class/misc/rdma_cm/abi_version and copes with its absence).
#include <fcntl.h>
#include <net/if.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>

#include "verbs-shim/context.hpp"
#include "verbs-shim/sysfs_files.hpp"

namespace softrdma::shim {

namespace {

// The device's file under its ibdev_path (sysfs_files.hpp), or empty when there is none.
std::string virtual_file(std::string_view file, Transport transport) {
  const DeviceIdentity* id = device_identity();
  if (id == nullptr) return {};
  SysfsFacts facts{id->address, {}, transport};
  char netdev[IF_NAMESIZE];
  if (id->ifindex != 0 && ::if_indextoname(static_cast<unsigned>(id->ifindex), netdev) != nullptr)
    facts.netdev = netdev;
  for (const SysfsFile& f : sysfs_files(facts)) {
    if (f.path == file && !f.path.ends_with('/')) return f.content;
  }
  return {};
}

// Stores `content` in buf like a read() of the file: strips one trailing newline and
// NUL-terminates; fails (-1) when it would not fit with its terminator.
int deliver(std::string_view content, char* buf, std::size_t size) {
  if (!content.empty() && content.back() == '\n') content.remove_suffix(1);
  if (content.size() >= size) {
    errno = EOVERFLOW;
    return -1;
  }
  content.copy(buf, content.size());
  buf[content.size()] = '\0';
  return static_cast<int>(content.size());
}

}  // namespace

}  // namespace softrdma::shim

using namespace softrdma::shim;

// rdma-core's rule: $SYSFS_PATH without trailing slashes, or /sys.
SRDMA_EXPORT const char* ibv_get_sysfs_path(void) {
  static const std::string path = [] {
    const char* env = std::getenv("SYSFS_PATH");
    std::string p = env != nullptr && *env != '\0' ? env : "/sys";
    while (p.size() > 1 && p.back() == '/') p.pop_back();
    return p;
  }();
  return path.c_str();
}

SRDMA_EXPORT int ibv_read_sysfs_file(const char* dir, const char* file, char* buf, std::size_t size) {
  if (dir == nullptr || file == nullptr || buf == nullptr || size == 0) {
    errno = EINVAL;
    return -1;
  }
  ibv_device* dev = the_device();
  ibv_device* iwarp = dev != nullptr ? the_iwarp_device() : nullptr;
  const bool roce_dir = dev != nullptr && std::strcmp(dir, dev->ibdev_path) == 0;
  if (roce_dir || (iwarp != nullptr && std::strcmp(dir, iwarp->ibdev_path) == 0)) {
    std::string content = virtual_file(file, roce_dir ? Transport::roce : Transport::iwarp);
    if (content.empty()) {
      errno = ENOENT;
      return -1;
    }
    return deliver(content, buf, size);
  }
  std::string path = std::string(dir) + "/" + file;
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  std::string content(size, '\0');
  ssize_t n = ::read(fd, content.data(), size);
  ::close(fd);
  if (n < 0) return -1;
  content.resize(static_cast<std::size_t>(n));
  return deliver(content, buf, size);
}
