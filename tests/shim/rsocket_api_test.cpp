// softrdma's rsockets (rsocket(7)) through the C API, as a program compiled against rdma-core
// 44's <rdma/rsocket.h> calls them: the errors a socket program expects (EBADF, ENOTCONN,
// ECONNREFUSED, EOPNOTSUPP, EISCONN, EINVAL), and whole connections inside this process
// (the device talks to itself): data both ways through buffers smaller than the data,
// rpoll and rselect over rsockets and a pipe, MSG_PEEK, half and full shutdown, riomap and
// riowrite; and a peer that breaks the protocol. Unmodified rstream and riostream pairs are
// rsocket_pairs_test.py's.
#include <arpa/inet.h>
#include <fcntl.h>
#include <infiniband/verbs.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>
#include <rdma/rsocket.h>
#include <sys/mman.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "verbs-shim/rdmacm/rsocket_wire.hpp"

namespace {

// The device takes the first free 127.0.0.N whatever the environment says.
[[maybe_unused]] const bool environment_cleared = [] {
  for (const char* name : {"SOFTRDMA_IP", "SOFTRDMA_NETDEV", "SYSFS_PATH"}) ::unsetenv(name);
  return true;
}();

// errno of a call that must fail, or 0 when it did not.
template <class F>
int error_of(F f) {
  errno = 0;
  return f() == -1 ? errno : 0;
}

// The IPv4 address this process's device holds: its GID 0 is ::ffff:a.b.c.d.
in_addr device_address() {
  static const in_addr address = [] {
    int n = 0;
    ibv_device** list = ibv_get_device_list(&n);
    REQUIRE(list != nullptr);
    REQUIRE(n == 1);
    ibv_context* context = ibv_open_device(list[0]);
    REQUIRE(context != nullptr);
    ibv_gid gid{};
    REQUIRE(ibv_query_gid(context, 1, 0, &gid) == 0);
    in_addr a{};
    std::memcpy(&a, gid.raw + 12, 4);
    ibv_close_device(context);
    ibv_free_device_list(list);
    return a;
  }();
  return address;
}

sockaddr_in on_device(std::uint16_t port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr = device_address();
  a.sin_port = htons(port);
  return a;
}

const sockaddr* sa(const sockaddr_in& a) { return reinterpret_cast<const sockaddr*>(&a); }

// A listener on the device's address and a port of its own choosing; the port.
int listener(std::uint16_t& port, bool nonblocking, int iomap_size = 0) {
  const int l = rsocket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(l >= 0);
  if (iomap_size != 0) REQUIRE(rsetsockopt(l, SOL_RDMA, RDMA_IOMAPSIZE, &iomap_size, sizeof iomap_size) == 0);
  const sockaddr_in a = on_device(0);
  REQUIRE(rbind(l, sa(a), sizeof a) == 0);
  REQUIRE(rlisten(l, 4) == 0);
  sockaddr_in bound{};
  socklen_t len = sizeof bound;
  REQUIRE(rgetsockname(l, reinterpret_cast<sockaddr*>(&bound), &len) == 0);
  CHECK(len == sizeof bound);
  port = ntohs(bound.sin_port);
  REQUIRE(port != 0);
  if (nonblocking) REQUIRE(rfcntl(l, F_SETFL, O_NONBLOCK) == 0);
  return l;
}

struct Pair {
  int client = -1, server = -1;
};

// A client and the server side that accepted it, both non-blocking, connected in one thread:
// a non-blocking rconnect and rpoll drive the connection on both ends.
Pair connected_pair(int iomap_size = 0) {
  std::uint16_t port = 0;
  const int l = listener(port, true, iomap_size);
  Pair p;
  p.client = rsocket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(p.client >= 0);
  if (iomap_size != 0) REQUIRE(rsetsockopt(p.client, SOL_RDMA, RDMA_IOMAPSIZE, &iomap_size, sizeof iomap_size) == 0);
  REQUIRE(rfcntl(p.client, F_SETFL, O_NONBLOCK) == 0);
  const sockaddr_in to = on_device(port);
  const int err = error_of([&] { return rconnect(p.client, sa(to), sizeof to); });
  REQUIRE((err == 0 || err == EINPROGRESS));
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  bool writable = false;
  while ((p.server < 0 || !writable) && std::chrono::steady_clock::now() < deadline) {
    pollfd fds[2] = {{l, POLLIN, 0}, {p.client, POLLOUT, 0}};
    REQUIRE(rpoll(fds, 2, 100) >= 0);
    CHECK(!(fds[1].revents & (POLLERR | POLLHUP)));
    if (fds[1].revents & POLLOUT) writable = true;
    if (p.server < 0 && (fds[0].revents & POLLIN)) {
      sockaddr_in peer{};
      socklen_t len = sizeof peer;
      p.server = raccept(l, reinterpret_cast<sockaddr*>(&peer), &len);
      if (p.server >= 0) {
        CHECK(len == sizeof peer);
        CHECK(peer.sin_addr.s_addr == device_address().s_addr);
      } else {
        CHECK((errno == EAGAIN || errno == EWOULDBLOCK));
      }
    }
  }
  REQUIRE(p.server >= 0);
  REQUIRE(writable);
  int so_error = -1;
  socklen_t len = sizeof so_error;
  REQUIRE(rgetsockopt(p.client, SOL_SOCKET, SO_ERROR, &so_error, &len) == 0);
  CHECK(so_error == 0);
  REQUIRE(rfcntl(p.server, F_SETFL, O_NONBLOCK) == 0);
  CHECK(rclose(l) == 0);
  return p;
}

std::vector<std::uint8_t> pattern(std::size_t n, unsigned seed) {
  std::vector<std::uint8_t> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<std::uint8_t>((i * 131 + seed * 7 + (i >> 9)) & 0xFF);
  return v;
}

// Moves `data` from `from` to `to` with non-blocking calls in one thread, as much as the
// buffers take at a time; what `to` received.
std::vector<std::uint8_t> transfer(int from, int to, const std::vector<std::uint8_t>& data) {
  std::vector<std::uint8_t> got(data.size());
  std::size_t sent = 0, received = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (received < data.size() && std::chrono::steady_clock::now() < deadline) {
    if (sent < data.size()) {
      const ssize_t n = rsend(from, data.data() + sent, data.size() - sent, 0);
      if (n > 0)
        sent += static_cast<std::size_t>(n);
      else
        REQUIRE((errno == EAGAIN || errno == EWOULDBLOCK));
    }
    const ssize_t n = rrecv(to, got.data() + received, got.size() - received, 0);
    if (n > 0)
      received += static_cast<std::size_t>(n);
    else
      REQUIRE((n == -1 && (errno == EAGAIN || errno == EWOULDBLOCK)));
  }
  REQUIRE(received == data.size());
  return got;
}

}  // namespace

