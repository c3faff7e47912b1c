// The kernel's UDP in the shape of perftest's latency and bandwidth tests, as baselines for
// scripts/bench.sh (docs/benchmarks.md): a ping-pong whose two ends either busy-poll
// (non-blocking socket, spin on recv, as perftest spins on its CQ) or sleep in a blocking recv
// (as a program sleeping on a completion channel, or perftest's WRITE responder that only the
// device's own thread can serve); and a busy-polling stream for bandwidth. With --acked each
// message travels with a second, ACK-sized datagram, as a reliable connection's SEND and the
// ACK of the peer's last one do: the kernel's floor for that exchange. With --roce-calls each
// end calls the socket as softrdma's UDP backend does (unconnected, with control messages),
// which tells what those calls cost beside a connected socket's send and recv.
//
//   udp_pingpong --server [--bind ADDR] [-p PORT] [--mode busy|sleep] [--acked] [--roce-calls] [--stream]
//   udp_pingpong ADDR [-p PORT] [-s BYTES] [-n ITERS] [--mode busy|sleep] [--acked] [--roce-calls]
//                [--stream [-t SECONDS]]
//
// The server serves one client and exits. The client prints one result line of key=value pairs
// (one_way_typical_us, one_way_avg_us, rtt_typical_us, rtt_avg_us... or mb_per_s, msg_per_s).
#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/udp.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <string>
#include <string_view>
#include <vector>

#include "emulator/net/control_message.hpp"

