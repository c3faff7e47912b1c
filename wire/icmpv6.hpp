// ICMPv6 (RFC 4443) as far as IPv6 neighbour discovery over Ethernet uses it: the Neighbor
// Solicitation and Neighbor Advertisement messages (RFC 4861 s4.3, s4.4), their link-layer
// address options (s4.6.1, RFC 2464 s6) and the multicast addresses they travel to.
//
// NdRepr::parse() applies every validity check of RFC 4861 s7.1.1 (NS) and s7.1.2 (NA) that
// the packet alone decides; what the receiver's own addresses decide is the caller's.
#pragma once

#include <cstdint>
#include <optional>
#include <span>

#include "wire/error.hpp"
#include "wire/ethernet.hpp"
#include "wire/field.hpp"
#include "wire/inet_checksum.hpp"
#include "wire/ipv4.hpp"
#include "wire/ipv6.hpp"

namespace wire {

namespace icmpv6_type {
inline constexpr std::uint8_t neighbor_solicitation = 135;
inline constexpr std::uint8_t neighbor_advertisement = 136;
}  // namespace icmpv6_type

// The header every ICMPv6 message starts with (RFC 4443 s2.1).
struct Icmpv6 {
  static constexpr std::size_t length = 4;
  using type = Field<0, 1>;
  using code = Field<1, 1>;
  using checksum = Field<2, 2>;
};

// NS and NA share one layout: the ICMPv6 header, 4 bytes that are reserved in an NS and start
// with the R, S and O flags in an NA, the 16-byte target address, then options.
struct NeighborMessage {
  static constexpr std::size_t length = 24;
  using router = Flag<4, 0x80>;
  using solicited = Flag<4, 0x40>;
  using override_flag = Flag<4, 0x20>;
  static constexpr std::size_t target_offset = 8;
  static constexpr std::uint8_t hop_limit = 255;  // sent with it, and refused without it (s7.1)
};

// An option (RFC 4861 s4.6): type, length in units of 8 bytes (0 is invalid), data. An
// Ethernet link-layer address option is one unit: type, length 1, the MAC (RFC 2464 s6).
struct NdOption {
  static constexpr std::size_t unit = 8;
  using type = Field<0, 1>;
  using length = Field<1, 1>;
  static constexpr std::size_t mac_offset = 2;
  static constexpr std::uint8_t source_link_layer = 1, target_link_layer = 2;
};

constexpr bool is_multicast(const Ipv6Address& a) { return a[0] == 0xff; }  // RFC 4291 s2.7

constexpr bool is_unspecified(const Ipv6Address& a) {
  for (const std::uint8_t b : a)
    if (b != 0) return false;
  return true;
}

// ff02::1, every node on the link (RFC 4291 s2.7.1).
inline constexpr Ipv6Address kAllNodes{0xff, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};

// ff02::1:ffXX:XXXX, the solicited-node group of `a`: its low 24 bits (RFC 4291 s2.7.1).
constexpr Ipv6Address solicited_node(const Ipv6Address& a) {
  return {0xff, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x01, 0xff, a[13], a[14], a[15]};
}

// The Ethernet address of an IPv6 multicast group: 33:33 and the group's low 32 bits (RFC
// 2464 s7).
constexpr MacAddress multicast_mac(const Ipv6Address& group) {
  return {0x33, 0x33, group[12], group[13], group[14], group[15]};
}

// The ICMPv6 checksum of `message` (RFC 4443 s2.3): over the IPv6 pseudo-header (RFC 8200
// s8.1) and the message with its checksum field as it is. A message whose field holds the
// right checksum yields 0; one whose field reads 0 yields the value to put there.
constexpr std::uint16_t icmpv6_checksum(const Ipv6Address& src, const Ipv6Address& dst,
                                        std::span<const std::uint8_t> message) {
  const std::uint32_t pseudo =
      pseudo_header_sum(src, dst, ip_proto::icmpv6, static_cast<std::uint32_t>(message.size()));
  return inet_fold(inet_sum(message, pseudo));
}

// A Neighbor Solicitation or Advertisement, as values. `link_layer` is the one option ND over
// Ethernet needs: the Source Link-Layer Address of an NS, the Target Link-Layer Address of an
// NA. Other options are skipped on parse (s4.6: unknown options are ignored) and never emitted.
struct NdRepr {
  std::uint8_t type = icmpv6_type::neighbor_solicitation;
  bool router = false;  // NA flags (s4.4)
  bool solicited = false;
  bool override_flag = false;
  Ipv6Address target{};
  std::optional<MacAddress> link_layer;

