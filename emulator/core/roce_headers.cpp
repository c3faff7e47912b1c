#include "emulator/core/roce_headers.hpp"

#include <algorithm>
#include <cstring>

#include "wire/ib_packet.hpp"
#include "wire/icrc.hpp"
#include "wire/ipv4.hpp"
#include "wire/ipv6.hpp"
#include "wire/udp.hpp"

namespace softrdma::core {
namespace {

wire::Ipv4Repr ipv4_of(const Endpoints& e) {
  wire::Ipv4Repr ip;
  std::copy_n(e.src.begin() + 12, 4, ip.src.begin());
  std::copy_n(e.dst.begin() + 12, 4, ip.dst.begin());
  ip.tos = e.traffic_class;
  ip.ttl = e.hop_limit;
  ip.identification = e.ipv4_id;
  ip.dont_fragment = true;
  return ip;
}

wire::Ipv6Repr ipv6_of(const Endpoints& e) {
  wire::Ipv6Repr ip;
  ip.src = e.src;
  ip.dst = e.dst;
  ip.traffic_class = e.traffic_class;
  ip.flow_label = e.flow_label;
  ip.hop_limit = e.hop_limit;
  return ip;
}

}  // namespace

std::uint32_t icrc_between(const Endpoints& e, std::span<const std::uint8_t> covered) {
  const std::size_t udp_len = wire::Udp::length + covered.size() + wire::kIcrcLength;
  std::uint8_t udp[wire::Udp::length] = {};
  wire::Udp::src_port::set(udp, e.src_port);
  wire::Udp::dst_port::set(udp, wire::kRoceV2Port);
  wire::Udp::total_length::set(udp, udp_len);
  wire::Udp::checksum::set(udp, 0);
  std::uint8_t net[wire::Ipv6::length] = {};
  if (is_ipv4_mapped(e.dst)) {
    ipv4_of(e).emit_without_checksum(net, udp_len);  // the ICRC masks the checksum
    return wire::compute_icrc(wire::NetworkHeader::ipv4, {net, wire::Ipv4::min_length}, udp, covered);
  }
  ipv6_of(e).emit(net, udp_len);
  return wire::compute_icrc(wire::NetworkHeader::ipv6, {net, wire::Ipv6::length}, udp, covered);
}

std::size_t write_ip_header(const Endpoints& e, std::size_t udp_len, std::uint8_t* out) {
  if (is_ipv4_mapped(e.dst)) {
    ipv4_of(e).emit(out, udp_len);
    return wire::Ipv4::min_length;
  }
  ipv6_of(e).emit(out, udp_len);
  return wire::Ipv6::length;
}

void write_grh(const Endpoints& e, std::size_t ib_length, std::uint8_t* out) {
  const std::size_t udp_len = wire::Udp::length + ib_length;
  std::memset(out, 0, 40);
  if (is_ipv4_mapped(e.src)) {
    ipv4_of(e).emit(out + 20, udp_len);
  } else {
    ipv6_of(e).emit(out, udp_len);
  }
}

}  // namespace softrdma::core
