#include "emulator/host/daemon_socket.hpp"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "emulator/host/daemon_protocol.hpp"
#include "emulator/host/runtime_dir.hpp"

namespace softrdma::host {

std::string default_daemon_socket() { return runtime_dir_path() + "/softrdmad.sock"; }

int connect_daemon_socket(const std::string& path) {
  sockaddr_un addr{};
  if (path.size() >= sizeof addr.sun_path) {
    errno = ENAMETOOLONG;
    return -1;
  }
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  const int fd = ::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0) {
    const int err = errno;
    ::close(fd);
    errno = err;
    return -1;
  }
  return fd;
}

bool send_daemon_hello(int fd, int event_fd) {
  daemon::Hello hello;
  iovec iov{&hello, sizeof hello};
  char control[CMSG_SPACE(sizeof(int))] = {};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  cmsghdr* c = CMSG_FIRSTHDR(&msg);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof(int));
  std::memcpy(CMSG_DATA(c), &event_fd, sizeof event_fd);
  return ::sendmsg(fd, &msg, MSG_NOSIGNAL) == static_cast<ssize_t>(sizeof hello);
}

}  // namespace softrdma::host