  // `ip` must be a whole IPv6 packet. unknown_opcode: not ICMPv6 (no extension headers are
  // followed), or another ICMPv6 message. Then s7.1.1/s7.1.2: invalid_field for a hop limit
  // other than 255, a code other than 0, a multicast source or target, an NS from :: not to a
  // solicited-node group or with a source address option, an NA with S set to a multicast
  // destination; bad_checksum; truncated for a message under 24 bytes or an option that runs
  // past the end; bad_length for an option of length 0.
  static Result<NdRepr> parse(const Ipv6View& ip) {
    const std::span<const std::uint8_t> m = ip.payload();
    if (ip.next_header() != ip_proto::icmpv6 || m.empty()) return Error::unknown_opcode;
    const std::uint8_t type = Icmpv6::type::get(m.data());
    if (type != icmpv6_type::neighbor_solicitation && type != icmpv6_type::neighbor_advertisement)
      return Error::unknown_opcode;
    if (Ipv6::hop_limit::get(ip.data()) != NeighborMessage::hop_limit) return Error::invalid_field;
    if (m.size() < NeighborMessage::length) return Error::truncated;
    if (icmpv6_checksum(ip.src(), ip.dst(), m) != 0) return Error::bad_checksum;
    if (Icmpv6::code::get(m.data()) != 0) return Error::invalid_field;
    // RFC 4291 s2.7: no packet comes from a multicast address (an answer to one would go to
    // a group, marked solicited, which s7.1.2 forbids; the fuzzer found that answer).
    if (is_multicast(ip.src())) return Error::invalid_field;

    NdRepr r;
    r.type = type;
    for (std::size_t i = 0; i < 16; ++i) r.target[i] = m[NeighborMessage::target_offset + i];
    if (is_multicast(r.target)) return Error::invalid_field;
    const bool ns = type == icmpv6_type::neighbor_solicitation;
    if (!ns) {
      r.router = NeighborMessage::router::get(m.data());
      r.solicited = NeighborMessage::solicited::get(m.data());
      r.override_flag = NeighborMessage::override_flag::get(m.data());
    }
    const std::uint8_t wanted = ns ? NdOption::source_link_layer : NdOption::target_link_layer;
    for (std::size_t at = NeighborMessage::length; at < m.size();) {
      if (m.size() - at < 2) return Error::truncated;
      const std::size_t bytes = NdOption::length::get(m.data() + at) * NdOption::unit;
      if (bytes == 0) return Error::bad_length;
      if (bytes > m.size() - at) return Error::truncated;
      if (NdOption::type::get(m.data() + at) == wanted && !r.link_layer) {
        MacAddress mac{};
        for (std::size_t i = 0; i < mac.size(); ++i) mac[i] = m[at + NdOption::mac_offset + i];
        r.link_layer = mac;
      }
      at += bytes;
    }
    // s7.1.1: duplicate address detection sends from :: to the target's solicited-node group,
    // and has no address of its own to give.
    if (ns && is_unspecified(ip.src()) && (ip.dst() != solicited_node(r.target) || r.link_layer))
      return Error::invalid_field;
    // s7.1.2: only an answer to one solicitor may say it was solicited.
    if (!ns && r.solicited && is_multicast(ip.dst())) return Error::invalid_field;
    return r;
  }

  std::size_t buffer_len() const { return NeighborMessage::length + (link_layer ? NdOption::unit : 0); }

  // Writes buffer_len() bytes, the checksum computed for a packet from `src` to `dst`.
  void emit(const Ipv6Address& src, const Ipv6Address& dst, std::uint8_t* out) const {
    for (std::size_t i = 0; i < buffer_len(); ++i) out[i] = 0;
    Icmpv6::type::set(out, type);
    if (type == icmpv6_type::neighbor_advertisement) {
      NeighborMessage::router::set(out, router);
      NeighborMessage::solicited::set(out, solicited);
      NeighborMessage::override_flag::set(out, override_flag);
    }
    for (std::size_t i = 0; i < 16; ++i) out[NeighborMessage::target_offset + i] = target[i];
    if (link_layer) {
      std::uint8_t* option = out + NeighborMessage::length;
      NdOption::type::set(option, type == icmpv6_type::neighbor_solicitation ? NdOption::source_link_layer
                                                                             : NdOption::target_link_layer);
      NdOption::length::set(option, 1);
      for (std::size_t i = 0; i < link_layer->size(); ++i) option[NdOption::mac_offset + i] = (*link_layer)[i];
    }
    Icmpv6::checksum::set(out, icmpv6_checksum(src, dst, {out, buffer_len()}));
  }

  friend bool operator==(const NdRepr&, const NdRepr&) = default;
};

}  // namespace wire
