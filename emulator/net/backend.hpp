// What the host needs of a backend (docs/backends.md): it moves bursts of RoCEv2 packets between
// the engine and a wire. `udp` (udp_backend.hpp) hands UDP payloads to kernel sockets; `dpdk`
// (dpdk_backend.hpp) builds and parses whole Ethernet frames on a DPDK port.
#pragma once

#include <cerrno>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "emulator/core/device.hpp"

namespace softrdma::net {

// Packet counters at the UDP/IP layer, whichever backend moves the packets.
struct UdpCounters {
  std::uint64_t tx_packets = 0;
  std::uint64_t tx_bytes = 0;     // UDP payload bytes
  std::uint64_t tx_errors = 0;    // packets the kernel or the port refused (last_tx_errno says why)
  std::uint64_t tx_no_route = 0;  // no way to the destination: other address family, neighbour unresolved
  std::uint64_t rx_packets = 0;
  std::uint64_t rx_bytes = 0;
  std::uint64_t rx_truncated = 0;      // datagrams or frames too long for a receive slot, dropped
  std::uint64_t rx_errors = 0;         // failed receive calls; dpdk: malformed or foreign frames
  std::uint64_t rx_kernel_drops = 0;   // dropped below us on full buffers (SO_RXQ_OVFL; dpdk: imissed)
  std::uint64_t tx_gso_datagrams = 0;  // datagrams sent with UDP GSO (several packets each)
  std::uint64_t rx_gro_datagrams = 0;  // datagrams received coalesced (UDP_GRO), split here
  // Packets to the device's own address, which the host hands straight back to its engine as a
  // NIC loops them back: never on the wire, and in none of the counts above.
  std::uint64_t loopback_packets = 0;
  int last_tx_errno = 0;
};

// One counter of the wire beneath a backend, by name (`softrdma stats` shows them as they come).
struct NamedCount {
  const char* name;  // a string literal
  std::uint64_t value;
};

class Backend {
 public:
  virtual ~Backend() = default;

  // A file descriptor that becomes readable when packets arrive; -1 when the backend has none
  // (a polled DPDK port): the host then never sleeps longer than poll_interval_ns().
  virtual int fd() const = 0;
  virtual std::uint64_t poll_interval_ns() const { return 0; }
  virtual const core::Gid& local_gid() const = 0;
  // The UDP port packets arrive at, and, when sends_from_local_port(), the source port every
  // packet leaves from: the engine then seals every ICRC for it. A backend that writes its
  // own UDP headers sends each packet from its QP's port instead (annex A17.5.1).
  virtual std::uint16_t local_port() const = 0;
  virtual bool sends_from_local_port() const { return true; }
  virtual const std::string& local_address() const = 0;  // "127.0.0.2", "::1"
  virtual UdpCounters counters() const = 0;
  // What the wire beneath counts beyond UdpCounters: a DPDK port's frames and its link's ARP.
  // The udp backend has nothing more to say (the kernel keeps its own counters).
  virtual std::vector<NamedCount> port_counters() const { return {}; }

  // Sends `packets` in order; returns how many were dealt with (sent, or counted as an error
  // and dropped): fewer only when the wire cannot take more now (a full socket buffer: wait
  // for POLLOUT on fd(); a full DPDK ring: try again). Never blocks.
  virtual std::size_t send(std::span<core::TxPacket> packets) = 0;
  // The packets that have arrived since the last call; their bytes stay valid until the next
  // call. Empty when none has. Never blocks. A joined group's packets come too, with the
  // group's GID as their destination.
  virtual std::span<const core::RxPacket> receive() = 0;
  // Whether the last receive() may have left packets behind: false once it found the queue
  // empty before its burst was full, so that the host need not ask again (a system call)
  // before the next step. A backend that cannot tell says true.
  virtual bool may_have_more() const { return true; }

  // Multicast: whether the backend can receive a group's packets, and starting and stopping
  // that for `group` (a multicast GID; core::GroupChange says when). 0 or an errno value;
  // EOPNOTSUPP from a backend that cannot.
  virtual bool joins_groups() const { return false; }
  virtual int join_group(const core::Gid&) { return EOPNOTSUPP; }
  virtual int leave_group(const core::Gid&) { return EOPNOTSUPP; }
  // A file descriptor that becomes readable when a joined group's packets arrive; -1 while the
  // backend has none. Once valid it stays the same.
  virtual int group_fd() const { return -1; }
};

struct BackendOpen {
  std::unique_ptr<Backend> backend;  // null on failure
  std::string error;                 // on failure: one line for a person
};

}  // namespace softrdma::net
