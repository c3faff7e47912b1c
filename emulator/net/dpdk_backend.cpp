#include "emulator/net/dpdk_backend.hpp"

#include <pthread.h>
#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_ethdev.h>
#include <rte_mbuf.h>
#include <rte_mbuf_pool_ops.h>
#include <sched.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <thread>

#include "emulator/core/copy_bytes.hpp"
#include "emulator/net/roce_encapsulation.hpp"
#include "emulator/net/udp_gid.hpp"

namespace softrdma::net {
namespace {

constexpr unsigned kPoolMbufs = 8191;  // 2^n - 1 suits the ring under the pool
constexpr unsigned kPoolCache = 0;     // our threads are not lcores: a cache would go unused
constexpr std::uintptr_t kPage = 4096;
constexpr unsigned kObjectBytes = kPage;  // one pool object, its mempool header included (create_pool)
constexpr std::uint16_t kRingDescriptors = 2048;
constexpr auto kLinkUpWait = std::chrono::seconds(1);  // memif's server waits for its client: not long

std::atomic<bool> eal_taken{false};

std::uint64_t now_ns() {
  return static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
          .count());
}

std::string rte_error(int err) { return rte_strerror(err < 0 ? -err : err); }

// EAL wants a mutable argv whose strings outlive the call (it keeps pointers into them).
int init_eal(const std::vector<std::string>& args) {
  static std::vector<std::string> kept;
  static std::vector<char*> argv;
  kept.clear();
  kept.emplace_back("softrdmad");
  kept.insert(kept.end(), args.begin(), args.end());
  argv.clear();
  for (std::string& s : kept) argv.push_back(s.data());
  argv.push_back(nullptr);
  return rte_eal_init(static_cast<int>(kept.size()), argv.data());
}

// The mbuf pool, built so that every object is exactly one page, page-aligned. net_af_xdp
// hands the pool's memory to the kernel as its UMEM, in unaligned-chunk mode, and the kernel
// silently discards any descriptor whose buffer crosses a page boundary unless the pages are
// physically contiguous (hugepages); with --no-huge they are not. rte_pktmbuf_pool_create's
// default layout pads objects to spread them over memory channels and lets them straddle
// pages: measured here, that lost about one frame in ten on transmit, and RC stalled.
rte_mempool* create_pool(const std::string& name, int socket) {
  constexpr unsigned kFlags = RTE_MEMPOOL_F_NO_SPREAD;
  rte_mempool_objsz sizes{};
  rte_mempool_calc_obj_size(0, kFlags, &sizes);
  const unsigned element = kObjectBytes - sizes.header_size - sizes.trailer_size;
  rte_mempool* pool = rte_mempool_create_empty(name.c_str(), kPoolMbufs, element, kPoolCache,
                                               sizeof(rte_pktmbuf_pool_private), socket, kFlags);
  if (pool == nullptr) return nullptr;
  rte_pktmbuf_pool_private priv{};
  priv.mbuf_data_room_size = static_cast<std::uint16_t>(element - sizeof(rte_mbuf));
  if (rte_mempool_set_ops_byname(pool, rte_mbuf_best_mempool_ops(), nullptr) != 0) {
    rte_mempool_free(pool);
    return nullptr;
  }
  rte_pktmbuf_pool_init(pool, &priv);
  if (rte_mempool_populate_default(pool) < 0) {
    rte_mempool_free(pool);
    return nullptr;
  }
  rte_mempool_obj_iter(pool, rte_pktmbuf_init, nullptr);
  return pool;
}

// Pool objects whose buffer crosses a page boundary (see create_pool).
unsigned straddling_objects(rte_mempool* pool) {
  unsigned count = 0;
  rte_mempool_obj_iter(
      pool,
      [](rte_mempool*, void* counter, void* object, unsigned) {
        const auto* m = static_cast<const rte_mbuf*>(object);
        const auto first = reinterpret_cast<std::uintptr_t>(m->buf_addr);
        const auto last = first + m->buf_len - 1;
        if (first / kPage != last / kPage) ++*static_cast<unsigned*>(counter);
      },
      &count);
  return count;
}

BackendOpen failed(std::string what) { return {nullptr, "dpdk backend: " + std::move(what)}; }

}  // namespace

