// The IP multicast groups a udp backend receives (the multicast of IBTA vol. 1 s10.5 carried
// by RoCEv2: a group's packets go to its IP address, port 4791).
//
// A socket bound to one unicast address never sees a datagram sent to a group, so each group
// gets a socket of its own, bound to GROUP:4791, that joins the group on the interface of the
// backend's address (IP_ADD_MEMBERSHIP with that address; IPV6_JOIN_GROUP with its
// interface). SO_REUSEADDR and SO_REUSEPORT let every device on this machine bind the same
// group, and the kernel gives each of them a copy of every datagram. The sockets sit in one
// epoll set, the one descriptor the host waits on for all of them.
//
// Sending needs no group socket: the backend's own socket sends to the group's address, out of
// the interface of its address (IP_MULTICAST_IF, IPV6_MULTICAST_IF) and heard by this
// machine's members too (IP_MULTICAST_LOOP, IPV6_MULTICAST_LOOP): prepare_sender.
#pragma once

#include <sys/socket.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "emulator/core/device.hpp"
#include "emulator/net/backend.hpp"

namespace softrdma::net {

class UdpGroups {
 public:
  static constexpr std::size_t kBurst = 16;        // datagrams taken per receive()
  static constexpr std::size_t kSlotBytes = 8192;  // above the largest RoCEv2 packet (4 KiB payload)

  // For a backend whose socket is bound to `local` (AF_INET or AF_INET6).
  explicit UdpGroups(const sockaddr_storage& local);
  UdpGroups(const UdpGroups&) = delete;
  UdpGroups& operator=(const UdpGroups&) = delete;
  ~UdpGroups();

  // Sets up the backend's socket `fd`, bound to `local`, to send to groups (see above).
  // 0 or the errno of the option that failed.
  static int prepare_sender(int fd, const sockaddr_storage& local);

  // 0 (joining a group joined already does nothing), or an errno value: EAFNOSUPPORT for a
  // group of the other address family, else the failing call's.
  int join(const core::Gid& group);
  // 0, or EINVAL for a group not joined.
  int leave(const core::Gid& group);
  // The epoll set; -1 until the first join, then the same descriptor for good.
  int fd() const { return epoll_fd_.load(std::memory_order_relaxed); }

  // Up to out.size() (at most kBurst) datagrams waiting on the groups' sockets, as packets
  // whose destination is their group; returns how many. Their bytes stay valid until the next
  // call. Never blocks.
  std::size_t receive(std::span<core::RxPacket> out, UdpCounters& counters);

 private:
  struct Member {
    core::Gid group{};
    int fd = -1;
  };
  struct Slots;

  bool ipv4_ = true;
  sockaddr_storage local_{};
  unsigned interface_ = 0;  // IPv6: the index of the interface holding the local address
  std::vector<Member> members_;
  std::atomic<int> epoll_fd_{-1};  // read by the host's progress thread without its lock
  std::unique_ptr<Slots> slots_;   // from the first join
};

}  // namespace softrdma::net
