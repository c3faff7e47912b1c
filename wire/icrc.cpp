#include "wire/icrc.hpp"

#include <algorithm>
#include <array>
#include <cstring>

#include "wire/crc32.hpp"
#include "wire/ib_headers.hpp"
#include "wire/ipv4.hpp"
#include "wire/ipv6.hpp"
#include "wire/udp.hpp"

namespace wire {

std::uint32_t compute_icrc(NetworkHeader kind, std::span<const std::uint8_t> network, std::span<const std::uint8_t> udp,
                           std::span<const std::uint8_t> covered) {
  // The masked prefix: 8 bytes of LRH stand-in, up to 60 bytes of IPv4 header, 8 of UDP and
  // the 12-byte BTH. The rest of the packet is hashed in place.
  std::array<std::uint8_t, 8 + 60 + Udp::length + Bth::length> buf;
  std::size_t n = 0;
  std::fill_n(buf.begin(), 8, 0xFF);
  n += 8;

  std::uint8_t* net = buf.data() + n;
  std::memcpy(net, network.data(), network.size());
  n += network.size();
  if (kind == NetworkHeader::ipv4) {
    Ipv4::tos::set(net, 0xFF);
    Ipv4::ttl::set(net, 0xFF);
    Ipv4::checksum::set(net, 0xFFFF);
  } else {  // IPv6 and the GRH share this layout (IBTA vol. 1 s8.3)
    Ipv6::traffic_class::set(net, 0xFF);
    Ipv6::flow_label::set(net, 0xFFFFF);
    Ipv6::hop_limit::set(net, 0xFF);
  }

  if (!udp.empty()) {
    std::memcpy(buf.data() + n, udp.data(), Udp::length);
    Udp::checksum::set(buf.data() + n, 0xFFFF);
    n += Udp::length;
  }

  std::memcpy(buf.data() + n, covered.data(), Bth::length);
  Bth::variant_byte::set(buf.data() + n, 0xFF);
  n += Bth::length;

  const std::uint32_t head = crc32({buf.data(), n});
  return crc32(covered.subspan(Bth::length), head);
}

}  // namespace wire