BackendOpen DpdkBackend::open(const DpdkConfig& config) {
  // One address: IPv4, which EthernetLink serves with ARP, or IPv6, served with neighbour
  // discovery. ND can neither ask for nor answer for a multicast or unspecified address.
  const std::optional<core::Gid> parsed = parse_gid(config.ip);
  if (!parsed) return failed("'" + config.ip + "' is not an IPv4 or IPv6 address");
  const core::Gid gid = *parsed;
  if (wire::is_multicast(gid) || wire::is_unspecified(gid))
    return failed("'" + config.ip + "' is not a unicast IPv6 address");
  OnLink on_link{config.prefix_len, std::nullopt};
  if (config.prefix_len && *config.prefix_len > (core::is_ipv4_mapped(gid) ? 32u : 128u))
    return failed("prefix /" + std::to_string(*config.prefix_len) + " is longer than " + config.ip + "'s address");
  if (!config.gateway.empty()) {
    const std::optional<core::Gid> gateway = parse_gid(config.gateway);
    if (!gateway) return failed("gateway '" + config.gateway + "' is not an IPv4 or IPv6 address");
    if (core::is_ipv4_mapped(*gateway) != core::is_ipv4_mapped(gid))
      return failed("gateway " + config.gateway + " is not of " + config.ip + "'s family");
    if (!config.prefix_len || !EthernetLink::on_link(gid, on_link, *gateway))
      return failed("gateway " + config.gateway + " is not on the link (give --ip ADDRESS/PREFIX that holds it)");
    on_link.gateway = gateway;
  }
  if (eal_taken.exchange(true))
    return failed("EAL is already initialised in this process (one dpdk device per process)");

  cpu_set_t cpus;
  CPU_ZERO(&cpus);
  const bool have_cpus = pthread_getaffinity_np(pthread_self(), sizeof cpus, &cpus) == 0;
  if (init_eal(config.eal_args) < 0) return failed("EAL initialisation failed: " + rte_error(rte_errno));
  if (have_cpus) pthread_setaffinity_np(pthread_self(), sizeof cpus, &cpus);  // see the header

  const std::uint16_t port = config.port;
  if (!rte_eth_dev_is_valid_port(port))
    return failed("no ethdev port " + std::to_string(port) + " (EAL created " +
                  std::to_string(rte_eth_dev_count_avail()) +
                  "; name one with --vdev=... or a PCI device in the EAL arguments)");
  rte_eth_dev_info info{};
  if (const int err = rte_eth_dev_info_get(port, &info); err != 0)
    return failed("cannot query port: " + rte_error(err));

  const int socket = rte_eth_dev_socket_id(port);
  rte_mempool* pool = create_pool("softrdma_" + std::to_string(port), socket < 0 ? SOCKET_ID_ANY : socket);
  if (pool == nullptr) return failed("cannot create the mbuf pool: " + rte_error(rte_errno) + " (raise EAL's -m?)");

  if (const unsigned n = straddling_objects(pool); n != 0)
    std::fprintf(stderr, "softrdmad: dpdk: %u of %u mbufs cross a page boundary; net_af_xdp drops frames in them\n", n,
                 kPoolMbufs);
  rte_eth_conf conf{};
  // Frames longer than an mbuf arrive chained where the PMD can chain them (see kLargestFrame).
  if ((info.rx_offload_capa & RTE_ETH_RX_OFFLOAD_SCATTER) != 0) conf.rxmode.offloads |= RTE_ETH_RX_OFFLOAD_SCATTER;
  const std::uint16_t queues =
      std::max<std::uint16_t>(1, std::min({config.queues, info.max_rx_queues, info.max_tx_queues}));
  if (queues < config.queues)
    std::fprintf(stderr, "softrdmad: dpdk port %u (%s) has %u queue pairs, not %u: using %u\n", port, info.driver_name,
                 std::min(info.max_rx_queues, info.max_tx_queues), config.queues, queues);
  // RSS spreads flows (a QP's UDP source port, annex A17.5.1) over the receive queues, where
  // the PMD hashes; a PMD without RSS spreads them its own way (net_af_packet: the kernel's
  // fanout) or not at all.
  const std::uint64_t rss = (RTE_ETH_RSS_IP | RTE_ETH_RSS_UDP) & info.flow_type_rss_offloads;
  if (queues > 1 && rss != 0) {
    conf.rxmode.mq_mode = RTE_ETH_MQ_RX_RSS;
    conf.rx_adv_conf.rss_conf.rss_hf = rss;
  }
  // The pool's mbufs are shared out among the queues' rings (kPoolMbufs holds two full rings).
  std::uint16_t rx_descriptors = static_cast<std::uint16_t>(kRingDescriptors / queues);
  std::uint16_t tx_descriptors = rx_descriptors;
  int err = rte_eth_dev_configure(port, queues, queues, &conf);
  if (err == 0) err = rte_eth_dev_adjust_nb_rx_tx_desc(port, &rx_descriptors, &tx_descriptors);
  for (std::uint16_t q = 0; err == 0 && q < queues; ++q) {
    err = rte_eth_rx_queue_setup(port, q, rx_descriptors, socket, nullptr, pool);
    if (err == 0) err = rte_eth_tx_queue_setup(port, q, tx_descriptors, socket, nullptr);
  }
  if (err == 0) err = rte_eth_dev_start(port);
  if (err != 0) {
    rte_mempool_free(pool);
    return failed(std::string("cannot start port ") + info.driver_name + ": " + rte_error(err));
  }
  rte_ether_addr mac{};
  if (config.mac) {
    std::copy(config.mac->begin(), config.mac->end(), std::begin(mac.addr_bytes));
    // A PMD that cannot take a MAC (net_pcap, net_af_packet) still gets us every frame in
    // promiscuous mode; EthernetLink then keeps those for the MAC we answer ARP with.
    const int set = rte_eth_dev_default_mac_addr_set(port, &mac);
    const int promiscuous = set == 0 ? 0 : rte_eth_promiscuous_enable(port);
    if (promiscuous != 0) {
      rte_eth_dev_stop(port);
      rte_mempool_free(pool);
      return failed(std::string("port ") + info.driver_name + " can neither take MAC " + wire::mac_text(*config.mac) +
                    " (" + rte_error(set) + ") nor be made promiscuous (" + rte_error(promiscuous) + ")");
    }
  } else {
    rte_eth_macaddr_get(port, &mac);
  }
  // memif and tap drop what is sent before their link is up, so the first packets would be lost.
  const auto until = std::chrono::steady_clock::now() + kLinkUpWait;
  rte_eth_link link{};
  while (rte_eth_link_get_nowait(port, &link) == 0 && link.link_status == RTE_ETH_LINK_DOWN &&
         std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  if (link.link_status == RTE_ETH_LINK_DOWN)
    std::fprintf(stderr, "softrdmad: dpdk port %u (%s): link still down after %llds; sending anyway\n", port,
                 info.driver_name, static_cast<long long>(kLinkUpWait.count()));

  wire::MacAddress our_mac{};
  std::copy(std::begin(mac.addr_bytes), std::end(mac.addr_bytes), our_mac.begin());
  std::fprintf(stderr, "softrdmad: dpdk port %u (%s): MAC %s, link %s, %u queue pair%s%s\n", port, info.driver_name,
               wire::mac_text(our_mac).c_str(), link.link_status == RTE_ETH_LINK_DOWN ? "down" : "up", queues,
               queues == 1 ? "" : "s", queues > 1 && rss != 0 ? " with RSS" : "");
  return {std::unique_ptr<Backend>(
              new DpdkBackend(port, queues, pool, our_mac, gid, on_link, config.ip, config.poll_interval_ns)),
          {}};
}

DpdkBackend::DpdkBackend(std::uint16_t port, std::uint16_t queues, rte_mempool* pool, wire::MacAddress mac,
                         const core::Gid& gid, OnLink on_link, std::string address, std::uint64_t poll_interval_ns)
    : port_(port),
      queues_(queues),
      pool_(pool),
      link_(mac, gid, std::move(on_link)),
      address_(std::move(address)),
      poll_interval_ns_(poll_interval_ns) {
  received_.reserve(kBurst);
  rx_.reserve(kBurst);
  linear_.resize(kBurst);
}

DpdkBackend::~DpdkBackend() {
  release_received();
  std::string summary;  // what `softrdma stats` showed last, for the log
  for (const NamedCount& c : port_counters()) summary += " " + std::string(c.name) + "=" + std::to_string(c.value);
  std::fprintf(stderr, "softrdmad: dpdk port %u at exit:%s\n", port_, summary.c_str());
  rte_eth_dev_stop(port_);
  rte_eth_dev_close(port_);
  rte_mempool_free(pool_);
  rte_eal_cleanup();
}

UdpCounters DpdkBackend::counters() const {
  UdpCounters c = counters_;
  c.tx_no_route = link_.counters().tx_unresolved + link_.counters().tx_wrong_family + link_.counters().tx_no_route;
  c.rx_errors = link_.counters().rx_malformed + link_.counters().rx_not_ours;
  rte_eth_stats stats{};
  if (rte_eth_stats_get(port_, &stats) == 0) c.rx_kernel_drops = stats.imissed + stats.rx_nombuf;
  return c;
}

std::vector<NamedCount> DpdkBackend::port_counters() const {
  static_assert(sizeof(LinkCounters) == 13 * sizeof(std::uint64_t), "a LinkCounters field is missing below");
  const LinkCounters& l = link_.counters();
  std::vector<NamedCount> c = {{"rx_roce", l.rx_roce},
                               {"rx_arp", l.rx_arp},
                               {"rx_nd", l.rx_nd},
                               {"rx_not_ours", l.rx_not_ours},
                               {"rx_malformed", l.rx_malformed},
                               {"arp_requests_sent", l.arp_requests_sent},
                               {"arp_replies_sent", l.arp_replies_sent},
                               {"nd_solicitations_sent", l.nd_solicitations_sent},
                               {"nd_advertisements_sent", l.nd_advertisements_sent},
                               {"tx_held", l.tx_held},
                               {"tx_unresolved", l.tx_unresolved},
                               {"tx_wrong_family", l.tx_wrong_family},
                               {"tx_no_route", l.tx_no_route}};
  if (rte_eth_stats stats{}; rte_eth_stats_get(port_, &stats) == 0) {  // what the PMD counted
    c.insert(c.end(), {{"port_rx_frames", stats.ipackets},
                       {"port_tx_frames", stats.opackets},
                       {"port_rx_missed", stats.imissed},
                       {"port_rx_errors", stats.ierrors},
                       {"port_tx_errors", stats.oerrors},
                       {"port_rx_no_mbuf", stats.rx_nombuf}});
    // Per receive queue, as far as ethdev counts them (RTE_ETHDEV_QUEUE_STAT_CNTRS).
    static constexpr const char* kQueueNames[] = {"port_rx_frames_q0", "port_rx_frames_q1", "port_rx_frames_q2",
                                                  "port_rx_frames_q3", "port_rx_frames_q4", "port_rx_frames_q5",
                                                  "port_rx_frames_q6", "port_rx_frames_q7"};
    for (std::uint16_t q = 0; queues_ > 1 && q < std::min<std::size_t>(queues_, std::size(kQueueNames)); ++q)
      c.push_back({kQueueNames[q], stats.q_ipackets[q]});
  }
  return c;
}

rte_mbuf* DpdkBackend::frame(const core::TxPacket& packet, const wire::MacAddress& mac) {
  const wire::EthernetRepr eth{mac, link_.mac(), -1};
  core::Endpoints route = packet.route;
  if (route.hop_limit == 0) route.hop_limit = 64;  // the ICRC masks the TTL (annex A17.4.1)
  const std::size_t headers = roce_headers_length(eth, route);
  const std::size_t length = headers + packet.bytes.size();
  rte_mbuf* m = rte_pktmbuf_alloc(pool_);
  char* out = m == nullptr || length > kFrameRoom ? nullptr : rte_pktmbuf_append(m, static_cast<std::uint16_t>(length));
  if (out == nullptr) {
    rte_pktmbuf_free(m);  // null is fine
    ++counters_.tx_errors;
    counters_.last_tx_errno = m == nullptr ? ENOBUFS : EMSGSIZE;
    return nullptr;
  }
  auto* bytes = reinterpret_cast<std::uint8_t*>(out);
  write_roce_headers(eth, route, wire::kRoceV2Port, packet.bytes, bytes);
  core::copy_bytes(bytes + headers, packet.bytes.data(), packet.bytes.size());
  return m;
}

rte_mbuf* DpdkBackend::frame(std::span<const std::uint8_t> bytes) {
  rte_mbuf* m = rte_pktmbuf_alloc(pool_);
  char* out = m == nullptr ? nullptr : rte_pktmbuf_append(m, static_cast<std::uint16_t>(bytes.size()));
  if (out == nullptr) {
    rte_pktmbuf_free(m);
    return nullptr;
  }
  std::memcpy(out, bytes.data(), bytes.size());
  return m;
}

std::uint16_t DpdkBackend::transmit(rte_mbuf** mbufs, std::uint16_t n) {
  return n == 0 ? 0 : rte_eth_tx_burst(port_, 0, mbufs, n);
}

std::size_t DpdkBackend::send(std::span<core::TxPacket> packets) {
  const std::uint64_t now = now_ns();
  std::array<rte_mbuf*, kBurst> burst{};
  std::array<std::size_t, kBurst> packet_of{};  // which packet each mbuf carries
  std::size_t dealt = 0;
  while (dealt < packets.size()) {
    std::uint16_t n = 0;
    std::size_t next = dealt;
    for (; next < packets.size() && n < kBurst; ++next) {
      const std::optional<wire::MacAddress> mac = link_.route(packets[next], now);
      if (!mac) continue;  // waits for ARP or ND (EthernetLink kept a copy) or dropped and counted there
      rte_mbuf* m = frame(packets[next], *mac);
      if (m == nullptr) continue;
      packet_of[n] = next;
      burst[n++] = m;
    }
    const std::uint16_t sent = transmit(burst.data(), n);
    for (std::uint16_t i = 0; i < sent; ++i) {
      ++counters_.tx_packets;
      counters_.tx_bytes += packets[packet_of[i]].bytes.size();
    }
    if (sent < n) {  // the ring is full: the rest goes again later
      for (std::uint16_t i = sent; i < n; ++i) rte_pktmbuf_free(burst[i]);
      dealt = packet_of[sent];
      break;
    }
    dealt = next;
  }
  send_link_output(now);
  return dealt;
}

void DpdkBackend::send_link_output(std::uint64_t now) {
  link_.advance(now);
  std::vector<rte_mbuf*> out;
  for (const std::vector<std::uint8_t>& f : link_.take_frames()) {
    if (rte_mbuf* m = frame(f)) out.push_back(m);
  }
  const std::size_t link_frames = out.size();  // the released packets follow
  std::vector<std::size_t> packet_bytes;
  for (auto& [mac, packet] : link_.take_released()) {
    if (rte_mbuf* m = frame(packet, mac)) {
      out.push_back(m);
      packet_bytes.push_back(packet.bytes.size());
    }
  }
  if (out.empty()) return;
  // Slow path (a neighbour's first packets, ARP, ND): what the ring refuses is lost; RC retransmits.
  const std::uint16_t sent =
      transmit(out.data(), static_cast<std::uint16_t>(std::min<std::size_t>(out.size(), UINT16_MAX)));
  for (std::size_t i = link_frames; i < sent; ++i) {
    ++counters_.tx_packets;
    counters_.tx_bytes += packet_bytes[i - link_frames];
  }
  for (std::size_t i = sent; i < out.size(); ++i) {
    rte_pktmbuf_free(out[i]);
    ++counters_.tx_errors;
    counters_.last_tx_errno = ENOBUFS;
  }
}

void DpdkBackend::release_received() {
  if (!received_.empty()) rte_pktmbuf_free_bulk(received_.data(), static_cast<unsigned>(received_.size()));
  received_.clear();
  rx_.clear();
}

std::span<const core::RxPacket> DpdkBackend::receive() {
  release_received();
  const std::uint64_t now = now_ns();
  std::array<rte_mbuf*, kBurst> burst{};
  // Every queue, starting one further each time so that none waits behind a busy one.
  std::uint16_t n = 0;
  for (std::uint16_t k = 0; k < queues_ && n < kBurst; ++k)
    n += rte_eth_rx_burst(port_, static_cast<std::uint16_t>((rx_queue_ + k) % queues_), burst.data() + n,
                          static_cast<std::uint16_t>(kBurst - n));
  rx_queue_ = static_cast<std::uint16_t>((rx_queue_ + 1) % queues_);
  for (std::uint16_t i = 0; i < n; ++i) {
    rte_mbuf* m = burst[i];
    received_.push_back(m);
    std::span<const std::uint8_t> bytes(rte_pktmbuf_mtod(m, const std::uint8_t*), m->data_len);
    if (m->nb_segs != 1) {  // larger than one mbuf: a peer's IB MTU 4096 on a jumbo link
      if (m->pkt_len > kLargestFrame) {
        ++counters_.rx_truncated;
        continue;
      }
      std::vector<std::uint8_t>& whole = linear_[i];
      whole.resize(m->pkt_len);
      bytes = {static_cast<const std::uint8_t*>(rte_pktmbuf_read(m, 0, m->pkt_len, whole.data())), m->pkt_len};
    }
    if (const std::optional<core::RxPacket> p = link_.receive(bytes)) {
      rx_.push_back(*p);
      ++counters_.rx_packets;
      counters_.rx_bytes += p->bytes.size();
    }
  }
  send_link_output(now);  // ARP replies and advertisements, and packets an answer released
  return rx_;
}

}  // namespace softrdma::net