namespace {

using Clock = std::chrono::steady_clock;

constexpr std::size_t kUdpMax = 65507;         // the largest UDP payload over IPv4
constexpr std::size_t kAckBytes = 20;          // a RoCE ACK's UDP payload: BTH, AETH, ICRC
constexpr int kWarmup = 100;                   // round trips not measured, as perftest's
constexpr std::chrono::seconds kPatience{10};  // the longest wait for the peer's next datagram
constexpr char kUsage[] =
    "usage: udp_pingpong --server [--bind ADDR] [-p PORT] [--mode busy|sleep] [--acked] [--roce-calls]\n"
    "                    [--stream]\n"
    "       udp_pingpong ADDR [-p PORT] [-s BYTES] [-n ITERS] [--mode busy|sleep] [--acked]\n"
    "                    [--roce-calls] [--stream [-t SECONDS]]\n"
    "\n"
    "A UDP ping-pong (or, with --stream, a one-way stream) between a server and a client, the\n"
    "kernel's baseline of the same shape as perftest's tests:\n"
    "  --mode busy   non-blocking socket, both ends spin on recv (perftest polling its CQ)\n"
    "  --mode sleep  blocking recv, both ends sleep until a datagram wakes them (default busy)\n"
    "  --acked       ping-pong: each message leaves with a 20-byte datagram in one sendmmsg,\n"
    "                and each end waits for both (an RC SEND and the ACK of the peer's last);\n"
    "                give it to both ends\n"
    "  --roce-calls  ping-pong: each end calls the socket as softrdma's UDP backend does:\n"
    "                unconnected, with DF, sendmmsg with the address and IP_TOS and IP_TTL\n"
    "                control messages, recvmmsg with the sender's address and SO_RXQ_OVFL and\n"
    "                UDP_GRO control messages; give it to both ends. With DF a datagram\n"
    "                above the path's MTU is refused (EMSGSIZE), as the backend sends none\n"
    "  -s BYTES      datagram payload, 1..65507 (default 2); above the path's MTU the kernel\n"
    "                fragments each datagram into IP fragments\n"
    "  -n ITERS      measured round trips (default 10000), after 100 unmeasured ones\n"
    "  -t SECONDS    --stream: how long the client sends (default 1)\n"
    "  -p PORT       UDP port (default 18515); --bind ADDR: the server's address (default any)\n"
    "The server serves one client and exits. The client prints one line of key=value pairs:\n"
    "ping-pong: one_way_typical_us (the median round trip / 2, perftest's t_typical),\n"
    "one_way_avg_us (the mean / 2, t_avg), rtt_typical_us, rtt_avg_us, rtt_p99_us, rtt_max_us;\n"
    "stream: the server's received mb_per_s (10^6 bytes) and msg_per_s, and lost datagrams.\n";

[[noreturn]] void fail(const std::string& message) {
  std::fprintf(stderr, "udp_pingpong: %s\n", message.c_str());
  std::exit(1);
}

[[noreturn]] void usage_error(const std::string& message) {
  std::fprintf(stderr, "udp_pingpong: %s (--help shows the usage)\n", message.c_str());
  std::exit(2);
}

struct Options {
  bool server = false, busy = true, stream = false, acked = false, roce_calls = false;
  std::string addr;
  std::string port = "18515";
  std::size_t size = 2;
  long iters = 10000;
  double seconds = 1;
};

long number(std::string_view flag, const char* text, long lo, long hi) {
  char* end = nullptr;
  errno = 0;
  const long v = std::strtol(text, &end, 10);
  if (errno != 0 || end == text || *end != '\0' || v < lo || v > hi)
    usage_error(std::string(flag) + " takes a number from " + std::to_string(lo) + " to " + std::to_string(hi) +
                ", not '" + text + "'");
  return v;
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    auto value = [&]() -> const char* {
      if (i + 1 >= argc) usage_error(std::string(a) + " needs a value");
      return argv[++i];
    };
    if (a == "-h" || a == "--help") {
      std::fputs(kUsage, stdout);
      std::exit(0);
    } else if (a == "--server") {
      o.server = true;
    } else if (a == "--bind") {
      o.addr = value();
    } else if (a == "-p" || a == "--port") {
      o.port = std::to_string(number(a, value(), 1, 65535));
    } else if (a == "-s" || a == "--size") {
      o.size = static_cast<std::size_t>(number(a, value(), 1, kUdpMax));
    } else if (a == "-n" || a == "--iters") {
      o.iters = number(a, value(), 1, 100'000'000);
    } else if (a == "-t" || a == "--seconds") {
      o.seconds = static_cast<double>(number(a, value(), 1, 3600));
    } else if (a == "--mode") {
      const std::string_view m = value();
      if (m != "busy" && m != "sleep") usage_error("--mode is busy or sleep, not '" + std::string(m) + "'");
      o.busy = m == "busy";
    } else if (a == "--stream") {
      o.stream = true;
    } else if (a == "--acked") {
      o.acked = true;
    } else if (a == "--roce-calls") {
      o.roce_calls = true;
    } else if (!a.empty() && a[0] != '-' && o.addr.empty()) {
      o.addr = a;
    } else {
      usage_error("unknown argument '" + std::string(a) + "'");
    }
  }
  if (!o.server && o.addr.empty()) usage_error("give the server's address, or --server");
  if (o.acked && o.stream) usage_error("--acked is for the ping-pong, not --stream");
  if (o.roce_calls && o.stream) usage_error("--roce-calls is for the ping-pong, not --stream");
  return o;
}

addrinfo* resolve(const std::string& addr, const std::string& port, bool passive) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_DGRAM;
  hints.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV | (passive ? AI_PASSIVE : 0);
  addrinfo* found = nullptr;
  if (const int err = getaddrinfo(addr.empty() ? nullptr : addr.c_str(), port.c_str(), &hints, &found); err != 0)
    fail("cannot use address '" + addr + "': " + gai_strerror(err));
  return found;
}

// How an end calls its socket: connected, with send and recv; or (--roce-calls) unconnected,
// every datagram addressed and sent with control messages, as softrdma's UDP backend does.
struct Calls {
  bool roce = false;
  sockaddr_storage peer{};  // --roce-calls: where every datagram goes
  socklen_t peer_len = 0;
};

// The socket options the backend sets that change the calls' path (udp_backend.cpp): DF (the
// IPv4 ID stays 0), no UDP checksum, the drop count and coalesced datagrams on receive.
void set_roce_options(int fd, int family) {
  const int on = 1, dont_fragment = IP_PMTUDISC_DO;
  if (family == AF_INET) {
    setsockopt(fd, IPPROTO_IP, IP_MTU_DISCOVER, &dont_fragment, sizeof dont_fragment);
    setsockopt(fd, SOL_SOCKET, SO_NO_CHECK, &on, sizeof on);
  }
  setsockopt(fd, SOL_SOCKET, SO_RXQ_OVFL, &on, sizeof on);
  setsockopt(fd, SOL_UDP, UDP_GRO, &on, sizeof on);
}

