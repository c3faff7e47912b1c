// The `udp` backend (docs/backends.md): RoCEv2 over one kernel UDP socket bound to ADDR:4791,
// IPv4 or IPv6, unprivileged. Bursts go out with sendmmsg, each packet to the address inside
// its destination GID, and come in with recvmmsg. Runs of equal-sized packets to one address
// (the segments of a long message) go out as one UDP GSO datagram, and the socket takes
// coalesced datagrams (UDP_GRO): the kernel's per-packet cost, not the copies, limits a plain
// UDP socket, and GSO/GRO pay it once per 64 KiB.
//
// What the socket is set up to do, and why:
// - It stays unconnected and has IP_MTU_DISCOVER = IP_PMTUDISC_DO: the kernel then sends
//   IPv4 with DF and Identification 0, the header the engine computed the ICRC for
//   (core/roce_headers.hpp). A connected socket would send a per-socket incrementing ID, and
//   the ICRC covers the ID (IBTA vol. 1 annex A17.4.2; docs/interop.md, "IPv4 IDs and the ICRC").
// - IPv4 sends UDP checksum 0 (SO_NO_CHECK), as rxe does; IPv6 keeps a real checksum, which
//   RFC 8200 s8.1 requires. The kernel refuses GSO without checksums (EINVAL), so a burst
//   that holds a GSO datagram is sent with them (RFC 768: a receiver checks one if present;
//   the ICRC masks the field, annex A17.4.2).
// - The kernel numbers the segments of a GSO send with IPv4 IDs 0, 1, 2, ... (DF keeps the
//   first at 0): segment k's ICRC is computed for ID k (wire::Ipv4IdentificationShift) and
//   the ID recorded in its route for the capture. A receiver given a coalesced datagram
//   splits it at the segment size and tells the engine segment k was most likely sent with
//   ID k (RxPacket::ipv4_id); on loopback and veth the datagram is never segmented at all.
// - Every packet leaves from port 4791, the socket's own port: the engine is configured
//   with it (core::DeviceConfig::udp_source_port), because the ICRC covers it.
// - A socket sees no IPv4 ID on receive, so it cannot check a peer's ICRC over the real
//   headers: RxPacket.icrc_checked stays false and the engine checks the ICRC as if the ID
//   were 0, which is what softrdma peers send; for a peer with non-zero IDs, such as rxe or
//   a NIC, it solves for the ID instead (DeviceCounters::icrc_ipv4_id_solved).
// - Multicast groups are received on sockets of their own (udp_groups.hpp); packets to a
//   group leave from this socket one datagram each (no GSO), with IPv4 ID 0 as any single send.
// Not used yet: per-QP source ports.
#pragma once

#include <sys/socket.h>

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "emulator/core/device.hpp"
#include "emulator/net/backend.hpp"
#include "emulator/net/udp_groups.hpp"
#include "wire/icrc_ipv4_id.hpp"

namespace softrdma::net {

inline constexpr std::uint16_t kRoceV2Port = 4791;  // IANA's RoCEv2 port (annex A17.2)

class UdpBackend;

struct UdpOpenResult {
  std::unique_ptr<UdpBackend> backend;  // null on failure
  int errnum = 0;                       // on failure: the errno of the step that failed (EADDRINUSE, ...)
  std::string error;                    // on failure: one line for a person
};

class UdpBackend final : public Backend {
 public:
  static constexpr std::size_t kBurst = 32;           // datagrams per sendmmsg / recvmmsg
  static constexpr std::size_t kSlotBytes = 65536;    // the largest UDP datagram: a coalesced one, or a jumbo packet
  static constexpr std::size_t kGsoSegments = 64;     // the kernel's UDP_MAX_SEGMENTS (and GRO's per datagram)
  static constexpr std::size_t kGsoBytes = 65507;     // the UDP payload an IPv4 datagram can carry
  static constexpr int kSocketBufferBytes = 4 << 20;  // a 1 MiB message in flight several times over

