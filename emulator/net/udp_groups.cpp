#include "emulator/net/udp_groups.hpp"

#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sys/epoll.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>

#include "emulator/core/roce_headers.hpp"
#include "emulator/net/udp_backend.hpp"
#include "emulator/net/udp_gid.hpp"

namespace softrdma::net {

struct UdpGroups::Slots {
  std::array<mmsghdr, kBurst> msgs{};
  std::array<iovec, kBurst> iov{};
  std::array<sockaddr_storage, kBurst> from{};
  std::unique_ptr<std::uint8_t[]> bytes{new std::uint8_t[kBurst * kSlotBytes]};
};

namespace {

int set_int(int fd, int level, int name, int value) {
  return setsockopt(fd, level, name, &value, sizeof value) == 0 ? 0 : errno;
}

// The index of the interface that holds the IPv6 address `a`; 0 when none does (the kernel
// then chooses by route).
unsigned interface_holding(const in6_addr& a) {
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return 0;
  unsigned index = 0;
  for (const ifaddrs* i = list; i != nullptr && index == 0; i = i->ifa_next) {
    if (i->ifa_addr == nullptr || i->ifa_addr->sa_family != AF_INET6) continue;
    if (IN6_ARE_ADDR_EQUAL(&reinterpret_cast<const sockaddr_in6*>(i->ifa_addr)->sin6_addr, &a))
      index = if_nametoindex(i->ifa_name);
  }
  freeifaddrs(list);
  return index;
}

const in_addr& ipv4_of(const sockaddr_storage& a) { return reinterpret_cast<const sockaddr_in&>(a).sin_addr; }
const in6_addr& ipv6_of(const sockaddr_storage& a) { return reinterpret_cast<const sockaddr_in6&>(a).sin6_addr; }

}  // namespace

UdpGroups::UdpGroups(const sockaddr_storage& local) : ipv4_(local.ss_family == AF_INET), local_(local) {
  if (!ipv4_) interface_ = interface_holding(ipv6_of(local));
}

UdpGroups::~UdpGroups() {
  for (const Member& m : members_) close(m.fd);
  if (fd() >= 0) close(fd());
}

int UdpGroups::prepare_sender(int fd, const sockaddr_storage& local) {
  if (local.ss_family == AF_INET) {
    ip_mreqn out{};
    out.imr_address = ipv4_of(local);
    if (setsockopt(fd, IPPROTO_IP, IP_MULTICAST_IF, &out, sizeof out) != 0) return errno;
    return set_int(fd, IPPROTO_IP, IP_MULTICAST_LOOP, 1);
  }
  if (const unsigned index = interface_holding(ipv6_of(local)); index != 0) {
    if (const int err = set_int(fd, IPPROTO_IPV6, IPV6_MULTICAST_IF, static_cast<int>(index))) return err;
  }
  return set_int(fd, IPPROTO_IPV6, IPV6_MULTICAST_LOOP, 1);
}

int UdpGroups::join(const core::Gid& group) {
  if (core::is_ipv4_mapped(group) != ipv4_) return EAFNOSUPPORT;
  if (std::any_of(members_.begin(), members_.end(), [&](const Member& m) { return m.group == group; })) return 0;
  if (fd() < 0) {
    const int epoll = epoll_create1(EPOLL_CLOEXEC);
    if (epoll < 0) return errno;
    slots_ = std::make_unique<Slots>();
    epoll_fd_.store(epoll, std::memory_order_relaxed);
  }
  const int s = socket(ipv4_ ? AF_INET : AF_INET6, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (s < 0) return errno;
  sockaddr_storage at{};
  const socklen_t length = socket_address_of(group, kRoceV2Port, at);
  int err = set_int(s, SOL_SOCKET, SO_REUSEADDR, 1);
  if (!err) err = set_int(s, SOL_SOCKET, SO_REUSEPORT, 1);
  set_int(s, SOL_SOCKET, SO_RCVBUF, UdpBackend::kSocketBufferBytes);  // as the backend's own: capped by rmem_max
  if (!err && !ipv4_) {
    err = set_int(s, IPPROTO_IPV6, IPV6_V6ONLY, 1);
    reinterpret_cast<sockaddr_in6&>(at).sin6_scope_id = interface_;  // link-scope groups need it
  }
  if (!err && bind(s, reinterpret_cast<const sockaddr*>(&at), length) != 0) err = errno;
  if (!err && ipv4_) {
    ip_mreqn join{};
    std::memcpy(&join.imr_multiaddr, group.data() + 12, 4);
    join.imr_address = ipv4_of(local_);
    if (setsockopt(s, IPPROTO_IP, IP_ADD_MEMBERSHIP, &join, sizeof join) != 0) err = errno;
  } else if (!err) {
    ipv6_mreq join{};
    std::memcpy(&join.ipv6mr_multiaddr, group.data(), 16);
    join.ipv6mr_interface = interface_;
    if (setsockopt(s, IPPROTO_IPV6, IPV6_JOIN_GROUP, &join, sizeof join) != 0) err = errno;
  }
  epoll_event e{};
  e.events = EPOLLIN;
  e.data.fd = s;
  if (!err && epoll_ctl(fd(), EPOLL_CTL_ADD, s, &e) != 0) err = errno;
  if (err) {
    close(s);
    return err;
  }
  members_.push_back({group, s});
  return 0;
}

int UdpGroups::leave(const core::Gid& group) {
  const auto it = std::find_if(members_.begin(), members_.end(), [&](const Member& m) { return m.group == group; });
  if (it == members_.end()) return EINVAL;
  close(it->fd);  // leaves the group and the epoll set
  members_.erase(it);
  return 0;
}

std::size_t UdpGroups::receive(std::span<core::RxPacket> out, UdpCounters& counters) {
  if (members_.empty()) return 0;
  std::array<epoll_event, kBurst> ready{};
  const int n = epoll_wait(fd(), ready.data(), static_cast<int>(ready.size()), 0);
  Slots& s = *slots_;
  const std::size_t room = std::min(out.size(), kBurst);
  std::size_t slot = 0, got = 0;  // slots used; packets handed out (datagrams refused use a slot)
  for (int r = 0; r < n && slot < room; ++r) {
    const auto member =
        std::find_if(members_.begin(), members_.end(), [&](const Member& m) { return m.fd == ready[r].data.fd; });
    if (member == members_.end()) continue;
    for (std::size_t i = slot; i < room; ++i) {
      s.iov[i] = {s.bytes.get() + i * kSlotBytes, kSlotBytes};
      msghdr& h = s.msgs[i].msg_hdr;
      h = {};
      h.msg_name = &s.from[i];
      h.msg_namelen = sizeof s.from[i];
      h.msg_iov = &s.iov[i];
      h.msg_iovlen = 1;
    }
    const int taken = recvmmsg(member->fd, &s.msgs[slot], static_cast<unsigned>(room - slot), MSG_DONTWAIT, nullptr);
    if (taken < 0) {
      if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) ++counters.rx_errors;
      continue;
    }
    for (const std::size_t end = slot + static_cast<std::size_t>(taken); slot < end; ++slot) {
      const auto src = gid_of(s.from[slot]);
      if (s.msgs[slot].msg_hdr.msg_flags & MSG_TRUNC) {
        ++counters.rx_truncated;
        continue;
      }
      if (!src) {
        ++counters.rx_errors;
        continue;
      }
      const std::size_t length = s.msgs[slot].msg_len;
      out[got++] = core::RxPacket{
          {s.bytes.get() + slot * kSlotBytes, length}, *src, member->group, port_of(s.from[slot]), false, 0};
      ++counters.rx_packets;
      counters.rx_bytes += length;
    }
  }
  return got;
}

}  // namespace softrdma::net
