// Ethernet II framing (IEEE 802.3 clause 3) with at most one 802.1Q tag, as RDMA captures
// carry them. RoCEv1 rides directly on Ethernet (ethertype 0x8915, IBTA vol. 1 annex A16);
// RoCEv2 on IPv4/IPv6 (annex A17).
#pragma once

#include <array>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "wire/error.hpp"
#include "wire/field.hpp"

namespace wire {

using MacAddress = std::array<std::uint8_t, 6>;

// "02:00:5e:10:00:01" (IEEE 802 canonical form, lower case); parse_mac takes either case.
inline std::string mac_text(const MacAddress& m) {
  char buf[18];
  std::snprintf(buf, sizeof buf, "%02x:%02x:%02x:%02x:%02x:%02x", m[0], m[1], m[2], m[3], m[4], m[5]);
  return buf;
}

inline std::optional<MacAddress> parse_mac(std::string_view text) {
  if (text.size() != 17) return std::nullopt;
  MacAddress m{};
  for (std::size_t i = 0; i < m.size(); ++i) {
    if (i != 0 && text[3 * i - 1] != ':') return std::nullopt;
    unsigned byte = 0;
    for (const char c : text.substr(3 * i, 2)) {
      const int digit = c >= '0' && c <= '9'   ? c - '0'
                        : c >= 'a' && c <= 'f' ? c - 'a' + 10
                        : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                               : -1;
      if (digit < 0) return std::nullopt;
      byte = byte * 16 + static_cast<unsigned>(digit);
    }
    m[i] = static_cast<std::uint8_t>(byte);
  }
  return m;
}

namespace ethertype {
inline constexpr std::uint16_t ipv4 = 0x0800;
inline constexpr std::uint16_t arp = 0x0806;
inline constexpr std::uint16_t vlan = 0x8100;
inline constexpr std::uint16_t ipv6 = 0x86DD;
inline constexpr std::uint16_t rocev1 = 0x8915;
}  // namespace ethertype

struct Ethernet {
  static constexpr std::size_t length = 14;
  static constexpr std::size_t vlan_tag_length = 4;
  using dst = Field<0, 6>;
  using src = Field<6, 6>;
  using type = Field<12, 2>;
  // Inside an 802.1Q tag, relative to the tag's first byte (the TPID 0x8100).
  using vlan_tci = Field<2, 2>;
  using vlan_inner_type = Field<4, 2>;
};

// A checked Ethernet header: `type()` is the ethertype after any VLAN tag, and `payload()`
// the bytes after the header.
class EthernetView {
 public:
  static Result<EthernetView> check(std::span<const std::uint8_t> frame) {
    if (frame.size() < Ethernet::length) return Error::truncated;
    std::size_t header = Ethernet::length;
    std::uint16_t type = Ethernet::type::get(frame.data());
    int vlan = -1;
    if (type == ethertype::vlan) {
      if (frame.size() < Ethernet::length + Ethernet::vlan_tag_length) return Error::truncated;
      const std::uint8_t* tag = frame.data() + 12;
      vlan = Ethernet::vlan_tci::get(tag);
      type = Ethernet::vlan_inner_type::get(tag);
      header += Ethernet::vlan_tag_length;
    }
    return EthernetView(frame, header, type, vlan);
  }

  MacAddress dst() const { return mac_at(0); }
  MacAddress src() const { return mac_at(6); }
  std::uint16_t type() const { return type_; }
  int vlan_tci() const { return vlan_; }  // the whole 802.1Q TCI (PCP, DEI, VID); -1 when untagged
  std::size_t header_length() const { return header_; }
  std::span<const std::uint8_t> payload() const { return frame_.subspan(header_); }

 private:
  EthernetView(std::span<const std::uint8_t> f, std::size_t h, std::uint16_t t, int v)
      : frame_(f), header_(h), type_(t), vlan_(v) {}
  MacAddress mac_at(std::size_t off) const {
    MacAddress m{};
    for (std::size_t i = 0; i < m.size(); ++i) m[i] = frame_[off + i];
    return m;
  }
  std::span<const std::uint8_t> frame_;
  std::size_t header_;
  std::uint16_t type_;
  int vlan_;
};

struct EthernetRepr {
  MacAddress dst{};
  MacAddress src{};
  int vlan_tci = -1;  // -1: untagged

  std::size_t header_length() const { return Ethernet::length + (vlan_tci >= 0 ? Ethernet::vlan_tag_length : 0); }
  // Writes header_length() bytes for a payload of ethertype `type`.
  void emit(std::uint8_t* out, std::uint16_t type) const {
    for (std::size_t i = 0; i < 6; ++i) {
      out[i] = dst[i];
      out[6 + i] = src[i];
    }
    if (vlan_tci >= 0) {
      Ethernet::type::set(out, ethertype::vlan);
      Ethernet::vlan_tci::set(out + 12, static_cast<std::uint16_t>(vlan_tci));
      Ethernet::vlan_inner_type::set(out + 12, type);
    } else {
      Ethernet::type::set(out, type);
    }
  }
  static EthernetRepr parse(const EthernetView& v) { return {v.dst(), v.src(), v.vlan_tci()}; }
  bool operator==(const EthernetRepr&) const = default;
};

}  // namespace wire
