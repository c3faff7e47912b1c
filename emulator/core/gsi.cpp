// QP1, the General Services Interface (IBTA vol. 1 s13.4.8 and s13.5): on RoCE it carries
// the communication manager's MADs (chapter 12) in UD SEND-only packets from and to QP1 with
// the GSI's well-known Q_Key.
#include "emulator/core/device.hpp"
#include "emulator/core/transport.hpp"
#include "wire/cm_mad.hpp"

namespace softrdma::core {
namespace {

const wire::Opcode kUdSendOnly = wire::opcode(wire::Transport::ud, wire::Operation::send_only);

}  // namespace

void Device::receive_gsi(Time now, const RxPacket& rx, const wire::IbPacket& p) {
  // QP1 takes only UD SENDs carrying its Q_Key (s13.4.8.1); anything else is dropped.
  if (p.opcode() != kUdSendOnly || wire::Deth::qkey::get(p.ext(wire::Ext::deth)) != wire::kGsiQkey) {
    ++counters_.dropped;
    return;
  }
  const auto mad = wire::parse_cm_mad(p.payload());
  if (!mad) {
    cm_.note_malformed();
    return;
  }
  cm_.receive(now, rx.src_gid, *mad);
}

std::optional<TxPacket> Device::next_gsi_packet() {
  std::optional<OutgoingMad> out = cm_.next_mad();
  if (!out) return std::nullopt;
  wire::IbRepr h;
  h.opcode = kUdSendOnly;
  h.dest_qp = wire::kGsiQpn;
  h.psn = gsi_psn_;
  gsi_psn_ = (gsi_psn_ + 1) & 0xFFFFFF;
  h.qkey = wire::kGsiQkey;
  h.src_qp = wire::kGsiQpn;
  TxPacket p;
  p.route.src = config_.gids.empty() ? Gid{} : config_.gids.front();
  p.route.dst = out->to;
  p.route.src_port = config_.udp_source_port.value_or(kGsiUdpSourcePort);
  const std::size_t header = wire::info(h.opcode).header_length;
  p.bytes.resize(header + wire::kMadLength + wire::kIcrcLength);
  h.emit_headers(p.bytes.data(), wire::kMadLength);
  wire::emit_cm_mad(out->mad, std::span<std::uint8_t, wire::kMadLength>(p.bytes.data() + header, wire::kMadLength));
  finish(p);
  return p;
}

}  // namespace softrdma::core
