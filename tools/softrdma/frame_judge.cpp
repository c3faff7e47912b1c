#include "tools/softrdma/frame_judge.hpp"

#include <algorithm>
#include <vector>

namespace softrdma::dump {
namespace {

// True when the network header says the packet is longer than the bytes the file holds: the
// capture cut it (snaplen), even where the record header was rewritten to hide that.
bool cut_by_capture(const net::CapturedPacket& pkt) {
  if (pkt.truncated()) return true;
  const auto eth = wire::EthernetView::check(pkt.data);
  if (!eth) return false;
  const auto l3 = eth->payload();
  std::size_t declared = 0;
  switch (eth->type()) {
    case wire::ethertype::ipv4:
      if (l3.size() < wire::Ipv4::min_length) return false;
      declared = wire::Ipv4::total_length::get(l3.data());
      break;
    case wire::ethertype::ipv6:
      if (l3.size() < wire::Ipv6::length) return false;
      declared = wire::Ipv6::length + wire::Ipv6::payload_length::get(l3.data());
      break;
    case wire::ethertype::rocev1:
      if (l3.size() < wire::Grh::length) return false;
      declared = wire::Grh::length + wire::Grh::payload_length::get(l3.data());
      break;
    default: return false;
  }
  return declared > l3.size();
}

}  // namespace

RoceJudgement judge_roce(const net::CapturedPacket& pkt) {
  RoceJudgement j;
  const auto frame = wire::RoceFrame::check(pkt.data);
  if (!frame) {
    j.error = frame.error();
    if (j.error == wire::Error::not_roce)
      j.kind = FrameKind::other;
    else
      j.kind = cut_by_capture(pkt) ? FrameKind::truncated : FrameKind::malformed;
    const auto layers = wire::RoceLayers::locate(pkt.data);
    if (j.kind == FrameKind::malformed && layers && !layers->ib.empty()) j.claimed_opcode = layers->ib[0];
    return j;
  }
  j.kind = FrameKind::roce;
  j.frame = *frame;
  j.icrc_ok = frame->icrc_ok();

  const auto repr = wire::RoceFrameRepr::parse(*frame);
  std::vector<std::uint8_t> rebuilt(repr.buffer_len());
  repr.emit(rebuilt.data());
  // Bytes past the IP datagram (Ethernet padding, an FCS) are not part of the packet.
  if (rebuilt.size() <= pkt.data.size()) {
    const std::size_t icrc_at = rebuilt.size() - wire::kIcrcLength;
    j.headers_reemit_identical = std::equal(rebuilt.begin(), rebuilt.begin() + static_cast<std::ptrdiff_t>(icrc_at), pkt.data.begin());
    j.reemit_identical = j.headers_reemit_identical &&
                         std::equal(rebuilt.begin() + static_cast<std::ptrdiff_t>(icrc_at), rebuilt.end(), pkt.data.begin() + static_cast<std::ptrdiff_t>(icrc_at));
  }
  return j;
}

}  // namespace softrdma::dump