TEST_CASE("rsocket calls on a number that is no rsocket fail with EBADF", "[rsocket]") {
  int pipe_fds[2];
  REQUIRE(::pipe(pipe_fds) == 0);
  const int fd = pipe_fds[0];
  char buf[8] = {};
  sockaddr_in a = on_device(1);
  socklen_t len = sizeof a;
  int v = 1;
  CHECK(error_of([&] { return static_cast<int>(rrecv(fd, buf, sizeof buf, 0)); }) == EBADF);
  CHECK(error_of([&] { return static_cast<int>(rsend(fd, buf, sizeof buf, 0)); }) == EBADF);
  CHECK(error_of([&] { return static_cast<int>(rread(fd, buf, sizeof buf)); }) == EBADF);
  CHECK(error_of([&] { return static_cast<int>(rwrite(fd, buf, sizeof buf)); }) == EBADF);
  CHECK(error_of([&] { return rbind(fd, sa(a), sizeof a); }) == EBADF);
  CHECK(error_of([&] { return rlisten(fd, 1); }) == EBADF);
  CHECK(error_of([&] { return raccept(fd, nullptr, nullptr); }) == EBADF);
  CHECK(error_of([&] { return rconnect(fd, sa(a), sizeof a); }) == EBADF);
  CHECK(error_of([&] { return rshutdown(fd, SHUT_RDWR); }) == EBADF);
  CHECK(error_of([&] { return rgetpeername(fd, reinterpret_cast<sockaddr*>(&a), &len); }) == EBADF);
  CHECK(error_of([&] { return rgetsockname(fd, reinterpret_cast<sockaddr*>(&a), &len); }) == EBADF);
  CHECK(error_of([&] { return rsetsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &v, sizeof v); }) == EBADF);
  CHECK(error_of([&] { return rgetsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &v, &len); }) == EBADF);
  CHECK(error_of([&] { return rfcntl(fd, F_GETFL); }) == EBADF);
  CHECK(error_of([&] { return static_cast<int>(riomap(fd, buf, sizeof buf, PROT_WRITE, 0, -1)); }) == EBADF);
  CHECK(error_of([&] { return riounmap(fd, buf, sizeof buf); }) == EBADF);
  errno = 0;
  CHECK(riowrite(fd, buf, sizeof buf, 0, 0) == static_cast<size_t>(-1));
  CHECK(errno == EBADF);
  CHECK(error_of([&] { return rclose(fd); }) == EBADF);
  CHECK(error_of([&] { return rclose(-1); }) == EBADF);
  // The pipe is still the application's: rclose did not close it.
  CHECK(::write(pipe_fds[1], "x", 1) == 1);
  CHECK(::read(fd, buf, 1) == 1);
  ::close(pipe_fds[0]);
  ::close(pipe_fds[1]);
}

