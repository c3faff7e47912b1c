#include "emulator/net/udp_backend.hpp"

#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/udp.h>
#include <sys/socket.h>

#include <algorithm>
#include <array>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/udp.hpp>
#include <cerrno>
#include <cstring>
#include <utility>
#include <vector>

#include "emulator/core/roce_headers.hpp"
#include "emulator/net/control_message.hpp"
#include "emulator/net/udp_gid.hpp"
#include "wire/ib_headers.hpp"
#include "wire/icrc.hpp"
#include "wire/icrc_ipv4_id.hpp"
#include "wire/udp.hpp"

namespace softrdma::net {

namespace asio = boost::asio;

struct UdpBackend::Socket {
  asio::io_context io;  // Asio wants one to own a socket; nothing runs on it
  asio::ip::udp::socket socket{io};
};

struct UdpBackend::Slots {
  // Control buffers, aligned for cmsghdr: in, a u32 (SO_RXQ_OVFL) and an int (UDP_GRO's
  // segment size); out, two ints (TOS/TTL or TCLASS/HOPLIMIT) and a u16 (UDP_SEGMENT).
  union RxControl {
    cmsghdr align;
    char bytes[CMSG_SPACE(sizeof(std::uint32_t)) + CMSG_SPACE(sizeof(int))];
  };
  union TxControl {
    cmsghdr align;
    char bytes[2 * CMSG_SPACE(sizeof(int)) + CMSG_SPACE(sizeof(std::uint16_t))];
  };

  std::array<mmsghdr, kBurst> rx_msgs{};
  std::array<iovec, kBurst> rx_iov{};
  std::array<sockaddr_storage, kBurst> rx_from{};
  std::array<RxControl, kBurst> rx_control{};
  // 2 MiB of slots, left uninitialised: only the pages datagrams land in become resident,
  // so an idle device stays small.
  std::unique_ptr<std::uint8_t[]> rx_bytes{new std::uint8_t[kBurst * kSlotBytes]};
  std::vector<core::RxPacket> rx_packets = std::vector<core::RxPacket>(kBurst * kGsoSegments + UdpGroups::kBurst);

  std::array<mmsghdr, kBurst> tx_msgs{};
  std::array<iovec, kBurst * kGsoSegments> tx_iov{};  // a message's packets are consecutive iovecs
  std::array<std::size_t, kBurst> tx_packets{};       // how many packets each message holds
  std::array<sockaddr_storage, kBurst> tx_to{};
  std::array<TxControl, kBurst> tx_control{};