int open_socket(const addrinfo* a, bool busy) {
  const int fd = socket(a->ai_family, SOCK_DGRAM, 0);
  if (fd < 0) fail(std::string("socket: ") + std::strerror(errno));
  const int buffer = 4 << 20;  // a stream's bursts; the kernel caps it at rmem_max/wmem_max
  setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &buffer, sizeof buffer);
  setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &buffer, sizeof buffer);
  const timeval patience{std::chrono::seconds(kPatience).count(), 0};  // a blocking recv returns EAGAIN then
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &patience, sizeof patience);
  if (busy && fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) != 0)
    fail(std::string("fcntl: ") + std::strerror(errno));
  return fd;
}

// Waits for one datagram, spinning on a non-blocking socket or asleep in a blocking one, for
// at most kPatience: a peer that went away must not leave this end spinning for ever.

ssize_t receive(int fd, std::vector<char>& buffer) {
  const Clock::time_point give_up = Clock::now() + kPatience;
  for (;;) {
    const ssize_t n = recv(fd, buffer.data(), buffer.size(), 0);
    if (n >= 0) return n;
    if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) fail(std::string("recv: ") + std::strerror(errno));
    if (Clock::now() > give_up) fail("no datagram from the peer in 10 s");
  }
}

// Room for the control messages of one datagram, aligned for cmsghdr.
struct Control {
  alignas(cmsghdr) char bytes[CMSG_SPACE(sizeof(int)) * 2];
};

// The two headers of a message and its ACK-sized datagram, one buffer each, for sendmmsg or
// recvmmsg. With --roce-calls a send names the peer and carries TOS and TTL, and a receive
// takes the sender's address and the control messages, as the backend's calls do.
struct Headers {
  std::array<mmsghdr, 2> m{};
  std::array<sockaddr_storage, 2> from{};
  std::array<Control, 2> control{};
};

void prepare(Headers& h, std::array<iovec, 2>& iov, const Calls& calls, bool sending) {
  for (std::size_t i = 0; i < h.m.size(); ++i) {
    msghdr& m = h.m[i].msg_hdr;
    m.msg_iov = &iov[i];
    m.msg_iovlen = 1;
    if (!calls.roce) continue;
    m.msg_control = h.control[i].bytes;
    if (sending) {
      m.msg_name = const_cast<sockaddr_storage*>(&calls.peer);
      m.msg_namelen = calls.peer_len;
      const bool v4 = calls.peer.ss_family == AF_INET;
      softrdma::net::add_cmsg(m, v4 ? IPPROTO_IP : IPPROTO_IPV6, v4 ? IP_TOS : IPV6_TCLASS, 0);
      softrdma::net::add_cmsg(m, v4 ? IPPROTO_IP : IPPROTO_IPV6, v4 ? IP_TTL : IPV6_HOPLIMIT, 64);
    } else {
      m.msg_name = &h.from[i];
      m.msg_namelen = sizeof h.from[i];
      m.msg_controllen = sizeof h.control[i].bytes;
    }
  }
}

// A message and, with --acked, the datagram behind it (one recvmmsg takes both when both are
// there, as the engine's receive does); the message's size. The end marker comes alone.
ssize_t receive_message(int fd, std::vector<char>& buffer, bool acked, const Calls& calls) {
  if (!acked && !calls.roce) return receive(fd, buffer);
  std::array<char, kAckBytes + 1> ack{};
  std::array<iovec, 2> iov{{{buffer.data(), buffer.size()}, {ack.data(), ack.size()}}};
  Headers h;
  prepare(h, iov, calls, false);
  std::array<mmsghdr, 2>& m = h.m;
  const unsigned want = acked ? 2 : 1;
  const Clock::time_point give_up = Clock::now() + kPatience;
  for (unsigned got = 0; got < want;) {
    const int n = recvmmsg(fd, &m[got], want - got, MSG_WAITFORONE, nullptr);
    if (n > 0) {
      got += static_cast<unsigned>(n);
      if (m[0].msg_len == 0) return 0;
      continue;
    }
    if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
      fail(std::string("recvmmsg: ") + std::strerror(errno));
    if (Clock::now() > give_up) fail("no datagram from the peer in 10 s");
  }
  return static_cast<ssize_t>(m[0].msg_len);
}

