#include "emulator/net/tcp_socket.hpp"

#include <fcntl.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>

#include "emulator/net/udp_gid.hpp"

namespace softrdma::net {
namespace {

SocketResult failed() {
  SocketResult r;
  r.error = errno;
  return r;
}

SocketResult open_socket(const core::Gid& address) {
  sockaddr_storage sa{};
  socket_address_of(address, 0, sa);
  const int fd = ::socket(sa.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return failed();
  SocketResult r;
  r.fd = SocketFd(fd);
  const int one = 1;
  // FPDUs are whole messages: Nagle would hold a small one back for the peer's ACK.
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return r;
}

core::TcpEndpoint endpoint_of(const sockaddr_storage& sa) { return {gid_of(sa).value_or(core::Gid{}), port_of(sa)}; }

}  // namespace

SocketFd& SocketFd::operator=(SocketFd&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = o.release();
  }
  return *this;
}

SocketFd::~SocketFd() {
  if (fd_ >= 0) ::close(fd_);
}

int SocketFd::release() {
  const int fd = fd_;
  fd_ = -1;
  return fd;
}

SocketResult listen_tcp(const core::TcpEndpoint& local) {
  SocketResult r = open_socket(local.address);
  if (r.error) return r;
  const int one = 1;
  ::setsockopt(r.fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_storage sa{};
  const socklen_t len = socket_address_of(local.address, local.port, sa);
  if (::bind(r.fd.get(), reinterpret_cast<const sockaddr*>(&sa), len) != 0 || ::listen(r.fd.get(), 128) != 0)
    return failed();
  return r;
}

SocketResult connect_tcp(const core::Gid& from, const core::TcpEndpoint& remote) {
  SocketResult r = open_socket(remote.address);
  if (r.error) return r;
  sockaddr_storage sa{};
  socklen_t len = socket_address_of(from, 0, sa);
  if (::bind(r.fd.get(), reinterpret_cast<const sockaddr*>(&sa), len) != 0) return failed();
  len = socket_address_of(remote.address, remote.port, sa);
  if (::connect(r.fd.get(), reinterpret_cast<const sockaddr*>(&sa), len) != 0 && errno != EINPROGRESS) return failed();
  return r;
}

int connect_error(int fd) {
  int error = 0;
  socklen_t len = sizeof error;
  if (::getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &len) != 0) return errno;
  return error;
}

std::optional<SocketFd> accept_tcp(int listener) {
  const int fd = ::accept4(listener, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
  if (fd < 0) return std::nullopt;
  const int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return SocketFd(fd);
}

core::TcpEndpoint local_endpoint(int fd) {
  sockaddr_storage sa{};
  socklen_t len = sizeof sa;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &len);
  return endpoint_of(sa);
}

core::TcpEndpoint remote_endpoint(int fd) {
  sockaddr_storage sa{};
  socklen_t len = sizeof sa;
  ::getpeername(fd, reinterpret_cast<sockaddr*>(&sa), &len);
  return endpoint_of(sa);
}

std::uint32_t segment_size(int fd) {
  int mss = 0;
  socklen_t len = sizeof mss;
  if (::getsockopt(fd, IPPROTO_TCP, TCP_MAXSEG, &mss, &len) != 0 || mss <= 0) return 536;  // RFC 9293's default
  return static_cast<std::uint32_t>(mss);
}

}  // namespace softrdma::net
