#include "emulator/net/roce_encapsulation.hpp"

#include "wire/inet_checksum.hpp"
#include "wire/ipv4.hpp"
#include "wire/ipv6.hpp"
#include "wire/udp.hpp"

namespace softrdma::net {

std::size_t roce_headers_length(const wire::EthernetRepr& eth, const core::Endpoints& route) {
  const std::size_t ip_len = core::is_ipv4_mapped(route.dst) ? wire::Ipv4::min_length : wire::Ipv6::length;
  return eth.header_length() + ip_len + wire::Udp::length;
}

void write_roce_headers(const wire::EthernetRepr& eth, const core::Endpoints& route, std::uint16_t dst_port,
                        std::span<const std::uint8_t> payload, std::uint8_t* out) {
  const bool v4 = core::is_ipv4_mapped(route.dst);
  const std::size_t udp_len = wire::Udp::length + payload.size();
  eth.emit(out, v4 ? wire::ethertype::ipv4 : wire::ethertype::ipv6);
  std::uint8_t* ip = out + eth.header_length();
  std::uint8_t* udp = ip + core::write_ip_header(route, udp_len, ip);
  wire::Udp::src_port::set(udp, route.src_port);
  wire::Udp::dst_port::set(udp, dst_port);
  wire::Udp::total_length::set(udp, udp_len);
  wire::Udp::checksum::set(udp, 0);
  if (!v4) {
    const std::uint32_t pseudo =
        wire::pseudo_header_sum({ip + wire::Ipv6::src_offset, 16}, {ip + wire::Ipv6::dst_offset, 16},
                                wire::ip_proto::udp, static_cast<std::uint32_t>(udp_len));
    const std::uint32_t sum = wire::inet_sum(payload, wire::inet_sum({udp, wire::Udp::length}, pseudo));
    const std::uint16_t folded = wire::inet_fold(sum);
    wire::Udp::checksum::set(udp, folded == 0 ? 0xFFFF : folded);  // 0 would mean "none" (RFC 768)
  }
}

}  // namespace softrdma::net
