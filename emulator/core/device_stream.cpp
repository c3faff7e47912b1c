// The Device's iWARP stream API (device.hpp): routes a QP's stream bytes to its iWARP
// receiver and asks its sender for FPDUs (iwarp_transport.hpp).
#include <algorithm>
#include <cerrno>

#include "emulator/core/device.hpp"
#include "emulator/core/iwarp_transport.hpp"

namespace softrdma::core {
namespace {

// The smallest FPDU that carries the largest header with payload (RFC 5044 s4; RFC 5041 s4.4).
constexpr std::uint32_t kMinFpdu = 64;

std::uint8_t clamp_reads(std::uint16_t n, std::uint32_t limit) {
  return static_cast<std::uint8_t>(std::min<std::uint32_t>({n, limit, 255}));
}

}  // namespace

int Device::stream_attach(std::uint32_t qpn, const StreamParams& params) {
  Qp* q = find_qp(qpn);
  if (!q || q->init.qp_type != QpType::rc || q->stream || params.max_fpdu < kMinFpdu) return EINVAL;
  if (q->state() != QpState::init && q->state() != QpState::rtr) return EINVAL;
  // RFC 6581 s5: the IRD and ORD the exchange settled are the QP's read limits.
  q->attr.max_rd_atomic = clamp_reads(params.ord, config_.limits.max_qp_init_rd_atom);
  q->attr.max_dest_rd_atomic = clamp_reads(params.ird, config_.limits.max_qp_rd_atom);
  StreamParams settled = params;
  settled.ord = q->attr.max_rd_atomic;
  settled.ird = q->attr.max_dest_rd_atomic;
  q->stream = std::make_unique<IwarpStream>(settled);
  q->attr.qp_state = QpState::rts;
  wake(*q);
  return 0;
}

void Device::stream_receive(std::uint32_t qpn, std::span<const std::uint8_t> bytes) {
  Qp* q = find_qp(qpn);
  if (!q || !q->stream) return;
  IwarpReceiver::on_bytes(*this, *q, bytes);
  wake(*q);
}

std::size_t Device::stream_bytes_to_boundary(std::uint32_t qpn) {
  const Qp* q = find_qp(qpn);
  return q && q->stream ? q->stream->decoder.bytes_to_boundary() : 0;
}

bool Device::stream_transmit(std::uint32_t qpn, UninitialisedBytes& out) {
  Qp* q = find_qp(qpn);
  return q && q->stream && IwarpSender::next(*this, *q, out);
}

void Device::stream_lost(std::uint32_t qpn) {
  Qp* q = find_qp(qpn);
  if (!q || !q->stream) return;
  q->stream->terminate.reset();  // nothing can be sent on it any more, a Terminate included
  if (q->state() != QpState::err) enter_error(*q);
  close_stream(*q);
}

std::optional<std::uint32_t> Device::next_stream_ready() {
  while (!stream_ready_.empty()) {
    const std::uint32_t qpn = stream_ready_.front();
    stream_ready_.pop_front();
    Qp* q = find_qp(qpn);
    if (!q || !q->stream_queued) continue;
    q->stream_queued = false;
    return qpn;
  }
  return std::nullopt;
}

std::optional<std::uint32_t> Device::next_stream_close() {
  if (stream_closes_.empty()) return std::nullopt;
  const std::uint32_t qpn = stream_closes_.front();
  stream_closes_.pop_front();
  return qpn;
}

}  // namespace softrdma::core
