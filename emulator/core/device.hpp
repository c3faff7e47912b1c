// The transport engine of one RDMA device: what an RNIC implements in silicon, as a
// deterministic library without I/O (docs/architecture.md, "The engine: sans-I/O").
//
// Three kinds of input: verbs calls, received packets, and the passing of time. Three kinds
// of output: packets to send (transmit()), work completions (poll_cq()) and events
// (next_cq_event(), next_async_event()). All time comes in as an argument; next_deadline()
// says when the engine next needs advance() called. Nothing here blocks, allocates a thread,
// reads a clock or touches a socket.
//
// Errors follow rdma-core: verbs return 0 or an errno value (EINVAL for bad arguments or a
// bad attribute mask, ENOMEM when a queue or table is full, EBUSY while an object is in use,
// EOPNOTSUPP for what the device does not do).
#pragma once

#include <algorithm>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "emulator/core/connection_manager.hpp"
#include "emulator/core/counters.hpp"
#include "emulator/core/expected.hpp"
#include "emulator/core/handle_table.hpp"
#include "emulator/core/memory.hpp"
#include "emulator/core/multicast_groups.hpp"
#include "emulator/core/objects.hpp"
#include "emulator/core/qp.hpp"
#include "emulator/core/qp_transition.hpp"
#include "emulator/core/roce_headers.hpp"
#include "emulator/core/uninitialised_bytes.hpp"
#include "emulator/core/verbs_types.hpp"
#include "wire/ib_packet.hpp"

namespace softrdma::core {

struct DeviceConfig {
  std::vector<Gid> gids;       // port 1's GID table; index 0 is what `-g 0` selects
  Mtu max_mtu = Mtu::mtu4096;  // the port's MTU (active_mtu)
  DeviceLimits limits;
  std::uint32_t max_qp = 4096;
  std::uint32_t max_cq = 4096;
  std::uint32_t max_cqe = 1u << 20;
  std::uint32_t max_mr = 1u << 16;
  std::uint32_t max_pd = 4096;
  std::uint32_t max_srq = 1024;
  std::uint32_t max_xrcd = 1024;
  std::uint32_t max_ah = 1u << 16;
  MulticastLimits mcast;  // all 0 where the host cannot join groups
  // Tag matching on RC SRQs (tag_matching.hpp); an iWARP device offers none.
  TmCaps tm{.max_rndv_hdr_size = 64, .max_num_tags = 1023, .max_ops = 1024, .max_sge = 32};
  std::uint32_t first_qpn = 0x11;            // QPs 0 and 1 are the special QPs (s10.2.5)
  std::uint32_t max_inflight_packets = 512;  // requester window, in packets
  std::uint32_t ack_req_every = 64;          // AckReq at least every this many packets of a message
  std::uint32_t min_loss_window = 8;         // a QP's window after a retransmission timeout, in packets
  // The UDP source port every packet leaves from, when the host sends all of them from one
  // socket; without it each QP gets its own port for ECMP entropy (annex A17.5.1). The ICRC
  // covers the port, so the engine must seal packets with the one they really carry.
  std::optional<std::uint16_t> udp_source_port;
  // The host turns packets to gids[0] round itself (a NIC's loopback), with no wire, capture or
  // fault stage to check or show their ICRC: the engine then leaves it unwritten. Sealing was
  // a tenth of a daemon's time with both ends of ib_write_bw on it.
  bool unsealed_loopback = false;
  // Varies the communication IDs of the CM's connections (s12.6.5): a host gives each device
  // start its own, so that a process that comes back on the same address does not reuse its
  // predecessor's IDs, which the peer may still hold. None: derived from gids[0] (tests).
  std::optional<std::uint32_t> cm_id_seed;
  // An iWARP device (RFC 5040 s2): RC QPs only, which reach RTS when the iWARP CM attaches their
  // stream (stream_attach), never by the consumer's modify; no address handles, as Linux siw.
  bool iwarp = false;
};

// A packet the engine received: the UDP payload (BTH through ICRC) and the addresses it came
// with. The ICRC covers the IP and UDP headers too; unless the host already checked it, the
// engine rebuilds them as a RoCEv2 sender with IPv4 ID 0 writes them (icrc.hpp), and when
// that fails solves for the IPv4 ID the host could not see (wire/icrc_ipv4_id.hpp).
struct RxPacket {
  std::span<const std::uint8_t> bytes;
  Gid src_gid{};
  Gid dst_gid{};
  std::uint16_t src_port = 0;
  bool icrc_checked = false;  // the host verified the ICRC on the whole frame
  // The IPv4 Identification the sender most likely used, which a UDP socket does not show:
  // 0 (softrdma's single packets), or k for segment k of a datagram the kernel coalesced (GRO)
  // from a GSO send. Checked first; a wrong guess costs a solve (icrc_ipv4_id_solved).
  std::uint16_t ipv4_id = 0;
};

// A packet to send: the UDP payload with its ICRC, computed for an IPv4 header with ID 0 and
// DF (or the IPv6 header) carrying `route`'s addresses, and a UDP header with its ports.
struct TxPacket {
  Endpoints route;
  std::vector<std::uint8_t> bytes;
};

struct MrKeys {
  std::uint32_t lkey = 0;
  std::uint32_t rkey = 0;
};

// Where an MR's bytes are: the host address of its first byte, its length and the address
// SGEs and peers use for the first byte.
struct MrTranslation {
  std::uint64_t host = 0;
  std::uint64_t length = 0;
  std::uint64_t iova = 0;
};

// What a reregistration changes; the rest stays (ibv_rereg_mr's flags).
struct MrChange {
  std::optional<std::uint32_t> pd = std::nullopt;
  std::optional<MrTranslation> translation = std::nullopt;
  std::optional<std::uint32_t> access = std::nullopt;
};

struct QpCreated {
  std::uint32_t qpn = 0;
  QpCap cap;  // what the QP actually got
};

class Device {
 public:
  Device(DeviceConfig config, Memory& memory);
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;