TEST_CASE("rsocket makes stream sockets of IPv4 and IPv6 only", "[rsocket]") {
  CHECK(error_of([] { return rsocket(AF_INET, SOCK_DGRAM, 0); }) == EOPNOTSUPP);  // not implemented
  CHECK(error_of([] { return rsocket(AF_UNIX, SOCK_STREAM, 0); }) == EAFNOSUPPORT);
  CHECK(error_of([] { return rsocket(AF_INET, SOCK_STREAM, IPPROTO_UDP); }) == EPROTONOSUPPORT);
  CHECK(error_of([] { return rsocket(AF_INET, SOCK_RAW, 0); }) == ESOCKTNOSUPPORT);
  for (const int domain : {AF_INET, AF_INET6}) {
    const int s = rsocket(domain, SOCK_STREAM | SOCK_NONBLOCK, IPPROTO_TCP);
    REQUIRE(s >= 0);
    CHECK((rfcntl(s, F_GETFL) & O_NONBLOCK) != 0);
    CHECK(rclose(s) == 0);
  }
}

TEST_CASE("an rsocket that is not connected: ENOTCONN, and its options", "[rsocket]") {
  const int s = rsocket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(s >= 0);
  char buf[4] = {};
  sockaddr_in a{};
  socklen_t len = sizeof a;
  CHECK(error_of([&] { return static_cast<int>(rrecv(s, buf, sizeof buf, 0)); }) == ENOTCONN);
  CHECK(error_of([&] { return static_cast<int>(rsend(s, buf, sizeof buf, 0)); }) == ENOTCONN);
  CHECK(error_of([&] { return rgetpeername(s, reinterpret_cast<sockaddr*>(&a), &len); }) == ENOTCONN);
  CHECK(error_of([&] { return rshutdown(s, SHUT_RDWR); }) == ENOTCONN);
  CHECK(error_of([&] { return rshutdown(s, 7); }) == EINVAL);
  CHECK(error_of([&] { return raccept(s, nullptr, nullptr); }) == EINVAL);  // not listening
  const sockaddr_in to = on_device(9);
  CHECK(error_of([&] { return static_cast<int>(rsendto(s, buf, 1, 0, sa(to), sizeof to)); }) == EISCONN);
  CHECK(error_of([&] { return rconnect(s, nullptr, 0); }) == EINVAL);
  sockaddr unix_address{};
  unix_address.sa_family = AF_UNIX;
  CHECK(error_of([&] { return rconnect(s, &unix_address, sizeof unix_address); }) == EAFNOSUPPORT);

  // Options: the ones rsocket(7) lists are kept and reported; the rest are EOPNOTSUPP.
  int v = 1 << 16;
  CHECK(rsetsockopt(s, SOL_SOCKET, SO_RCVBUF, &v, sizeof v) == 0);
  int got = 0;
  len = sizeof got;
  CHECK(rgetsockopt(s, SOL_SOCKET, SO_RCVBUF, &got, &len) == 0);
  CHECK(got == 1 << 17);  // doubled, as Linux doubles it
  v = 1;
  CHECK(rsetsockopt(s, IPPROTO_TCP, TCP_NODELAY, &v, sizeof v) == 0);
  len = sizeof got;
  CHECK(rgetsockopt(s, IPPROTO_TCP, TCP_NODELAY, &got, &len) == 0);
  CHECK(got == 1);
  v = 100;
  CHECK(rsetsockopt(s, SOL_RDMA, RDMA_SQSIZE, &v, sizeof v) == 0);
  len = sizeof got;
  CHECK(rgetsockopt(s, SOL_RDMA, RDMA_SQSIZE, &got, &len) == 0);
  CHECK(got == 100);
  v = 300;  // above 128 the iomap size travels as 0x80 | (n >> 8): rounded to 256
  CHECK(rsetsockopt(s, SOL_RDMA, RDMA_IOMAPSIZE, &v, sizeof v) == 0);
  len = sizeof got;
  CHECK(rgetsockopt(s, SOL_RDMA, RDMA_IOMAPSIZE, &got, &len) == 0);
  CHECK(got == 256);
  CHECK(error_of([&] { return rsetsockopt(s, SOL_SOCKET, SO_BROADCAST, &v, sizeof v); }) == EOPNOTSUPP);
  len = sizeof got;
  CHECK(error_of([&] { return rgetsockopt(s, SOL_SOCKET, SO_PRIORITY, &got, &len); }) == EOPNOTSUPP);
  CHECK(error_of([&] { return rsetsockopt(s, SOL_IP, IP_TOS, &v, sizeof v); }) == EOPNOTSUPP);
  CHECK(error_of([&] { return rsetsockopt(s, SOL_SOCKET, SO_KEEPALIVE, &v, 1); }) == EINVAL);  // too short
  CHECK(error_of([&] { return rfcntl(s, F_GETFD); }) == EOPNOTSUPP);
  CHECK(rfcntl(s, F_SETFL, O_NONBLOCK) == 0);
  CHECK(rfcntl(s, F_GETFL) == O_NONBLOCK);
  CHECK(rclose(s) == 0);
  CHECK(error_of([&] { return rclose(s); }) == EBADF);  // the number is gone
}