  Slots() {
    for (std::size_t i = 0; i < kBurst; ++i) {
      rx_iov[i] = {rx_bytes.get() + i * kSlotBytes, kSlotBytes};
      rx_msgs[i].msg_hdr.msg_iov = &rx_iov[i];
      rx_msgs[i].msg_hdr.msg_iovlen = 1;
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
    return "cannot bind " + where +
           ": address already in use (another softrdma device or the rdma_rxe module holds it)";
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
  options.push_back(
      {SOL_SOCKET, SO_RCVBUF, UdpBackend::kSocketBufferBytes, "SO_RCVBUF"});  // capped by net.core.rmem_max
  options.push_back({SOL_SOCKET, SO_SNDBUF, UdpBackend::kSocketBufferBytes, "SO_SNDBUF"});
  options.push_back({SOL_SOCKET, SO_RXQ_OVFL, 1, "SO_RXQ_OVFL"});
  for (const Option& o : options) {
    if (const int err = set_int(fd, o.level, o.name, o.value)) {
      what = o.text;
      return err;
    }
  }
  // Coalesced datagrams in (split in receive()); kernels before 5.0 lack it and send
  // single datagrams, which is what this socket then gets.
  set_int(fd, SOL_UDP, UDP_GRO, 1);
  // net.core.rmem_max (208 KiB by default) caps SO_RCVBUF, and a burst that overflows it is
  // lost: RC retransmits it, but UC and UD lose whole messages. With CAP_NET_ADMIN the
  // buffers can pass the cap; without it (EPERM) the capped sizes stand.
  set_int(fd, SOL_SOCKET, SO_RCVBUFFORCE, UdpBackend::kSocketBufferBytes);
  set_int(fd, SOL_SOCKET, SO_SNDBUFFORCE, UdpBackend::kSocketBufferBytes);
  return 0;
}

bool same_path(const core::TxPacket& a, const core::TxPacket& b) {
  return a.route.dst == b.route.dst && a.route.traffic_class == b.route.traffic_class &&
         a.route.hop_limit == b.route.hop_limit;
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
  groups_ = std::make_unique<UdpGroups>(local);
  multicast_ = UdpGroups::prepare_sender(fd_, local) == 0;
}

UdpBackend::~UdpBackend() = default;

std::size_t UdpBackend::gso_run(std::span<const core::TxPacket> packets, std::size_t first) const {
  const std::size_t size = packets[first].bytes.size();
  if (!gso_ || no_gso_ > 0 || size < wire::Bth::length + wire::kIcrcLength)
    return 1;                                                      // not a RoCE packet: nothing to number
  if (core::is_multicast_gid(packets[first].route.dst)) return 1;  // a group's members take no coalesced datagrams
  std::size_t n = 1, bytes = size;
  // Equal sizes, the last one possibly shorter (the kernel cuts the datagram every `size`).
  while (first + n < packets.size() && n < kGsoSegments && same_path(packets[first], packets[first + n])) {
    const std::size_t next = packets[first + n].bytes.size();
    if (next > size || bytes + next > kGsoBytes) break;
    bytes += next;
    ++n;
    if (next < size) break;
  }
  return n;
}

void UdpBackend::number_segments(std::span<core::TxPacket> run, bool as_gso) {
  if (!ipv4_) return;  // IPv6 has no Identification
  for (std::size_t k = 0; k < run.size(); ++k) {
    core::TxPacket& p = run[k];
    const auto id = static_cast<std::uint16_t>(as_gso ? k : 0);
    if (p.route.ipv4_id == id) continue;
    const std::size_t size = p.bytes.size();
    std::uint8_t* icrc = p.bytes.data() + size - wire::kIcrcLength;
    wire::store_icrc(icrc,
                     wire::load_icrc(icrc) ^ id_shift(size).syndrome(static_cast<std::uint16_t>(p.route.ipv4_id ^ id)));
    p.route.ipv4_id = id;
  }
}

const wire::Ipv4IdentificationShift& UdpBackend::id_shift(std::size_t packet_bytes) {
  for (const auto& [bytes, shift] : id_shifts_)
    if (bytes == packet_bytes) return shift;
  // Few sizes recur (a message's full packets, its last one, an ACK), so the oldest goes.
  if (id_shifts_.size() == kIdShiftsKept) id_shifts_.erase(id_shifts_.begin());
  const std::size_t trailing =
      wire::kIpv4BytesAfterIdentification + wire::Udp::length + packet_bytes - wire::kIcrcLength;
  return id_shifts_.emplace_back(packet_bytes, wire::Ipv4IdentificationShift(trailing)).second;
}

void UdpBackend::use_checksums(bool on) {
  if (!ipv4_ || checksums_ == on) return;
  if (set_int(fd_, SOL_SOCKET, SO_NO_CHECK, on ? 0 : 1) == 0) checksums_ = on;
}

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
    std::size_t next = done, iov = 0;
    bool gso = false;
    while (n < kBurst && next < packets.size() && routable(packets[next])) {
      const std::size_t run = gso_run(packets, next);
      number_segments(packets.subspan(next, run), run > 1);
      core::TxPacket& p = packets[next];
      msghdr& h = s.tx_msgs[n].msg_hdr;
      h.msg_name = &s.tx_to[n];
      h.msg_namelen = socket_address_of(p.route.dst, kRoceV2Port, s.tx_to[n]);
      h.msg_iov = &s.tx_iov[iov];
      h.msg_iovlen = run;
      for (std::size_t k = 0; k < run; ++k)
        s.tx_iov[iov++] = {packets[next + k].bytes.data(), packets[next + k].bytes.size()};
      // The GRH fields of the address vector go into the IP header. The ICRC masks them
      // (annex A17.4.2), so they change nothing the engine computed. Hop limit 0 means
      // "the default" here: the kernel refuses a TTL of 0.
      h.msg_control = s.tx_control[n].bytes;
      h.msg_controllen = 0;
      add_cmsg(h, ipv4_ ? IPPROTO_IP : IPPROTO_IPV6, ipv4_ ? IP_TOS : IPV6_TCLASS, int{p.route.traffic_class});
      if (p.route.hop_limit != 0)
        add_cmsg(h, ipv4_ ? IPPROTO_IP : IPPROTO_IPV6, ipv4_ ? IP_TTL : IPV6_HOPLIMIT, int{p.route.hop_limit});
      if (run > 1) {
        add_cmsg(h, SOL_UDP, UDP_SEGMENT, static_cast<std::uint16_t>(p.bytes.size()));
        gso = true;
      }
      s.tx_packets[n++] = run;
      next += run;
    }
    use_checksums(gso);
    const int sent = sendmmsg(fd_, s.tx_msgs.data(), n, MSG_DONTWAIT);
    if (sent > 0) {
      for (std::size_t m = 0; m < static_cast<std::size_t>(sent); ++m) {
        for (std::size_t k = 0; k < s.tx_packets[m]; ++k) counters_.tx_bytes += packets[done + k].bytes.size();
        counters_.tx_packets += s.tx_packets[m];
        counters_.tx_gso_datagrams += s.tx_packets[m] > 1;
        no_gso_ -= std::min(no_gso_, s.tx_packets[m]);
        done += s.tx_packets[m];
      }
      continue;
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) break;  // the send buffer is full: the caller waits for POLLOUT
    counters_.last_tx_errno = errno;
    if (s.tx_packets[0] > 1) {
      // The kernel refused the GSO datagram (a segment above the path MTU gives EINVAL, not
      // EMSGSIZE): its packets go again one by one, so each meets its own fate.
      no_gso_ = s.tx_packets[0];
      continue;
    }
    // This packet was refused (EMSGSIZE above the path MTU, ENETUNREACH, ...): a lost packet,
    // which RC recovers from by retransmission and UD/UC by not caring.
    ++counters_.tx_errors;
    no_gso_ -= std::min<std::size_t>(no_gso_, 1);
    ++done;
  }
  return done;
}

std::span<const core::RxPacket> UdpBackend::receive() {
  Slots& s = *slots_;
  // After a look that found nothing, one datagram: a recvmmsg that gets one goes through the
  // socket layer again to find the queue empty, a cost a ping-pong pays on every message.
  // After one that found something, a burst: a stream keeps the queue full.
  const std::size_t burst = found_ ? kBurst : 1;
  for (std::size_t i = 0; i < burst; ++i) {
    msghdr& h = s.rx_msgs[i].msg_hdr;
    h.msg_name = &s.rx_from[i];
    h.msg_namelen = sizeof s.rx_from[i];
    h.msg_control = s.rx_control[i].bytes;
    h.msg_controllen = sizeof s.rx_control[i].bytes;
    h.msg_flags = 0;
  }
  int got = recvmmsg(fd_, s.rx_msgs.data(), static_cast<unsigned>(burst), MSG_DONTWAIT, nullptr);
  if (got < 0) {
    if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) ++counters_.rx_errors;
    got = 0;
  }
  std::size_t out = 0;
  for (std::size_t i = 0; i < static_cast<std::size_t>(got); ++i) {
    msghdr& h = s.rx_msgs[i].msg_hdr;
    int segment = 0;  // UDP_GRO: the datagram is packets of this size (the last may be shorter)
    for (cmsghdr* c = CMSG_FIRSTHDR(&h); c; c = CMSG_NXTHDR(&h, c)) {
      if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SO_RXQ_OVFL) {
        std::uint32_t drops = 0;  // the socket's drop count so far
        std::memcpy(&drops, CMSG_DATA(c), sizeof drops);
        counters_.rx_kernel_drops = drops;
      } else if (c->cmsg_level == SOL_UDP && c->cmsg_type == UDP_GRO) {
        std::memcpy(&segment, CMSG_DATA(c), sizeof segment);
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
    const std::uint8_t* bytes = s.rx_bytes.get() + i * kSlotBytes;
    const std::size_t step = segment > 0 && static_cast<std::size_t>(segment) < length
                                 ? static_cast<std::size_t>(segment)
                                 : std::max<std::size_t>(length, 1);
    if ((length + step - 1) / step > kGsoSegments) {  // more than GRO ever coalesces: not split blindly
      ++counters_.rx_truncated;
      continue;
    }
    counters_.rx_gro_datagrams += step < length;
    std::size_t offset = 0;
    for (std::uint16_t k = 0; k == 0 || offset < length; ++k, offset += step) {
      const std::size_t piece = std::min(step, length - offset);
      // Segment k of a GSO send left with IPv4 ID k (see the header).
      s.rx_packets[out++] = core::RxPacket{{bytes + offset, piece}, *src,  local_gid_,
                                           port_of(s.rx_from[i]),   false, ipv4_ ? k : std::uint16_t{0}};
      ++counters_.rx_packets;
      counters_.rx_bytes += piece;
    }
  }
  const std::size_t grouped = groups_->receive(std::span(s.rx_packets).subspan(out), counters_);
  // A single look that found a datagram leaves the queue behind it to the next receive, which
  // asks for a burst.
  found_ = got > 0;
  burst_full_ = (burst == kBurst && static_cast<std::size_t>(got) == kBurst) || grouped > 0;
  out += grouped;
  return {s.rx_packets.data(), out};
}

}  // namespace softrdma::net
