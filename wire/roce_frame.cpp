#include "wire/roce_frame.hpp"

#include <algorithm>

#include "wire/ib_headers.hpp"
#include "wire/inet_checksum.hpp"

namespace wire {
namespace {

// The UDP checksum (RFC 768 / RFC 8200 s8.1) of `datagram`, whose checksum field reads 0.
std::uint16_t udp_checksum_of(std::span<const std::uint8_t> ip_header, std::span<const std::uint8_t> datagram) {
  const bool v4 = Ipv4::version::get(ip_header.data()) == 4;
  const std::size_t addr_len = v4 ? 4 : 16;
  const std::size_t src = v4 ? 12 : Ipv6::src_offset;
  const std::uint32_t pseudo =
      pseudo_header_sum(ip_header.subspan(src, addr_len), ip_header.subspan(src + addr_len, addr_len), ip_proto::udp,
                        static_cast<std::uint32_t>(datagram.size()));
  return inet_fold(inet_sum(datagram, pseudo));
}

template <typename A>
A read_address(const std::uint8_t* p) {
  A a{};
  std::copy_n(p, a.size(), a.begin());
  return a;
}

// The fields of a 40-byte IPv6 header or GRH.
Ipv6Repr ipv6_layout(const std::uint8_t* n) {
  Ipv6Repr ip;
  ip.src = read_address<Ipv6Address>(n + Ipv6::src_offset);
  ip.dst = read_address<Ipv6Address>(n + Ipv6::dst_offset);
  ip.traffic_class = static_cast<std::uint8_t>(Ipv6::traffic_class::get(n));
  ip.flow_label = Ipv6::flow_label::get(n);
  ip.hop_limit = Ipv6::hop_limit::get(n);
  return ip;
}

}  // namespace

Result<RoceLayers> RoceLayers::locate(std::span<const std::uint8_t> frame) {
  const auto eth = EthernetView::check(frame);
  if (!eth) return eth.error();
  const std::span<const std::uint8_t> l3 = eth->payload();

  switch (eth->type()) {
    case ethertype::rocev1: {
      if (l3.size() < Grh::length) return Error::truncated;
      if (Grh::ip_version::get(l3.data()) != 6) return Error::bad_version;
      if (Grh::next_header::get(l3.data()) != Grh::next_header_ib) return Error::not_roce;
      const std::size_t paylen = Grh::payload_length::get(l3.data());
      if (Grh::length + paylen > l3.size()) return Error::truncated;
      return RoceLayers{*eth, Encapsulation::rocev1, l3.first(Grh::length), {}, l3.subspan(Grh::length, paylen)};
    }
    case ethertype::ipv4: {
      const auto ip = Ipv4View::check(l3);
      if (!ip) return ip.error();
      if (ip->protocol() != ip_proto::udp) return Error::not_roce;
      // RoCEv2 packets are sent with DF and never fragmented (annex A17.4.3).
      if (ip->is_fragment()) return Error::fragmented;
      const auto udp = UdpView::check(ip->payload());
      if (!udp) return udp.error();
      if (udp->dst_port() != kRoceV2Port) return Error::not_roce;
      return RoceLayers{*eth, Encapsulation::rocev2_ipv4, ip->header(), udp->datagram().first(Udp::length),
                        udp->payload()};
    }
    case ethertype::ipv6: {
      const auto ip = Ipv6View::check(l3);
      if (!ip) return ip.error();
      if (ip->next_header() != ip_proto::udp) return Error::not_roce;
      const auto udp = UdpView::check(ip->payload());
      if (!udp) return udp.error();
      if (udp->dst_port() != kRoceV2Port) return Error::not_roce;
      return RoceLayers{*eth, Encapsulation::rocev2_ipv6, ip->header(), udp->datagram().first(Udp::length),
                        udp->payload()};
    }
    default:
      return Error::not_roce;
  }
}

Result<RoceFrame> RoceFrame::check(std::span<const std::uint8_t> frame) {
  const auto layers = RoceLayers::locate(frame);
  if (!layers) return layers.error();
  const auto ib = IbPacket::check(layers->ib);
  if (!ib) return ib.error();
  return RoceFrame(layers->ethernet, layers->encapsulation, layers->network, layers->udp, *ib);
}

std::uint32_t RoceFrame::computed_icrc() const {
  constexpr NetworkHeader kinds[] = {NetworkHeader::grh, NetworkHeader::ipv4, NetworkHeader::ipv6};
  return compute_icrc(kinds[static_cast<std::size_t>(encap_)], network_, udp_, ib_.covered());
}

std::size_t RoceFrameRepr::buffer_len() const {
  const std::size_t net = std::holds_alternative<Ipv4Repr>(network) ? Ipv4::min_length : Ipv6::length;
  const std::size_t udp = std::holds_alternative<GrhRepr>(network) ? 0 : Udp::length;
  return ethernet.header_length() + net + udp + ib.buffer_len();
}

std::size_t RoceFrameRepr::emit(std::uint8_t* out) const {
  const std::size_t ib_len = ib.buffer_len();
  const std::size_t udp_len = Udp::length + ib_len;
  std::uint8_t* net = out + ethernet.header_length();
  std::uint8_t* udp = nullptr;
  NetworkHeader kind = NetworkHeader::ipv4;
  std::size_t net_len = 0;

  if (const auto* v4 = std::get_if<Ipv4Repr>(&network)) {
    ethernet.emit(out, ethertype::ipv4);
    Ipv4Repr ip = *v4;
    ip.protocol = ip_proto::udp;
    ip.emit(net, udp_len);
    net_len = Ipv4::min_length;
  } else if (const auto* v6 = std::get_if<Ipv6Repr>(&network)) {
    ethernet.emit(out, ethertype::ipv6);
    Ipv6Repr ip = *v6;
    ip.next_header = ip_proto::udp;
    ip.emit(net, udp_len);
    kind = NetworkHeader::ipv6;
    net_len = Ipv6::length;
  } else {
    const auto& g = std::get<GrhRepr>(network);
    ethernet.emit(out, ethertype::rocev1);
    Ipv6Repr as_ipv6{g.sgid, g.dgid, Grh::next_header_ib, g.traffic_class, g.flow_label, g.hop_limit};
    as_ipv6.emit(net, ib_len);  // the GRH has the IPv6 layout (IBTA vol. 1 s8.3)
    kind = NetworkHeader::grh;
    net_len = Grh::length;
  }

  std::uint8_t* ib_out = net + net_len;
  if (kind != NetworkHeader::grh) {
    udp = net + net_len;
    Udp::src_port::set(udp, src_port);
    Udp::dst_port::set(udp, dst_port);
    Udp::total_length::set(udp, udp_len);
    Udp::checksum::set(udp, 0);
    ib_out = udp + Udp::length;
  }

  ib.emit(ib_out);
  const std::span<const std::uint8_t> covered{ib_out, ib_len - kIcrcLength};
  const std::span<const std::uint8_t> udp_span =
      udp ? std::span<const std::uint8_t>{udp, Udp::length} : std::span<const std::uint8_t>{};
  store_icrc(ib_out + ib_len - kIcrcLength, compute_icrc(kind, {net, net_len}, udp_span, covered));

  // The UDP checksum covers the ICRC, so it comes last. A computed zero is sent as 0xFFFF
  // (RFC 768).
  if (udp && udp_checksum == UdpChecksum::verbatim) {
    Udp::checksum::set(udp, udp_checksum_value);
  } else if (udp && (udp_checksum == UdpChecksum::computed || kind == NetworkHeader::ipv6)) {
    const std::uint16_t sum = udp_checksum_of({net, net_len}, {udp, udp_len});
    Udp::checksum::set(udp, sum == 0 ? 0xFFFF : sum);
  }
  return buffer_len();
}

RoceFrameRepr RoceFrameRepr::parse(const RoceFrame& f) {
  RoceFrameRepr r;
  r.ethernet = EthernetRepr::parse(f.ethernet());
  const std::uint8_t* n = f.network_header().data();
  switch (f.encapsulation()) {
    case Encapsulation::rocev2_ipv4: {
      Ipv4Repr ip;
      ip.src = read_address<Ipv4Address>(n + 12);
      ip.dst = read_address<Ipv4Address>(n + 16);
      ip.tos = Ipv4::tos::get(n);
      ip.ttl = Ipv4::ttl::get(n);
      ip.identification = Ipv4::identification::get(n);
      ip.dont_fragment = Ipv4::dont_fragment::get(n);
      r.network = ip;
      break;
    }
    case Encapsulation::rocev2_ipv6:
      r.network = ipv6_layout(n);
      break;
    case Encapsulation::rocev1: {
      const Ipv6Repr ip = ipv6_layout(n);  // the GRH has the IPv6 layout (IBTA vol. 1 s8.3)
      r.network = GrhRepr{ip.traffic_class, ip.flow_label, ip.hop_limit, ip.src, ip.dst};
      break;
    }
  }
  if (!f.udp_header().empty()) {
    const std::uint8_t* u = f.udp_header().data();
    r.src_port = Udp::src_port::get(u);
    r.dst_port = Udp::dst_port::get(u);
    // A checksum over the datagram including its own field folds to zero when right.
    const std::size_t udp_len = Udp::total_length::get(u);
    const std::uint16_t wire_sum = Udp::checksum::get(u);
    if (wire_sum == 0) {
      r.udp_checksum = UdpChecksum::zero;
    } else if (udp_checksum_of(f.network_header(), {u, udp_len}) == 0) {
      r.udp_checksum = UdpChecksum::computed;
    } else {
      r.udp_checksum = UdpChecksum::verbatim;
      r.udp_checksum_value = wire_sum;
    }
  }
  r.ib = IbRepr::parse(f.ib());
  return r;
}

}  // namespace wire