  // Binds `ip` (an IPv4 or IPv6 address in text form) : `port`. Packets always go to port
  // 4791 of their destination; another local port is for tests (0: one the kernel picks).
  static UdpOpenResult open(std::string_view ip, std::uint16_t port = kRoceV2Port);

  UdpBackend(const UdpBackend&) = delete;
  UdpBackend& operator=(const UdpBackend&) = delete;
  ~UdpBackend() override;

  int fd() const override { return fd_; }
  bool is_ipv4() const { return ipv4_; }
  const core::Gid& local_gid() const override { return local_gid_; }
  std::uint16_t local_port() const override { return local_port_; }
  const std::string& local_address() const override { return local_address_; }  // "127.0.0.2", "::1"
  UdpCounters counters() const override { return counters_; }
  // Off: every packet leaves as its own datagram, ID 0 and (IPv4) checksum 0, so a tcpdump on
  // the interface sees each RoCE packet as a frame of its own. On by default.
  void set_gso(bool on) { gso_ = on; }

  // Sends `packets` in order; their ICRCs must have been sealed for local_port().
  // Returns how many were dealt with (sent, or counted as an error and dropped); fewer than
  // packets.size() only when the socket's send buffer is full: wait for POLLOUT and send the
  // rest then. Never blocks.
  // Packets of a GSO datagram get their IPv4 ID and matching ICRC set here (see above).
  std::size_t send(std::span<core::TxPacket> packets) override;

  // The packets of up to kBurst datagrams that have arrived (a coalesced one split into its
  // packets), as the engine takes them; empty when none has. After a receive that found
  // nothing, of one datagram only.
  // The bytes live in this backend's slots until the next call. Never blocks.
  std::span<const core::RxPacket> receive() override;
  bool may_have_more() const override { return burst_full_; }

  bool joins_groups() const override { return multicast_; }
  int join_group(const core::Gid& group) override { return multicast_ ? groups_->join(group) : EOPNOTSUPP; }
  int leave_group(const core::Gid& group) override { return multicast_ ? groups_->leave(group) : EOPNOTSUPP; }
  int group_fd() const override { return groups_->fd(); }

 private:
  struct Socket;  // the Boost.Asio objects, kept out of this header
  struct Slots;   // the recvmmsg / sendmmsg arrays

  UdpBackend(std::unique_ptr<Socket> socket, bool ipv4, std::string address);
  // How many packets from packets[first] on can share one GSO datagram (1: send it alone).
  std::size_t gso_run(std::span<const core::TxPacket> packets, std::size_t first) const;
  // Gives packet k of a GSO datagram IPv4 ID k and the ICRC for it (0 for all: back to single sends).
  void number_segments(std::span<core::TxPacket> run, bool as_gso);
  // The ICRC change per ID change for packets of `packet_bytes`, kept for the sizes used last.
  const wire::Ipv4IdentificationShift& id_shift(std::size_t packet_bytes);
  // SO_NO_CHECK on or off as the next sendmmsg needs (IPv4 only).
  void use_checksums(bool on);

  std::unique_ptr<Socket> socket_;
  std::unique_ptr<Slots> slots_;
  int fd_ = -1;
  bool ipv4_ = true;
  std::string local_address_;
  std::uint16_t local_port_ = kRoceV2Port;
  core::Gid local_gid_{};
  bool gso_ = true;
  bool checksums_ = false;  // IPv4: SO_NO_CHECK is off at the moment
  std::size_t no_gso_ = 0;  // packets still to send one by one after the kernel refused their GSO datagram
  static constexpr std::size_t kIdShiftsKept = 4;
  std::vector<std::pair<std::size_t, wire::Ipv4IdentificationShift>> id_shifts_;  // by packet size
  std::unique_ptr<UdpGroups> groups_;
  bool burst_full_ = true;  // the last receive() filled its burst, or took group packets
  bool found_ = true;       // the last receive() got a datagram: the next asks for kBurst
  bool multicast_ = false;  // the socket is set up to send to groups (UdpGroups::prepare_sender)
  UdpCounters counters_;
};

}  // namespace softrdma::net
