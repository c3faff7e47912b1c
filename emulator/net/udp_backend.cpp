#include "emulator/net/udp_backend.hpp"

#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <array>
#include <boost/asio/ip/udp.hpp>
#include <boost/asio/io_context.hpp>
#include <cerrno>
#include <cstring>
#include <vector>

#include "emulator/core/roce_headers.hpp"
#include "emulator/net/udp_gid.hpp"

namespace softrdma::net {

namespace asio = boost::asio;

struct UdpBackend::Socket {
  asio::io_context io;  // Asio wants one to own a socket; nothing runs on it
  asio::ip::udp::socket socket{io};
};

struct UdpBackend::Slots {
  // Control buffers, aligned for cmsghdr: one u32 in (SO_RXQ_OVFL), two ints out (TOS/TTL
  // or TCLASS/HOPLIMIT).
  union RxControl {
    cmsghdr align;
    char bytes[CMSG_SPACE(sizeof(std::uint32_t))];
  };
  union TxControl {
    cmsghdr align;
    char bytes[2 * CMSG_SPACE(sizeof(int))];
  };

  std::array<mmsghdr, kBurst> rx_msgs{};
  std::array<iovec, kBurst> rx_iov{};
  std::array<sockaddr_storage, kBurst> rx_from{};
  std::array<RxControl, kBurst> rx_control{};
  std::vector<std::uint8_t> rx_bytes = std::vector<std::uint8_t>(kBurst * kSlotBytes);
  std::array<core::RxPacket, kBurst> rx_packets{};

  std::array<mmsghdr, kBurst> tx_msgs{};
  std::array<iovec, kBurst> tx_iov{};
  std::array<sockaddr_storage, kBurst> tx_to{};
  std::array<TxControl, kBurst> tx_control{};