  const DeviceConfig& config() const { return config_; }

  // Protection domains.
  Expected<std::uint32_t> alloc_pd();
  int dealloc_pd(std::uint32_t pd);

  // Memory regions. `host` is where the bytes are; `iova` the address SGEs and peers use for
  // the first byte (ibv_reg_mr: iova == host; zero-based: iova 0).
  Expected<MrKeys> reg_mr(std::uint32_t pd, std::uint64_t host, std::uint64_t length, std::uint64_t iova,
                          std::uint32_t access);
  // Reregister Memory Region (IBTA vol. 1 s11.2.8.10): a new PD, translation or access for an
  // MR, which keeps its keys, so that peers holding the rkey go on using it. EBUSY while
  // windows are bound to it; a failure changes nothing.
  int rereg_mr(std::uint32_t lkey, const MrChange& change);
  int dereg_mr(std::uint32_t lkey);

  // Memory windows (s10.6.7): allocated unbound; type 1 bound by bind_mw(), type 2 by a
  // BIND_MW work request; both invalidated by LOCAL_INV or SEND_WITH_INV.
  Expected<std::uint32_t> alloc_mw(std::uint32_t pd, int type);  // returns the rkey
  int dealloc_mw(std::uint32_t rkey);
  // Type 1 (ibv_bind_mw); returns the new rkey. With `signal_wr_id` a successful bind also
  // completes on the QP's send CQ, as the signaled bind WR it stands for (s10.6.7.2).
  Expected<std::uint32_t> bind_mw(std::uint32_t qpn, std::uint32_t mw_rkey, std::uint32_t mr_lkey, std::uint64_t addr,
                                  std::uint64_t length, std::uint32_t access,
                                  std::optional<std::uint64_t> signal_wr_id = std::nullopt);

  // Completion queues.
  Expected<std::uint32_t> create_cq(std::uint32_t cqe);
  int destroy_cq(std::uint32_t cq);
  int resize_cq(std::uint32_t cq, std::uint32_t cqe);
  // Moves up to out.size() completions into `out`; returns how many, or -EINVAL.
  int poll_cq(std::uint32_t cq, std::span<Wc> out);
  int req_notify_cq(std::uint32_t cq, bool solicited_only);
  // The CQs that received a completion since the last call, each once, into `out` (replacing
  // its contents): a host that mirrors CQs elsewhere (the daemon's shared-memory rings) moves
  // only those instead of looking at every CQ.
  void take_completed_cqs(std::vector<std::uint32_t>& out);
  std::optional<std::uint32_t> next_cq_event();  // a CQ whose notification fired
  std::optional<AsyncEvent> next_async_event();

  // XRC domains (IBTA vol. 1 annex A14); EBUSY while XRC SRQs or targets are in one.
  Expected<std::uint32_t> alloc_xrcd();
  int dealloc_xrcd(std::uint32_t xrcd);