TEST_CASE("rconnect to a port nobody listens on is refused", "[rsocket]") {
  std::uint16_t port = 0;
  const int l = listener(port, false);  // a port known to be free once this listener is gone
  REQUIRE(rclose(l) == 0);
  const sockaddr_in to = on_device(port);

  SECTION("blocking: ECONNREFUSED from rconnect") {
    const int s = rsocket(AF_INET, SOCK_STREAM, 0);
    REQUIRE(s >= 0);
    CHECK(error_of([&] { return rconnect(s, sa(to), sizeof to); }) == ECONNREFUSED);
    CHECK(error_of([&] { return rconnect(s, sa(to), sizeof to); }) == EINVAL);  // not again
    CHECK(rclose(s) == 0);
  }
  SECTION("non-blocking: EINPROGRESS, then POLLERR and SO_ERROR ECONNREFUSED") {
    const int s = rsocket(AF_INET, SOCK_STREAM, 0);
    REQUIRE(s >= 0);
    REQUIRE(rfcntl(s, F_SETFL, O_NONBLOCK) == 0);
    CHECK(error_of([&] { return rconnect(s, sa(to), sizeof to); }) == EINPROGRESS);
    pollfd p{s, POLLOUT, 0};
    REQUIRE(rpoll(&p, 1, 10000) == 1);
    CHECK((p.revents & POLLERR) != 0);
    int err = 0;
    socklen_t len = sizeof err;
    CHECK(rgetsockopt(s, SOL_SOCKET, SO_ERROR, &err, &len) == 0);
    CHECK(err == ECONNREFUSED);
    len = sizeof err;
    CHECK(rgetsockopt(s, SOL_SOCKET, SO_ERROR, &err, &len) == 0);
    CHECK(err == 0);  // read once
    CHECK(rclose(s) == 0);
  }
}

