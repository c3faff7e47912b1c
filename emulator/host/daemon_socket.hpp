// Where softrdmad listens, and connecting to it: shared by the daemon (which probes for a live
// one before taking a path over) and the shim's daemon client.
#pragma once

#include <string>

namespace softrdma::host {

inline constexpr const char* kDaemonVariable = "SOFTRDMA_DAEMON";

// The runtime directory's softrdmad.sock (runtime_dir.hpp), used when neither the daemon's
// --socket nor SOFTRDMA_DAEMON names one.
std::string default_daemon_socket();

// A connected SOCK_SEQPACKET socket, or -1 with errno set.
int connect_daemon_socket(const std::string& path);

// Sends the protocol's Hello on `fd` with `event_fd` attached (SCM_RIGHTS): the socket on which
// the daemon will send this client's events (daemon_protocol.hpp).
bool send_daemon_hello(int fd, int event_fd);

}  // namespace softrdma::host