  // Shared receive queues; with `xrc`, an XRC SRQ of that domain, completing into that CQ, whose
  // handle is the SRQ number XRC initiators name.
  struct XrcSrq {
    std::uint32_t xrcd = 0;
    std::uint32_t cq = 0;
  };
  // With `tm`, a tag-matching SRQ (tag_matching.hpp) completing into that CQ: RC QPs only.
  struct TmSrq {
    std::uint32_t cq = 0;
    std::uint32_t max_num_tags = 0;
    std::uint32_t max_ops = 0;  // list operations outstanding at once; each completes when posted
  };
  Expected<std::uint32_t> create_srq(std::uint32_t pd, std::uint32_t max_wr, std::uint32_t max_sge, std::uint32_t limit,
                                     std::optional<XrcSrq> xrc = std::nullopt, std::optional<TmSrq> tm = std::nullopt);
  int modify_srq(std::uint32_t srq, std::uint32_t max_wr, std::uint32_t limit, bool set_max_wr, bool set_limit);
  int query_srq(std::uint32_t srq, std::uint32_t& max_wr, std::uint32_t& max_sge, std::uint32_t& limit) const;
  int destroy_srq(std::uint32_t srq);
  int post_srq_recv(std::uint32_t srq, const RecvWr& wr);
  // ibv_post_srq_ops on a tag-matching SRQ: adds (op.handle set), deletes or only reports the
  // unexpected count; completes on the SRQ's CQ when signaled. EINVAL for another SRQ or a bad
  // handle, ENOMEM when the list is full.
  int post_srq_ops(std::uint32_t srq, SrqOp& op);
  TmCaps tm_caps() const { return config_.iwarp ? TmCaps{} : config_.tm; }

  // Address handles (UD).
  Expected<std::uint32_t> create_ah(std::uint32_t pd, const AddressVector& av);
  int destroy_ah(std::uint32_t ah);

  // Queue pairs.
  Expected<QpCreated> create_qp(const QpInitAttr& attr);
  int modify_qp(Time now, std::uint32_t qpn, const QpAttr& attr, std::uint32_t mask);
  int query_qp(std::uint32_t qpn, QpAttr& attr, QpInitAttr& init) const;
  // An XRC target QP gives up one handle (open_qp); the last one destroys it.
  int destroy_qp(std::uint32_t qpn);
  // One more handle on the XRC target `qpn` of domain `xrcd` (ibv_open_qp); EINVAL if it is none.
  int open_qp(std::uint32_t xrcd, std::uint32_t qpn);
  int post_send(Time now, std::uint32_t qpn, const SendWr& wr);
  int post_recv(std::uint32_t qpn, const RecvWr& wr);
  // How many more WRs a queue takes before posting answers ENOMEM: a QP's send or receive
  // queue, or an SRQ; none for an unknown handle or the receive queue of a QP on an SRQ.
  enum class WorkQueue : std::uint8_t { send, recv, srq };
  std::optional<std::uint32_t> room(WorkQueue queue, std::uint32_t handle) const;

  // Multicast (IBTA vol. 1 s10.5; the verbs of s11.3): a UD QP attached to a multicast GID
  // receives a copy of every UD SEND to the multicast QPN that reaches the port for that
  // group. Attaching twice is one attachment; detaching a QP not attached is EINVAL.
  // EOPNOTSUPP when the device has no multicast (DeviceConfig::mcast all 0).
  int attach_mcast(std::uint32_t qpn, const Gid& mgid);
  int detach_mcast(std::uint32_t qpn, const Gid& mgid);
  // The groups the port now has to start or stop receiving, for the host to carry out on the
  // network in this order (a destroyed QP detaches too).
  std::optional<GroupChange> next_group_change() { return groups_.next_change(); }

  // iWARP (RFC 5040, 5041, 5044): an RC QP whose transport is a reliable byte stream the host
  // carries, a TCP connection after its MPA exchange (iwarp_transport.hpp). stream_attach moves
  // the QP from INIT or RTR to RTS on a stream with what the exchange settled; EINVAL for
  // another QP type or state.
  int stream_attach(std::uint32_t qpn, const StreamParams& params);
  // In-order bytes the peer sent on the QP's stream, in chunks of any size.
  void stream_receive(std::uint32_t qpn, std::span<const std::uint8_t> bytes);
  // How many bytes complete the FPDU the stream is in the middle of (0: at a boundary), so
  // that the host's next read can end there (MpaStreamDecoder::bytes_to_boundary).
  std::size_t stream_bytes_to_boundary(std::uint32_t qpn);
  // Appends the QP's next FPDU to `out`; false when it has none to send now. The host asks
  // again while it has room to write: a peer that reads slowly holds the WRs in the send
  // queue, not in buffers.
  bool stream_transmit(std::uint32_t qpn, UninitialisedBytes& out);
  // The connection ended under the QP (a reset, or the peer closed it): ERR, WRs flushed.
  void stream_lost(std::uint32_t qpn);
  // A QP that something touched since stream_transmit() last had nothing for it.
  std::optional<std::uint32_t> next_stream_ready();
  // A QP whose connection the host is to close once it has written what stream_transmit()
  // gave: after a Terminate, or when the QP entered ERR.
  std::optional<std::uint32_t> next_stream_close();