TEST_CASE("a connection in one process: data both ways, rpoll, rselect, MSG_PEEK, shutdown", "[rsocket]") {
  Pair p = connected_pair();
  sockaddr_in name{};
  socklen_t len = sizeof name;
  REQUIRE(rgetpeername(p.client, reinterpret_cast<sockaddr*>(&name), &len) == 0);
  CHECK(name.sin_addr.s_addr == device_address().s_addr);
  int v = 0;
  len = sizeof v;
  CHECK(error_of([&] { return rsetsockopt(p.client, SOL_RDMA, RDMA_INLINE, &v, sizeof v); }) == EINVAL);

  SECTION("sizes from one byte to 3 MiB, beyond the 128 KiB buffers, both ways") {
    for (const std::size_t n : {std::size_t{1}, std::size_t{64}, std::size_t{65}, std::size_t{4096}, std::size_t{70000},
                                std::size_t{3u << 20}}) {
      CAPTURE(n);
      const auto there = pattern(n, 1);
      CHECK(transfer(p.client, p.server, there) == there);
      const auto back = pattern(n, 2);
      CHECK(transfer(p.server, p.client, back) == back);
    }
  }
  SECTION("rpoll and rselect: an idle rsocket is not readable, a pipe is; then the data is") {
    int pipe_fds[2];
    REQUIRE(::pipe(pipe_fds) == 0);
    pollfd fds[2] = {{p.server, POLLIN, 0}, {pipe_fds[0], POLLIN, 0}};
    CHECK(rpoll(fds, 2, 50) == 0);
    REQUIRE(::write(pipe_fds[1], "x", 1) == 1);
    CHECK(rpoll(fds, 2, 1000) == 1);
    CHECK(fds[0].revents == 0);
    CHECK(fds[1].revents == POLLIN);
    char c = 0;
    REQUIRE(::read(pipe_fds[0], &c, 1) == 1);

    REQUIRE(rsend(p.client, "hello", 5, 0) == 5);
    fds[0].revents = fds[1].revents = 0;
    CHECK(rpoll(fds, 2, 5000) == 1);
    CHECK(fds[0].revents == POLLIN);
    const int nfds = std::max(p.server, pipe_fds[0]) + 1;
    fd_set readable;
    FD_ZERO(&readable);
    FD_SET(p.server, &readable);
    FD_SET(pipe_fds[0], &readable);
    timeval t{1, 0};
    CHECK(rselect(nfds, &readable, nullptr, nullptr, &t) == 1);
    CHECK(FD_ISSET(p.server, &readable));
    CHECK(!FD_ISSET(pipe_fds[0], &readable));

    char buf[8] = {};
    CHECK(rrecv(p.server, buf, 3, MSG_PEEK) == 3);
    CHECK(std::string(buf, 3) == "hel");
    CHECK(rrecv(p.server, buf, sizeof buf, 0) == 5);
    CHECK(std::string(buf, 5) == "hello");
    CHECK(error_of([&] { return static_cast<int>(rrecv(p.server, buf, sizeof buf, 0)); }) == EAGAIN);
    ::close(pipe_fds[0]);
    ::close(pipe_fds[1]);
  }
  SECTION("SHUT_WR: the peer reads what was sent, then end of file; it may still send back") {
    REQUIRE(rsend(p.client, "last", 4, 0) == 4);
    REQUIRE(rshutdown(p.client, SHUT_WR) == 0);
    CHECK(error_of([&] { return static_cast<int>(rsend(p.client, "x", 1, 0)); }) == EPIPE);
    REQUIRE(rfcntl(p.server, F_SETFL, 0) == 0);  // blocking from here
    char buf[8] = {};
    CHECK(rrecv(p.server, buf, sizeof buf, MSG_WAITALL) == 4);
    CHECK(std::string(buf, 4) == "last");
    CHECK(rrecv(p.server, buf, sizeof buf, 0) == 0);
    REQUIRE(rsend(p.server, "back", 4, 0) == 4);
    REQUIRE(rfcntl(p.client, F_SETFL, 0) == 0);
    CHECK(rrecv(p.client, buf, 4, MSG_WAITALL) == 4);
    CHECK(std::string(buf, 4) == "back");
  }
  SECTION("rclose: the peer sees POLLHUP and end of file; rsend then fails") {
    REQUIRE(rsend(p.client, "bye", 3, 0) == 3);
    REQUIRE(rclose(p.client) == 0);
    p.client = -1;
    pollfd fd{p.server, POLLIN, 0};
    REQUIRE(rpoll(&fd, 1, 5000) == 1);
    char buf[8] = {};
    CHECK(rrecv(p.server, buf, sizeof buf, 0) == 3);  // queued data is still read
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (!(fd.revents & POLLHUP) && std::chrono::steady_clock::now() < deadline) rpoll(&fd, 1, 100);
    CHECK((fd.revents & POLLHUP) != 0);
    CHECK(rrecv(p.server, buf, sizeof buf, 0) == 0);
    CHECK(error_of([&] { return static_cast<int>(rsend(p.server, "x", 1, 0)); }) == ECONNRESET);
  }
  if (p.client >= 0) CHECK(rclose(p.client) == 0);
  CHECK(rclose(p.server) == 0);
}

