#include "tools/softrdma/frame_judge.hpp"

#include <algorithm>
#include <vector>

#include "wire/cm_mad.hpp"

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
    default:
      return false;
  }
  return declared > l3.size();
}

// CM attributes that IBTA defines (ch. 12.6: ClassPortInfo, LAP, APR) and that
// wire::parse_cm_mad() refuses as unsupported_attribute because it does not decode them.
bool undecoded_cm_attribute(std::uint16_t id) {
  const auto a = static_cast<wire::CmAttr>(id);
  return a == wire::CmAttr::class_port_info || a == wire::CmAttr::lap || a == wire::CmAttr::apr;
}

}  // namespace

bool is_gmp(const wire::IbPacket& p) {
  const std::uint8_t* deth = p.ext(wire::Ext::deth);
  if (!deth || wire::transport_of(p.opcode()) != wire::Transport::ud) return false;
  return p.dest_qp() == wire::kGsiQpn || wire::Deth::src_qp::get(deth) == wire::kGsiQpn;
}

std::optional<wire::Error> judge_gmp(const wire::IbPacket& p) {
  if (!is_gmp(p)) return std::nullopt;
  const std::uint8_t* deth = p.ext(wire::Ext::deth);
  if (p.dest_qp() == wire::kGsiQpn) {
    if (wire::Deth::qkey::get(deth) != wire::kGsiQkey) return wire::Error::bad_qkey;
    if (wire::Deth::src_qp::get(deth) != wire::kGsiQpn) return wire::Error::bad_source_qp;
  }
  const std::span<const std::uint8_t> mad = p.payload();
  if (mad.size() < wire::kMadLength) return wire::Error::truncated;
  if (mad.size() > wire::kMadLength) return wire::Error::bad_length;
  if (wire::Mad::base_version::get(mad.data()) != wire::kMadBaseVersion) return wire::Error::bad_version;
  if (wire::Mad::mgmt_class::get(mad.data()) != wire::kCmClass) return std::nullopt;
  const auto cm = wire::parse_cm_mad(mad);
  if (!cm) {
    if (cm.error() == wire::Error::unsupported_attribute &&
        undecoded_cm_attribute(wire::Mad::attribute_id::get(mad.data())))
      return std::nullopt;
    return cm.error();
  }
  // Annex A11: a REQ to an IP CM service ID opens its private data with the IP CM header.
  if (const auto* req = std::get_if<wire::CmReq>(&cm->message); req && wire::ip_cm_service(req->service_id)) {
    if (const auto h = wire::parse_ip_cm_header(req->private_data); !h) return h.error();
  }
  return std::nullopt;
}

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
  if (const auto mad_error = judge_gmp(frame->ib())) {
    j.kind = FrameKind::malformed;
    j.error = *mad_error;
    j.claimed_opcode = frame->ib().bth()[0];
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
    j.headers_reemit_identical =
        std::equal(rebuilt.begin(), rebuilt.begin() + static_cast<std::ptrdiff_t>(icrc_at), pkt.data.begin());
    j.reemit_identical =
        j.headers_reemit_identical && std::equal(rebuilt.begin() + static_cast<std::ptrdiff_t>(icrc_at), rebuilt.end(),
                                                 pkt.data.begin() + static_cast<std::ptrdiff_t>(icrc_at));
  }
  return j;
}

}  // namespace softrdma::dump