  // The network side.
  void receive(Time now, const RxPacket& packet);
  // The next packet to send, if any: ACKs and responses first, then requests.
  std::optional<TxPacket> transmit(Time now);
  // Whether transmit() may have a packet: false means it has none. Cheap, for a host that
  // decides whether to come back for packets later.
  bool may_transmit() const {
    return cm_.has_mad_to_send() || !control_.empty() || !answer_ready_.empty() || !request_ready_.empty();
  }
  // Gives a sent packet's buffer back for the next packet to reuse: the per-packet path then
  // neither allocates nor zero-fills (every byte of a packet is written when it is built).
  void recycle(TxPacket&& sent);
  // Fires the timers due at `now` (retransmission, RNR wait).
  void advance(Time now);
  std::optional<Time> next_deadline() const;

  // The communication manager of port 1, on QP1 (connection_manager.hpp): consumers call it
  // directly; its MADs leave through transmit() and its timers run in advance().
  ConnectionManager& cm() { return cm_; }
  std::optional<CmEvent> next_cm_event() { return cm_.next_event(); }

  // The device's counters; `qps` sums every QP's, live or destroyed.
  DeviceCounters counters() const;
  // The iWARP connections' and streams' counters (IwarpConnectionManager and the iWARP
  // transport count them here); zero on a RoCE device.
  const IwarpCounters& iwarp_counters() const { return iwarp_counters_; }
  IwarpCounters& iwarp_counters() { return iwarp_counters_; }
  // Fault injection (SOFTRDMA_FAULTS "rnr=K"): the next `count` RC requests that need a
  // receive WQE are answered with an RNR NAK as if the receive queue were empty (s9.7.5.1.5).
  void force_rnr(std::uint32_t count) { forced_rnr_ = count; }
  // Every live QP's counters, state and peer, in QPN order.
  std::vector<QpStats> qp_stats() const;
  const Qp* qp(std::uint32_t qpn) const;

  // Engine internals, shared by the requester, responder and completer (transport.hpp).
  // Not part of the verbs API: hosts and the shim use only what is above.
 public:
  Qp* find_qp(std::uint32_t qpn);
  Region* find_region(std::uint32_t key);
  // The region in table slot `index` (a key without its low byte), whatever key byte it now
  // carries: how a window names its MR, and BIND_MW its window.
  Region* region_at(std::uint32_t index) { return regions_.find(index); }
  Srq* find_srq(std::uint32_t srq) { return srqs_.find(srq); }
  Memory& memory() { return memory_; }
  // A packet the responder could not take (wrong state or Q_Key, no receive WQE for UD or UC).
  void count_dropped() { ++counters_.dropped; }
  // Whether force_rnr() makes this request find the receive queue empty; uses up one if so.
  bool take_forced_rnr() {
    if (forced_rnr_ == 0) return false;
    --forced_rnr_;
    return true;
  }
  // A packet to send ahead of every QP's: the NAK of a QP that enters the error state before
  // transmit() could ask its responder for it.
  void send_control(TxPacket&& p) { control_.push_back(std::move(p)); }
  // The host address of [iova, iova + length) under `key`, if the region is valid, belongs
  // to `pd`, allows `access` and holds the range; else nullopt.
  std::optional<std::uint64_t> translate(std::uint32_t key, std::uint32_t pd, std::uint64_t iova, std::uint64_t length,
                                         std::uint32_t access, std::uint32_t qpn);
  // LOCAL_INV and Send with Invalidate (s10.6.5, s9.4.1.1.1): the MR or type 2 MW of `key` in
  // `pd` becomes unusable until registered or bound again; false if there is no such region
  // (a type 1 MW cannot be invalidated).
  bool invalidate(std::uint32_t pd, std::uint32_t key);
  // Copies between an SGE list and a buffer, `offset` bytes into the list; false on a key
  // or bounds failure. An unpinned buffer (a datagram's receive buffer, which a peer can reach
  // until the QP is destroyed, also after the application unmapped it) is reached as an
  // on-demand region is (Memory::on_demand), so that unmapped memory fails the copy.
  enum class Pinning { pinned, unpinned };
  bool gather(const std::vector<Sge>& sges, std::uint32_t pd, std::uint64_t offset, std::span<std::uint8_t> out);
  bool scatter(const std::vector<Sge>& sges, std::uint32_t pd, std::uint64_t offset, std::span<const std::uint8_t> in,
               Pinning pinning = Pinning::pinned);

