// The network side of the engine: received packets are checked and routed to the responder
// or the completer; transmit() asks the engines for the next packet; time fires the timers.
#include <cerrno>

#include "emulator/core/psn.hpp"
#include "emulator/core/roce_headers.hpp"
#include "emulator/core/transport.hpp"
#include "wire/cm_mad.hpp"
#include "wire/icrc.hpp"
#include "wire/icrc_ipv4_id.hpp"
#include "wire/udp.hpp"

namespace softrdma::core {
namespace {

// P_Keys a port with only the default partition accepts: full and limited membership of the
// default partition (IBTA vol. 1 s10.9.1.2).
bool default_partition(std::uint16_t pkey) { return (pkey & 0x7FFF) == 0x7FFF; }

// Enough for the packets of a few transmit bursts in flight between the engine and the
// socket; recycled buffers beyond it are freed.
constexpr std::size_t kMaxSpareBuffers = 256;

}  // namespace

void Device::recycle(TxPacket&& sent) {
  if (sent.bytes.capacity() == 0 || spare_buffers_.size() >= kMaxSpareBuffers) return;
  spare_buffers_.push_back(std::move(sent.bytes));
}

TxPacket Device::packet_to(const Qp& q, const AddressVector& av) {
  TxPacket p;
  if (!spare_buffers_.empty()) {
    p.bytes = std::move(spare_buffers_.back());  // keeps its size: resizing to a packet of the same size writes nothing
    spare_buffers_.pop_back();
  }
  p.route.src = config_.gids.empty() ? Gid{} : config_.gids[av.sgid_index < config_.gids.size() ? av.sgid_index : 0];
  p.route.dst = av.dgid;
  p.route.src_port = q.udp_src_port;
  p.route.traffic_class = av.traffic_class;
  p.route.flow_label = av.flow_label;
  p.route.hop_limit = av.hop_limit;
  return p;
}

void Device::finish(TxPacket& p) const {
  if (config_.unsealed_loopback && !config_.gids.empty() && p.route.dst == config_.gids.front()) return;
  const std::span<const std::uint8_t> covered(p.bytes.data(), p.bytes.size() - wire::kIcrcLength);
  wire::store_icrc(p.bytes.data() + covered.size(), icrc_between(p.route, covered));
}

Device::IcrcVerdict Device::check_icrc(const RxPacket& rx, const wire::IbPacket& p) const {
  const Endpoints e{rx.src_gid, rx.dst_gid, rx.src_port, 0, 0, 64, rx.ipv4_id};
  const std::uint32_t syndrome = icrc_between(e, p.covered()) ^ p.icrc();
  if (syndrome == 0) return IcrcVerdict::ok;
  // Senders other than softrdma put non-zero IDs in the IPv4 header the ICRC covers (rxe
  // increments them), which a UDP socket does not show us: accept when one ID explains the
  // ICRC, a 16-bit check instead of 32 (docs/interop.md, "IPv4 IDs and the ICRC"), counted apart.
  if (!is_ipv4_mapped(rx.src_gid)) return IcrcVerdict::bad;
  const std::size_t trailing = wire::kIpv4BytesAfterIdentification + wire::Udp::length + p.covered().size();
  return wire::ipv4_identification_correction(syndrome, trailing) ? IcrcVerdict::ok_with_solved_ipv4_id
                                                                  : IcrcVerdict::bad;
}

void Device::receive(Time now, const RxPacket& rx) {
  observe(now);
  const auto checked = wire::IbPacket::check(rx.bytes);
  if (!checked) {
    ++counters_.malformed;
    return;
  }
  if (!rx.icrc_checked) {
    const IcrcVerdict icrc = check_icrc(rx, *checked);
    if (icrc == IcrcVerdict::bad) {
      ++counters_.icrc_err;  // dropped silently, as a NIC does (IBTA vol. 1 s9.6.1.1)
      return;
    }
    if (icrc == IcrcVerdict::ok_with_solved_ipv4_id) ++counters_.icrc_ipv4_id_solved;
  }
  const wire::IbPacket& p = *checked;
  if (p.dest_qp() == wire::kGsiQpn) {
    receive_gsi(now, rx, p);
    return;
  }
  if (p.dest_qp() == wire::kMulticastQpn) {
    receive_multicast(rx, p);
    return;
  }
  Qp* q = find_qp(p.dest_qp());
  if (!q) {
    ++counters_.unknown_qp;
    return;
  }
  if (!default_partition(wire::Bth::pkey::get(p.bth())) || p.info().transport != transport_of(q->init.qp_type)) {
    ++counters_.dropped;  // s9.6.1.1: a packet for another partition or transport is dropped
    return;
  }
  ++q->counters.rcvd_pkts;
  q->counters.rcvd_bytes += rx.bytes.size();
  if (p.info().is(wire::OpFlag::response)) {
    Completer::on_response(*this, *q, p, now);
  } else {
    Responder::on_request(*this, *q, p, rx);
  }
  wake(*q);
}

void Device::receive_multicast(const RxPacket& rx, const wire::IbPacket& p) {
  // Multicast is UD only (s10.5), to a group some QP here is attached to; the IP destination
  // is the group's address, and so its MGID.
  const std::vector<std::uint32_t>* members = groups_.members(rx.dst_gid);
  if (!members || p.info().transport != wire::Transport::ud || !default_partition(wire::Bth::pkey::get(p.bth()))) {
    ++counters_.mcast_dropped;
    return;
  }
  ++counters_.mcast_rcvd;
  // Each QP takes its own copy: its Q_Key, state and receive queue decide (on_ud).
  for (const std::uint32_t qpn : *members) {
    Qp& q = *find_qp(qpn);
    ++q.counters.rcvd_pkts;
    q.counters.rcvd_bytes += rx.bytes.size();
    Responder::on_request(*this, q, p, rx);
    wake(q);
  }
}

void Device::wake(Qp& q) {
  if (q.stream) {
    if (!q.stream_queued) stream_ready_.push_back(q.qpn);
    q.stream_queued = true;
    return;
  }
  if (!q.answer_queued) {
    q.answer_queued = true;
    answer_ready_.push_back(q.qpn);
  }
  if (!q.request_queued) {
    q.request_queued = true;
    request_ready_.push_back(q.qpn);
  }
}

std::optional<TxPacket> Device::transmit(Time now) {
  observe(now);
  if (auto mad = next_gsi_packet()) return mad;
  if (!control_.empty()) {
    TxPacket p = std::move(control_.front());
    control_.pop_front();
    return p;
  }
  // Answers first, so a busy requester cannot starve its peer's requests of ACKs; then
  // requests. A QP that sent goes to the back of its queue, so one long message does not hold
  // up the others; one that had nothing leaves it until wake() (so 256 idle QPs cost nothing).
  const auto serve = [this](std::deque<std::uint32_t>& ready, bool Qp::*queued,
                            const auto& next) -> std::optional<TxPacket> {
    while (!ready.empty()) {
      const std::uint32_t qpn = ready.front();
      ready.pop_front();
      Qp* q = find_qp(qpn);
      if (!q || !(q->*queued)) continue;  // sent from a later place in the queue already
      q->*queued = false;                 // a wake() while building (an error, say) queues it again itself
      std::optional<TxPacket> p = next(*q);
      if (p && !(q->*queued)) {
        q->*queued = true;
        ready.push_back(qpn);
      }
      if (p) return p;
    }
    return std::nullopt;
  };
  if (auto p = serve(answer_ready_, &Qp::answer_queued, [this](Qp& q) { return Responder::next(*this, q); })) return p;
  return serve(request_ready_, &Qp::request_queued, [this, now](Qp& q) { return Requester::next(*this, q, now); });
}

void Device::advance(Time now) {
  observe(now);
  const auto due = [now](Time t) { return t != 0 && now >= t; };
  qps_.for_each([&](std::uint32_t, std::unique_ptr<Qp>& q) {
    if (!due(q->retransmit_at) && !due(q->rnr_at)) return;
    Completer::on_timer(*this, *q, now);
    wake(*q);  // a resend, or the end of an RNR wait
  });
  cm_.advance(now);
}

std::optional<Time> Device::next_deadline() const {
  std::optional<Time> soonest;
  const auto consider = [&](Time t) {
    if (t != 0 && (!soonest || t < *soonest)) soonest = t;
  };
  const_cast<HandleTable<std::unique_ptr<Qp>>&>(qps_).for_each([&](std::uint32_t, std::unique_ptr<Qp>& q) {
    consider(q->retransmit_at);
    consider(q->rnr_at);
  });
  if (const auto cm = cm_.next_deadline()) consider(*cm);
  return soonest;
}

DeviceCounters Device::counters() const {
  DeviceCounters sum = counters_;
  sum.cm = cm_.counters();
  const_cast<HandleTable<std::unique_ptr<Qp>>&>(qps_).for_each(
      [&](std::uint32_t, std::unique_ptr<Qp>& q) { sum.qps += q->counters; });
  return sum;
}

std::vector<QpStats> Device::qp_stats() const {
  std::vector<QpStats> out;  // in QPN order, as the table's slots are (handle = qpn - first_qpn + 1)
  const_cast<HandleTable<std::unique_ptr<Qp>>&>(qps_).for_each([&](std::uint32_t, std::unique_ptr<Qp>& q) {
    const bool connected = q->init.qp_type != QpType::ud;
    out.push_back({q->qpn, q->init.qp_type, q->state(), connected ? q->attr.dest_qp_num : 0, q->counters});
  });
  return out;
}

Expected<std::uint32_t> Device::bind_mw(std::uint32_t qpn, std::uint32_t mw_rkey, std::uint32_t mr_lkey,
                                        std::uint64_t addr, std::uint64_t length, std::uint32_t acc,
                                        std::optional<std::uint64_t> signal_wr_id) {
  Qp* q = find_qp(qpn);
  const Region* mw = find_region(mw_rkey);
  if (!q || !mw || mw->kind != Region::Kind::mw_type1) return Expected<std::uint32_t>::error(EINVAL);
  SendWqe w;
  w.wr.opcode = WrOpcode::bind_mw;
  w.wr.mw_rkey = mw_rkey;
  w.wr.bind_new_rkey = (mw_rkey + 1) & 0xFF;
  w.wr.bind_mr_lkey = mr_lkey;
  w.wr.bind_addr = addr;
  w.wr.bind_length = length;
  w.wr.bind_access = acc;
  Requester::execute_local(*this, *q, w);
  if (w.status != WcStatus::success) return Expected<std::uint32_t>::error(EINVAL);
  if (signal_wr_id) {
    Wc wc;
    wc.wr_id = *signal_wr_id;
    wc.opcode = WcOpcode::bind_mw;
    wc.qp_num = q->qpn;
    complete(q->init.send_cq, wc, false);
  }
  return (mw_rkey & ~0xFFu) | w.wr.bind_new_rkey;
}

}  // namespace softrdma::core