TEST_CASE("riomap and riowrite: bytes placed in the peer's mapped buffer", "[rsocket]") {
  Pair p = connected_pair(1);
  std::vector<std::uint8_t> target(100000, 0);
  char c = 0;

  CHECK(error_of([&] { return static_cast<int>(riomap(p.server, target.data(), target.size(), PROT_READ, 0, 0)); }) ==
        EINVAL);
  REQUIRE(riomap(p.server, target.data(), target.size(), PROT_WRITE, 0, 4096) == 4096);
  // The peer's table has one entry (RDMA_IOMAPSIZE 1): a second remote mapping does not fit.
  std::vector<std::uint8_t> other(64);
  CHECK(error_of([&] { return static_cast<int>(riomap(p.server, other.data(), other.size(), PROT_WRITE, 0, -1)); }) ==
        ENOMEM);
  // The mapping reaches the client with the server's next data.
  REQUIRE(rsend(p.server, "m", 1, 0) == 1);
  REQUIRE(rfcntl(p.client, F_SETFL, 0) == 0);
  REQUIRE(rrecv(p.client, &c, 1, 0) == 1);

  const auto data = pattern(90000, 3);
  REQUIRE(riowrite(p.client, data.data(), data.size(), 4096 + 100, 0) == data.size());
  errno = 0;
  CHECK(riowrite(p.client, data.data(), 10, 4096 + 200000, 0) == static_cast<size_t>(-1));  // nothing mapped there
  CHECK(errno == EINVAL);
  // Data sent after a riowrite arrives after it: once the server reads it, the bytes are there.
  REQUIRE(rsend(p.client, "n", 1, 0) == 1);
  REQUIRE(rfcntl(p.server, F_SETFL, 0) == 0);
  REQUIRE(rrecv(p.server, &c, 1, 0) == 1);
  CHECK(c == 'n');
  CHECK(std::equal(data.begin(), data.end(), target.begin() + 100));
  CHECK(std::all_of(target.begin(), target.begin() + 100, [](std::uint8_t b) { return b == 0; }));

  CHECK(riounmap(p.server, target.data(), target.size()) == 0);
  CHECK(error_of([&] { return riounmap(p.server, target.data(), target.size()); }) == EINVAL);
  CHECK(rclose(p.client) == 0);
  CHECK(rclose(p.server) == 0);
}