bool may_retry(int err) { return err == EAGAIN || err == EWOULDBLOCK || err == EINTR || err == ENOBUFS; }

void send_all(int fd, const char* data, std::size_t size) {
  while (send(fd, data, size, 0) < 0) {
    if (!may_retry(errno)) fail(std::string("send: ") + std::strerror(errno));
  }
}

// A message and, with --acked, the ACK-sized datagram behind it, in one system call as the
// engine sends a SEND with the ACK it held for it. The end marker (empty) leaves alone.
void send_message(int fd, const char* data, std::size_t size, bool acked, const Calls& calls) {
  if ((!acked || size == 0) && !calls.roce) return send_all(fd, data, size);
  static const std::array<char, kAckBytes> ack{};
  std::array<iovec, 2> iov{{{const_cast<char*>(data), size}, {const_cast<char*>(ack.data()), ack.size()}}};
  Headers h;
  prepare(h, iov, calls, true);
  std::array<mmsghdr, 2>& m = h.m;
  const unsigned count = acked && size != 0 ? 2 : 1;
  for (unsigned sent = 0; sent < count;) {
    const int n = sendmmsg(fd, &m[sent], count - sent, 0);
    if (n > 0) {
      sent += static_cast<unsigned>(n);
    } else if (!may_retry(errno)) {
      fail(std::string("sendmmsg: ") + std::strerror(errno));
    }
  }
}

// The stream's end: an empty datagram, answered by the server's count of what it received.
struct StreamReport {
  std::uint64_t bytes, messages, ns;
};

int serve(const Options& o) {
  addrinfo* a = resolve(o.addr, o.port, true);
  const int fd = open_socket(a, o.busy);
  if (o.roce_calls) set_roce_options(fd, a->ai_family);
  if (bind(fd, a->ai_addr, a->ai_addrlen) != 0) fail("bind " + o.addr + ":" + o.port + ": " + std::strerror(errno));
  freeaddrinfo(a);
  std::vector<char> buffer(kUdpMax + 1);
  sockaddr_storage peer{};
  socklen_t peer_len = sizeof peer;
  // The first datagram names the client; connected, each later send skips the route lookup.
  // A client has a minute to come.
  const Clock::time_point give_up = Clock::now() + std::chrono::minutes(1);
  ssize_t n = -1;
  while ((n = recvfrom(fd, buffer.data(), buffer.size(), 0, reinterpret_cast<sockaddr*>(&peer), &peer_len)) < 0) {
    if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) fail(std::string("recv: ") + std::strerror(errno));
    if (Clock::now() > give_up) fail("no client came in a minute");
  }
  const Clock::time_point first = Clock::now();
  Calls calls;
  if (o.roce_calls) {
    calls = {true, peer, peer_len};
  } else if (connect(fd, reinterpret_cast<sockaddr*>(&peer), peer_len) != 0) {
    fail(std::string("connect: ") + std::strerror(errno));
  }
  if (!o.stream) {
    if (o.acked && n > 0) {  // the first message's own datagram behind it
      std::vector<char> ack(kAckBytes + 1);
      receive(fd, ack);
    }
    for (;;) {  // echo until the client's empty datagram, which is echoed too
      send_message(fd, buffer.data(), static_cast<std::size_t>(n), o.acked, calls);
      if (n == 0) return 0;
      n = receive_message(fd, buffer, o.acked, calls);
    }
  }
  StreamReport report{0, 0, 0};
  for (; n > 0; n = receive(fd, buffer)) {
    report.bytes += static_cast<std::uint64_t>(n);
    ++report.messages;
    report.ns = static_cast<std::uint64_t>(std::chrono::nanoseconds(Clock::now() - first).count());
  }
  send_all(fd, reinterpret_cast<const char*>(&report), sizeof report);
  return 0;
}

double percentile(const std::vector<double>& sorted, double p) {
  return sorted[std::min(sorted.size() - 1, static_cast<std::size_t>(p * static_cast<double>(sorted.size())))];
}

