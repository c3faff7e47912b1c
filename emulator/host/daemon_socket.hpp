// Where softrdmad listens, and connecting to it: shared by the daemon (which probes for a live
// one before taking a path over) and the shim's daemon client.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <string>

namespace softrdma::host {

inline constexpr const char* kDaemonVariable = "SOFTRDMA_DAEMON";

// The runtime directory's softrdmad.sock (runtime_dir.hpp), used when neither the daemon's
// --socket nor SOFTRDMA_DAEMON names one.
std::string default_daemon_socket();

// A connected SOCK_SEQPACKET socket, or -1 with errno set.
int connect_daemon_socket(const std::string& path);

// One message on `sock` with the descriptor `fd` attached (SCM_RIGHTS; -1: none); whether it
// was sent whole.
bool send_with_fd(int sock, const void* data, std::size_t length, int fd);
// One message into `buffer`, and a descriptor if one came with it (else -1; extra ones are
// closed). Returns recvmsg's result; a message longer than the buffer counts as an error.
ssize_t receive_with_fd(int sock, void* buffer, std::size_t length, int& fd);

// Sends the protocol's Hello on `sock` with `event_fd` attached: the socket on which the
// daemon will send this client's events (daemon_protocol.hpp).
bool send_daemon_hello(int sock, int event_fd);

}  // namespace softrdma::host