namespace {

namespace rswire = softrdma::rsockets::wire;

rdma_cm_event_type next_event(rdma_event_channel* channel, std::vector<std::uint8_t>* private_data = nullptr) {
  rdma_cm_event* e = nullptr;
  REQUIRE(rdma_get_cm_event(channel, &e) == 0);
  const rdma_cm_event_type type = e->event;
  if (private_data != nullptr && e->param.conn.private_data != nullptr) {
    const auto* p = static_cast<const std::uint8_t*>(e->param.conn.private_data);
    private_data->assign(p, p + e->param.conn.private_data_len);
  }
  rdma_ack_cm_event(e);
  return type;
}

// A peer that connects to an rsocket as rsockets do (rdma_cm, the 40 bytes of connection
// data) and then writes whatever it is told to.
struct RawPeer {
  explicit RawPeer(std::uint16_t port) : memory(4096) {
    channel = rdma_create_event_channel();
    REQUIRE(channel != nullptr);
    REQUIRE(rdma_create_id(channel, &id, nullptr, RDMA_PS_TCP) == 0);
    sockaddr_in to = on_device(port);
    REQUIRE(rdma_resolve_addr(id, nullptr, reinterpret_cast<sockaddr*>(&to), 2000) == 0);
    REQUIRE(next_event(channel) == RDMA_CM_EVENT_ADDR_RESOLVED);
    REQUIRE(rdma_resolve_route(id, 2000) == 0);
    REQUIRE(next_event(channel) == RDMA_CM_EVENT_ROUTE_RESOLVED);
    pd = ibv_alloc_pd(id->verbs);
    REQUIRE(pd != nullptr);
    ibv_qp_init_attr init{};
    init.qp_type = IBV_QPT_RC;
    init.cap.max_send_wr = init.cap.max_recv_wr = 8;
    init.cap.max_send_sge = init.cap.max_recv_sge = 1;
    init.sq_sig_all = 1;
    REQUIRE(rdma_create_qp(id, pd, &init) == 0);
    mr = ibv_reg_mr(pd, memory.data(), memory.size(), IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
    REQUIRE(mr != nullptr);
    // Receives for the rsocket's own messages (its credits come as writes with immediate).
    for (int i = 0; i < 8; ++i) REQUIRE(rdma_post_recv(id, nullptr, memory.data() + 2048, 64, mr) == 0);
  }
  ~RawPeer() {
    rdma_destroy_qp(id);
    ibv_dereg_mr(mr);
    ibv_dealloc_pd(pd);
    rdma_destroy_id(id);
    rdma_destroy_event_channel(channel);
  }
  std::uint64_t addr(std::size_t offset) const { return reinterpret_cast<std::uintptr_t>(memory.data() + offset); }

  // Connects with rsockets' connection data; the rsocket's, from its REP.
  rswire::ConnData connect() {
    rswire::ConnData mine;
    mine.credits = 8;
    mine.target_sgl = {addr(0), mr->rkey, rswire::kSglEntries};
    mine.data_buf = {addr(1024), mr->rkey, 512};
    std::uint8_t data[rswire::kConnDataSize];
    rswire::emit(mine, std::span<std::uint8_t, rswire::kConnDataSize>(data));
    rdma_conn_param param{};
    param.private_data = data;
    param.private_data_len = sizeof data;
    param.responder_resources = param.initiator_depth = 1;
    param.retry_count = param.rnr_retry_count = 7;
    REQUIRE(rdma_connect(id, &param) == 0);
    std::vector<std::uint8_t> theirs;
    REQUIRE(next_event(channel, &theirs) == RDMA_CM_EVENT_ESTABLISHED);
    REQUIRE(theirs.size() >= rswire::kConnDataSize);
    return rswire::parse(std::span<const std::uint8_t, rswire::kConnDataSize>(theirs.data(), rswire::kConnDataSize));
  }

  // An RDMA WRITE WITH IMMEDIATE of `length` bytes to `to`, its immediate data `message`.
  void write_with_imm(const rswire::Sge& to, std::uint32_t length, std::uint32_t message) {
    ibv_sge sge{addr(0), length, mr->lkey};
    ibv_send_wr wr{};
    wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.imm_data = htonl(message);
    wr.wr.rdma.remote_addr = to.addr;
    wr.wr.rdma.rkey = to.key;
    ibv_send_wr* bad = nullptr;
    REQUIRE(ibv_post_send(id->qp, &wr, &bad) == 0);
    ibv_wc wc{};
    REQUIRE(rdma_get_send_comp(id, &wc) == 1);
    REQUIRE(wc.status == IBV_WC_SUCCESS);
  }

  rdma_event_channel* channel = nullptr;
  rdma_cm_id* id = nullptr;
  ibv_pd* pd = nullptr;
  ibv_mr* mr = nullptr;
  std::vector<std::uint8_t> memory;
};

}  // namespace

TEST_CASE("a peer announcing more data than the receive buffer holds breaks the connection", "[rsocket]") {
  std::uint16_t port = 0;
  const int l = listener(port, false);
  RawPeer peer(port);
  int s = -1;
  std::thread accepting([&] { s = raccept(l, nullptr, nullptr); });
  const rswire::ConnData theirs = peer.connect();
  accepting.join();
  REQUIRE(s >= 0);
  int rbuf = 0;
  socklen_t len = sizeof rbuf;
  REQUIRE(rgetsockopt(s, SOL_SOCKET, SO_RCVBUF, &rbuf, &len) == 0);

  // 64 bytes written where the rsocket said, announced as one byte more than its whole buffer.
  peer.write_with_imm(theirs.data_buf, 64, rswire::message(rswire::Op::data, static_cast<std::uint32_t>(rbuf) + 1));
  std::vector<std::uint8_t> into(4 * static_cast<std::size_t>(rbuf));
  errno = 0;
  CHECK(rrecv(s, into.data(), into.size(), 0) == -1);
  CHECK(errno == ECONNRESET);
  CHECK(rclose(s) == 0);
  CHECK(rclose(l) == 0);
}
