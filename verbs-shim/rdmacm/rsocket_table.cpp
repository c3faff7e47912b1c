// The rsocket numbers. An rsocket needs a number no file descriptor of the process has
// (rsocket(7): rsocket fds cannot be passed to other calls, but rpoll and rselect take both
// kinds in one array), so, as rdma-core does, its number is the fd of its own event channel:
// open as long as the rsocket is, and never another file's. A call with any other number is
// EBADF, as a socket call on a closed descriptor.
#include <cerrno>
#include <mutex>
#include <unordered_map>

#include "verbs-shim/rdmacm/rsocket_state.hpp"

namespace softrdma::rsockets {
namespace {

struct Table {
  std::mutex mutex;
  std::unordered_map<int, Ptr> sockets;
};

Table& table() {
  static auto* t = new Table;  // outlives static destructors: a program may rclose in atexit
  return *t;
}

}  // namespace

Ptr find(int fd) {
  Table& t = table();
  std::lock_guard lock(t.mutex);
  const auto it = t.sockets.find(fd);
  return it == t.sockets.end() ? nullptr : it->second;
}

void insert(const Ptr& s) {
  Table& t = table();
  std::lock_guard lock(t.mutex);
  t.sockets[s->fd] = s;
}

void erase(int fd) {
  Table& t = table();
  std::lock_guard lock(t.mutex);
  t.sockets.erase(fd);
}

int fail(int err) {
  errno = err;
  return -1;
}

}  // namespace softrdma::rsockets
