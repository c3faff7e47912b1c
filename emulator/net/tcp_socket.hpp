// Non-blocking kernel TCP sockets for the iWARP host: opening a listener or an outgoing
// connection on the device's address, accepting, and the endpoints and segment size a
// connection got. The engine's side of a connection is core::IwarpConnectionManager.
#pragma once

#include <cstdint>
#include <optional>

#include "emulator/core/iwarp_cm.hpp"

namespace softrdma::net {

// A descriptor that closes with its owner.
class SocketFd {
 public:
  SocketFd() = default;
  explicit SocketFd(int fd) : fd_(fd) {}
  SocketFd(SocketFd&& o) noexcept : fd_(o.release()) {}
  SocketFd& operator=(SocketFd&& o) noexcept;
  SocketFd(const SocketFd&) = delete;
  SocketFd& operator=(const SocketFd&) = delete;
  ~SocketFd();
  int get() const { return fd_; }
  int release();

 private:
  int fd_ = -1;
};

struct SocketResult {
  SocketFd fd;
  int error = 0;  // an errno value; fd is then closed
};

// A listening socket on `local` (address and port; port 0 picks one).
SocketResult listen_tcp(const core::TcpEndpoint& local);
// A connection to `remote` from `from` (port chosen by the kernel), under way: it is up, or
// failed with connect_error(), when the socket becomes writable.
SocketResult connect_tcp(const core::Gid& from, const core::TcpEndpoint& remote);
int connect_error(int fd);  // SO_ERROR: 0 once connected
// The next connection waiting on a listener; none when there is none (or on an error).
std::optional<SocketFd> accept_tcp(int listener);

core::TcpEndpoint local_endpoint(int fd);
core::TcpEndpoint remote_endpoint(int fd);
// The connection's maximum segment size: iWARP's FPDUs each fit one (RFC 5044 s5.1).
std::uint32_t segment_size(int fd);

}  // namespace softrdma::net