  void complete(std::uint32_t cq, const Wc& wc, bool solicited);
  void raise(AsyncEventType type, std::uint32_t element);
  // Moves the QP to ERR and flushes every outstanding WR (s10.3.1, s11.4.1.1.2).
  void enter_error(Qp& qp);
  // A send WR failed: RC QPs go to ERR, UC and UD QPs to SQE (s10.3.1).
  void enter_send_error(Qp& qp);
  // The stream of an iWARP QP sends nothing more; the host is told to close it.
  void close_stream(Qp& qp);
  void flush(Qp& qp);                                            // both queues
  void forget_completions(std::uint32_t cq, std::uint32_t qpn);  // drops the QP's entries from the CQ
  void flush_send(Qp& qp);
  // Something touched `qp` (a verb, a packet for it, its timer): transmit() asks its responder
  // and requester for packets again. Their answers depend only on the QP's own state, so a QP
  // that had nothing to send and was not touched since still has nothing.
  void wake(Qp& qp);
  // A packet for `qp` along `av` (the QP's own, or a UD WR's AH), ICRC filled in by finish().
  // Its buffer may be a recycled one, of any size and content: the builder resizes it and
  // writes every byte.
  TxPacket packet_to(const Qp& qp, const AddressVector& av);
  void finish(TxPacket& p) const;
  // How a received packet's ICRC verified: as sent with IPv4 ID 0 (softrdma peers), only
  // with some other ID solved for (rxe, NICs: wire/icrc_ipv4_id.hpp), or not at all.
  enum class IcrcVerdict : std::uint8_t { ok, ok_with_solved_ipv4_id, bad };
  IcrcVerdict check_icrc(const RxPacket& rx, const wire::IbPacket& p) const;
  // QP1 (gsi.cpp): a received packet for it, and the next MAD the CM has to send.
  void receive_gsi(Time now, const RxPacket& rx, const wire::IbPacket& p);
  // A packet for the multicast QPN: to every QP attached to its group (rx.dst_gid).
  void receive_multicast(const RxPacket& rx, const wire::IbPacket& p);
  std::optional<TxPacket> next_gsi_packet();
  // The UDP source port of QP1's packets when the host has no single one.
  static constexpr std::uint16_t kGsiUdpSourcePort = 0xC001;

 private:
  bool objects_exist(const QpInitAttr& a);
  static QpInitAttr normalised(const QpInitAttr& a);
  ReceiveTarget target_of(const QpInitAttr& init);
  void count_users(const QpInitAttr& init, int delta);

  DeviceConfig config_;
  // The latest time a call gave the device: completions carry it as their timestamp. A
  // completion made by a call that takes no time (a flush at post_recv) carries the last.
  Time clock_ = 0;
  void observe(Time now) { clock_ = std::max(clock_, now); }
  Memory& memory_;
  HandleTable<Pd> pds_;
  HandleTable<Region> regions_;
  HandleTable<Cq> cqs_;
  HandleTable<Srq> srqs_;
  HandleTable<Xrcd> xrcds_;
  HandleTable<Ah> ahs_;
  HandleTable<std::unique_ptr<Qp>> qps_;  // handle = qpn - first_qpn + 1
  std::uint8_t next_key_ = 0;             // varies the low byte of new keys
  std::deque<std::uint32_t> cq_events_;
  std::vector<std::uint32_t> completed_cqs_;  // for take_completed_cqs()
  std::deque<AsyncEvent> async_events_;
  std::deque<TxPacket> control_;                          // ACKs, NAKs, atomic ACKs, ready to go
  std::vector<std::vector<std::uint8_t>> spare_buffers_;  // recycle()d, for packet_to()
  // QPNs to ask for packets, in round-robin order (wake()); a QP that sends goes to the back.
  std::deque<std::uint32_t> answer_ready_;
  std::deque<std::uint32_t> request_ready_;
  std::deque<std::uint32_t> stream_ready_;   // iWARP QPs to ask for FPDUs (wake())
  std::deque<std::uint32_t> stream_closes_;  // next_stream_close()
  DeviceCounters counters_;                  // qps: the destroyed QPs' sum only (counters() adds the live ones)
  IwarpCounters iwarp_counters_;
  std::uint32_t forced_rnr_ = 0;  // force_rnr(): RNR NAKs still to force
  ConnectionManager cm_;
  std::uint32_t gsi_psn_ = 0;  // QP1's next PSN
  MulticastGroups groups_;
};

}  // namespace softrdma::core
