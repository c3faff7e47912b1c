// The `dpdk` backend (docs/backends.md): RoCEv2 frames on one DPDK ethdev port, for the daemon
// (softrdmad --backend dpdk). EAL takes its usual arguments, so any PMD works: on machines
// without VFIO, virtual devices (net_af_packet or net_af_xdp on an interface, net_memif
// between two daemons, net_pcap) with --no-huge; docs/backends.md has what each one needs.
//
// The backend builds and parses whole frames, so unlike a UDP socket it sees and sets every
// header: IPv4 packets leave with ID 0 and DF (the header the engine sealed the ICRC for),
// TTL 64 and UDP checksum 0, and the engine gets each received packet's real IPv4 ID; IPv6
// packets leave with hop limit 64 and a UDP checksum (RFC 8200 s8.1). The Ethernet side (ARP
// or neighbour discovery for its address, sorting frames) is EthernetLink (ethernet_link.hpp).
//
// Threads: the host calls send() and receive() under its lock, from whichever thread holds
// it; none of them is an EAL lcore, so the mempool is used without per-lcore caches. There is
// no file descriptor to sleep on: an idle host polls the port every poll_interval_ns().
// EAL pins the calling thread to its first lcore; open() gives the thread its old CPU set
// back, so the daemon's other threads are not all squeezed onto one core.
// Each QP's packets leave from a UDP source port of its own (annex A17.5.1: entropy for ECMP
// and RSS), since the backend writes the UDP header itself. With several queue pairs
// (DpdkConfig::queues) the host's one thread polls every receive queue, and packets leave on
// queue 0: one queue keeps each QP's packets in order, and one thread gains nothing from more.
// One port, one address (IPv4 or IPv6); EAL can be initialised once per process.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "emulator/net/backend.hpp"
#include "emulator/net/ethernet_link.hpp"
#include "wire/udp.hpp"

struct rte_mbuf;
struct rte_mempool;

namespace softrdma::net {

struct DpdkConfig {
  std::vector<std::string> eal_args;  // what any DPDK program takes: "-l", "0", "--no-huge", "--vdev=...", ...
  std::uint16_t port = 0;             // the ethdev port EAL's probe created
  // The port's MAC, when the PMD's own will not do: virtual devices make one up (net_pcap, memif
  // pick theirs at random), and a replayed capture's frames name the MAC they were sent to.
  std::optional<wire::MacAddress> mac;
  std::string ip;  // the device's IPv4 or IPv6 address; no kernel interface should hold it
  // The link's prefix (bits of `ip`) and the gateway beyond it (EthernetLink's OnLink); without
  // a prefix every peer is on the link.
  std::optional<unsigned> prefix_len;
  std::string gateway;
  // Receive queues to poll, as many as the port has up to this (net_af_packet: its qpairs).
  std::uint16_t queues = 1;
  std::uint64_t poll_interval_ns = 50'000;
};

class DpdkBackend final : public Backend {
 public:
  static constexpr std::size_t kBurst = 32;
  // The largest frame an mbuf holds: a pool object is one 4 KiB page (net_af_xdp needs that,
  // see create_pool in the .cpp), less the mempool header (64), the mbuf (128) and its
  // headroom (128). Enough for IB MTU 2048 (2048 + at most 68 bytes of IB headers, IBTA vol. 1
  // s9.2-9.4, + 42 of Ethernet, IPv4 and UDP, or 62 with IPv6), not for 4096: larger packets
  // are refused and counted (tx_errors, EMSGSIZE).
  static constexpr std::uint16_t kFrameRoom = 4096 - 64 - 128 - 128;
  // A received frame may be longer and arrive in a chain of mbufs: a peer on a jumbo link
  // with IB MTU 4096 sends 4096 + 78 bytes. It is copied whole (linear_) before it is parsed,
  // up to a 9000-byte jumbo frame's size; longer ones are counted (rx_truncated) and dropped.
  static constexpr std::uint32_t kLargestFrame = 9018;

  static BackendOpen open(const DpdkConfig& config);

  DpdkBackend(const DpdkBackend&) = delete;
  DpdkBackend& operator=(const DpdkBackend&) = delete;
  ~DpdkBackend() override;

  int fd() const override { return -1; }
  std::uint64_t poll_interval_ns() const override { return poll_interval_ns_; }
  const core::Gid& local_gid() const override { return link_.gid(); }
  std::uint16_t local_port() const override { return wire::kRoceV2Port; }
  bool sends_from_local_port() const override { return false; }
  const std::string& local_address() const override { return address_; }
  UdpCounters counters() const override;
  std::vector<NamedCount> port_counters() const override;  // EthernetLink's, then the port's own
  const LinkCounters& link_counters() const { return link_.counters(); }

  std::size_t send(std::span<core::TxPacket> packets) override;
  std::span<const core::RxPacket> receive() override;

 private:
  DpdkBackend(std::uint16_t port, std::uint16_t queues, rte_mempool* pool, wire::MacAddress mac, const core::Gid& gid,
              OnLink on_link, std::string address, std::uint64_t poll_interval_ns);
  // Sends frames EthernetLink made (ARP, ND) and packets it released; drops what the port refuses.
  void send_link_output(std::uint64_t now);
  // Fills an mbuf with `packet` framed for `mac`; null (and counted) when the pool is empty.
  rte_mbuf* frame(const core::TxPacket& packet, const wire::MacAddress& mac);
  rte_mbuf* frame(std::span<const std::uint8_t> bytes);
  // Hands `n` mbufs to the port; returns how many it took and frees none.
  std::uint16_t transmit(rte_mbuf** mbufs, std::uint16_t n);
  void release_received();

  std::uint16_t port_;
  std::uint16_t queues_;
  std::uint16_t rx_queue_ = 0;  // the queue receive() looks at first
  rte_mempool* pool_;
  EthernetLink link_;
  std::string address_;
  std::uint64_t poll_interval_ns_;
  std::vector<rte_mbuf*> received_;                // the mbufs behind rx_, freed by the next receive()
  std::vector<std::vector<std::uint8_t>> linear_;  // chained frames copied whole, one per burst slot
  std::vector<core::RxPacket> rx_;
  UdpCounters counters_;
};

}  // namespace softrdma::net