  Slots() {
    for (std::size_t i = 0; i < kBurst; ++i) {
      rx_iov[i] = {rx_bytes.data() + i * kSlotBytes, kSlotBytes};
      rx_msgs[i].msg_hdr.msg_iov = &rx_iov[i];
      rx_msgs[i].msg_hdr.msg_iovlen = 1;
      tx_msgs[i].msg_hdr.msg_iov = &tx_iov[i];
      tx_msgs[i].msg_hdr.msg_iovlen = 1;
    }
  }
};

namespace {

UdpOpenResult failure(int errnum, std::string error) {
  UdpOpenResult r;
  r.errnum = errnum;
  r.error = std::move(error);
  return r;
}

std::string with_port(const asio::ip::address& a, std::uint16_t port) {
  const std::string text = a.to_string();
  return (a.is_v6() ? "[" + text + "]" : text) + ":" + std::to_string(port);
}

// The reasons a person meets most get words of their own; the rest, strerror's.
std::string bind_error(const std::string& where, int errnum) {
  if (errnum == EADDRINUSE)
    return "cannot bind " + where + ": address already in use (another softrdma device or the rdma_rxe module holds it)";
  if (errnum == EADDRNOTAVAIL)
    return "cannot bind " + where + ": cannot assign requested address (no network interface here has this address)";
  return "cannot bind " + where + ": " + std::strerror(errnum);
}

int set_int(int fd, int level, int name, int value) {
  return setsockopt(fd, level, name, &value, sizeof value) == 0 ? 0 : errno;
}

// The options the header explains. Returns the errno of the first that fails, and its name.
int configure(int fd, bool ipv4, const char*& what) {
  struct Option {
    int level, name, value;
    const char* text;
  };
  std::vector<Option> options;
  if (ipv4) {
    options.push_back({IPPROTO_IP, IP_MTU_DISCOVER, IP_PMTUDISC_DO, "IP_MTU_DISCOVER"});
    options.push_back({SOL_SOCKET, SO_NO_CHECK, 1, "SO_NO_CHECK"});
  } else {
    options.push_back({IPPROTO_IPV6, IPV6_V6ONLY, 1, "IPV6_V6ONLY"});
    options.push_back({IPPROTO_IPV6, IPV6_MTU_DISCOVER, IPV6_PMTUDISC_DO, "IPV6_MTU_DISCOVER"});
  }
  options.push_back({SOL_SOCKET, SO_RCVBUF, UdpBackend::kSocketBufferBytes, "SO_RCVBUF"});  // capped by net.core.rmem_max
  options.push_back({SOL_SOCKET, SO_SNDBUF, UdpBackend::kSocketBufferBytes, "SO_SNDBUF"});
  options.push_back({SOL_SOCKET, SO_RXQ_OVFL, 1, "SO_RXQ_OVFL"});
  for (const Option& o : options) {
    if (const int err = set_int(fd, o.level, o.name, o.value)) {
      what = o.text;
      return err;
    }
  }
  // net.core.rmem_max (208 KiB by default) caps SO_RCVBUF, and a burst that overflows it is
  // lost: RC retransmits it, but UC and UD lose whole messages. With CAP_NET_ADMIN the
  // buffers can pass the cap; without it (EPERM) the capped sizes stand.
  set_int(fd, SOL_SOCKET, SO_RCVBUFFORCE, UdpBackend::kSocketBufferBytes);
  set_int(fd, SOL_SOCKET, SO_SNDBUFFORCE, UdpBackend::kSocketBufferBytes);
  return 0;
}

// Appends one int-valued control message to `h`, whose msg_control has room for it.
void add_int_cmsg(msghdr& h, int level, int type, int value) {
  auto* c = reinterpret_cast<cmsghdr*>(static_cast<char*>(h.msg_control) + h.msg_controllen);
  c->cmsg_level = level;
  c->cmsg_type = type;
  c->cmsg_len = CMSG_LEN(sizeof value);
  std::memcpy(CMSG_DATA(c), &value, sizeof value);
  h.msg_controllen += CMSG_SPACE(sizeof value);
}

}  // namespace

UdpOpenResult UdpBackend::open(std::string_view ip, std::uint16_t port) {
  boost::system::error_code ec;
  asio::ip::address address = asio::ip::make_address(std::string(ip), ec);
  if (ec) return failure(EINVAL, "'" + std::string(ip) + "' is not an IPv4 or IPv6 address");
  // ::ffff:a.b.c.d (the GID form) means the IPv4 address.
  if (address.is_v6() && address.to_v6().is_v4_mapped())
    address = asio::ip::make_address_v4(asio::ip::v4_mapped, address.to_v6());
  const asio::ip::udp::endpoint endpoint(address, port);
  const std::string where = with_port(address, port);

  auto s = std::make_unique<Socket>();
  s->socket.open(endpoint.protocol(), ec);
  if (ec) return failure(ec.value(), "cannot open a UDP socket for " + where + ": " + ec.message());
  // Asio opens sockets without close-on-exec. A program that forks and runs another would
  // hand it the socket, and the address would stay taken after this process ends.
  if (fcntl(s->socket.native_handle(), F_SETFD, FD_CLOEXEC) != 0)
    return failure(errno, "cannot set close-on-exec on the socket for " + where + ": " + std::strerror(errno));
  const char* what = "";
  if (const int err = configure(s->socket.native_handle(), address.is_v4(), what))
    return failure(err, std::string("cannot set ") + what + " on the socket for " + where + ": " + std::strerror(err));
  s->socket.bind(endpoint, ec);
  if (ec) return failure(ec.value(), bind_error(where, ec.value()));
  s->socket.native_non_blocking(true, ec);
  if (ec) return failure(ec.value(), "cannot make the socket for " + where + " non-blocking: " + ec.message());

  UdpOpenResult r;
  r.backend.reset(new UdpBackend(std::move(s), address.is_v4(), address.to_string()));
  return r;
}

UdpBackend::UdpBackend(std::unique_ptr<Socket> socket, bool ipv4, std::string address)
    : socket_(std::move(socket)),
      slots_(std::make_unique<Slots>()),
      fd_(socket_->socket.native_handle()),
      ipv4_(ipv4),
      local_address_(std::move(address)) {
  sockaddr_storage local{};
  socklen_t length = sizeof local;
  getsockname(fd_, reinterpret_cast<sockaddr*>(&local), &length);
  local_gid_ = gid_of(local).value_or(core::Gid{});
  local_port_ = port_of(local);  // port 0 has become a real one
}

UdpBackend::~UdpBackend() = default;

std::size_t UdpBackend::send(std::span<core::TxPacket> packets) {
  Slots& s = *slots_;
  const auto routable = [&](const core::TxPacket& p) { return core::is_ipv4_mapped(p.route.dst) == ipv4_; };
  std::size_t done = 0;
  while (done < packets.size()) {
    if (!routable(packets[done])) {
      ++counters_.tx_no_route;
      ++done;
      continue;
    }
    unsigned n = 0;
    for (; n < kBurst && done + n < packets.size() && routable(packets[done + n]); ++n) {
      core::TxPacket& p = packets[done + n];
      msghdr& h = s.tx_msgs[n].msg_hdr;
      h.msg_name = &s.tx_to[n];
      h.msg_namelen = socket_address_of(p.route.dst, kRoceV2Port, s.tx_to[n]);
      s.tx_iov[n] = {p.bytes.data(), p.bytes.size()};
      // The GRH fields of the address vector go into the IP header. The ICRC masks them
      // (annex A17.4.2), so they change nothing the engine computed. Hop limit 0 means
      // "the default" here: the kernel refuses a TTL of 0.
      h.msg_control = s.tx_control[n].bytes;
      h.msg_controllen = 0;
      add_int_cmsg(h, ipv4_ ? IPPROTO_IP : IPPROTO_IPV6, ipv4_ ? IP_TOS : IPV6_TCLASS, p.route.traffic_class);
      if (p.route.hop_limit != 0) add_int_cmsg(h, ipv4_ ? IPPROTO_IP : IPPROTO_IPV6, ipv4_ ? IP_TTL : IPV6_HOPLIMIT, p.route.hop_limit);
    }
    const int sent = sendmmsg(fd_, s.tx_msgs.data(), n, MSG_DONTWAIT);
    if (sent > 0) {
      for (int i = 0; i < sent; ++i) counters_.tx_bytes += packets[done + static_cast<std::size_t>(i)].bytes.size();
      counters_.tx_packets += static_cast<std::uint64_t>(sent);
      done += static_cast<std::size_t>(sent);
      continue;
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) break;  // the send buffer is full: the caller waits for POLLOUT
    // This packet was refused (EMSGSIZE above the path MTU, ENETUNREACH, ...): a lost packet,
    // which RC recovers from by retransmission and UD/UC by not caring.
    ++counters_.tx_errors;
    counters_.last_tx_errno = errno;
    ++done;
  }
  return done;
}

std::span<const core::RxPacket> UdpBackend::receive() {
  Slots& s = *slots_;
  for (std::size_t i = 0; i < kBurst; ++i) {
    msghdr& h = s.rx_msgs[i].msg_hdr;
    h.msg_name = &s.rx_from[i];
    h.msg_namelen = sizeof s.rx_from[i];
    h.msg_control = s.rx_control[i].bytes;
    h.msg_controllen = sizeof s.rx_control[i].bytes;
    h.msg_flags = 0;
  }
  const int got = recvmmsg(fd_, s.rx_msgs.data(), kBurst, MSG_DONTWAIT, nullptr);
  if (got < 0) {
    if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) ++counters_.rx_errors;
    return {};
  }
  std::size_t out = 0;
  for (std::size_t i = 0; i < static_cast<std::size_t>(got); ++i) {
    msghdr& h = s.rx_msgs[i].msg_hdr;
    for (cmsghdr* c = CMSG_FIRSTHDR(&h); c; c = CMSG_NXTHDR(&h, c)) {
      if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SO_RXQ_OVFL) {
        std::uint32_t drops = 0;  // the socket's drop count so far
        std::memcpy(&drops, CMSG_DATA(c), sizeof drops);
        counters_.rx_kernel_drops = drops;
      }
    }
    if (h.msg_flags & MSG_TRUNC) {
      ++counters_.rx_truncated;
      continue;
    }
    const auto src = gid_of(s.rx_from[i]);
    if (!src) {
      ++counters_.rx_errors;
      continue;
    }
    const std::size_t length = s.rx_msgs[i].msg_len;
    s.rx_packets[out++] =
        core::RxPacket{{s.rx_bytes.data() + i * kSlotBytes, length}, *src, local_gid_, port_of(s.rx_from[i]), false};
    ++counters_.rx_packets;
    counters_.rx_bytes += length;
  }
  return {s.rx_packets.data(), out};
}

}  // namespace softrdma::net