void ping_pong(int fd, const Options& o, const Calls& calls) {
  std::vector<char> message(o.size, 'p'), buffer(kUdpMax + 1);
  std::vector<double> rtt_us;
  rtt_us.reserve(static_cast<std::size_t>(o.iters));
  for (long i = 0; i < kWarmup + o.iters; ++i) {
    const Clock::time_point start = Clock::now();
    send_message(fd, message.data(), message.size(), o.acked, calls);
    const ssize_t n = receive_message(fd, buffer, o.acked, calls);
    const Clock::time_point end = Clock::now();
    if (static_cast<std::size_t>(n) != o.size)
      fail("the server answered " + std::to_string(n) + " bytes to " + std::to_string(o.size));
    if (i >= kWarmup) rtt_us.push_back(std::chrono::duration<double, std::micro>(end - start).count());
  }
  send_message(fd, nullptr, 0, false, calls);
  receive(fd, buffer);  // the server's echo of the end: it has left
  const double mean = std::accumulate(rtt_us.begin(), rtt_us.end(), 0.0) / static_cast<double>(rtt_us.size());
  std::sort(rtt_us.begin(), rtt_us.end());
  const double median = percentile(rtt_us, 0.5);
  std::printf("udp_pingpong mode=%s acked=%d roce_calls=%d size=%zu iters=%ld one_way_typical_us=%.2f "
              "one_way_avg_us=%.2f rtt_typical_us=%.2f rtt_avg_us=%.2f rtt_p99_us=%.2f rtt_max_us=%.2f\n",
              o.busy ? "busy" : "sleep", o.acked ? 1 : 0, o.roce_calls ? 1 : 0, o.size, o.iters, median / 2, mean / 2,
              median, mean, percentile(rtt_us, 0.99), rtt_us.back());
}

void stream(int fd, const Options& o) {
  std::vector<char> message(o.size, 's');
  std::uint64_t sent = 0;
  const Clock::time_point end =
      Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(o.seconds));
  while (Clock::now() < end) {
    for (int i = 0; i < 64; ++i, ++sent) send_all(fd, message.data(), message.size());
  }
  // The end marker may be lost where the stream filled the server's buffer: resend it until
  // the report comes, each time waiting 10 ms for it.
  const int flags = fcntl(fd, F_GETFL);
  fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
  const timeval wait{0, 10'000};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &wait, sizeof wait);
  StreamReport report{};
  for (int attempt = 0;; ++attempt) {
    if (attempt == 500) fail("the server never reported what it received");
    send_all(fd, nullptr, 0);
    // MSG_TRUNC: the datagram's whole length, so that an echo (a server started without
    // --stream) is not taken for the report.
    if (recv(fd, &report, sizeof report, MSG_TRUNC) == static_cast<ssize_t>(sizeof report)) break;
  }
  const double seconds = static_cast<double>(std::max<std::uint64_t>(report.ns, 1)) / 1e9;
  std::printf("udp_pingpong mode=stream size=%zu sent=%llu received=%llu lost=%llu mb_per_s=%.1f msg_per_s=%.0f\n",
              o.size, static_cast<unsigned long long>(sent), static_cast<unsigned long long>(report.messages),
              static_cast<unsigned long long>(sent - std::min(sent, report.messages)),
              static_cast<double>(report.bytes) / seconds / 1e6, static_cast<double>(report.messages) / seconds);
}

int client(const Options& o) {
  addrinfo* a = resolve(o.addr, o.port, false);
  const int fd = open_socket(a, o.busy || o.stream);
  Calls calls;
  if (o.roce_calls) {
    set_roce_options(fd, a->ai_family);
    calls.roce = true;
    std::memcpy(&calls.peer, a->ai_addr, a->ai_addrlen);
    calls.peer_len = a->ai_addrlen;
  } else if (connect(fd, a->ai_addr, a->ai_addrlen) != 0) {
    fail("connect " + o.addr + ": " + std::strerror(errno));
  }
  freeaddrinfo(a);
  if (o.stream) {
    stream(fd, o);
  } else {
    ping_pong(fd, o, calls);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  return o.server ? serve(o) : client(o);
}
