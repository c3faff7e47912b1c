// IPv6 fixed header (RFC 8200 s3). Extension headers are not followed: RoCEv2 packets
// carry UDP directly after the fixed header.
#pragma once

#include <array>
#include <cstdint>
#include <span>

#include "wire/error.hpp"
#include "wire/field.hpp"

namespace wire {

using Ipv6Address = std::array<std::uint8_t, 16>;

struct Ipv6 {
  static constexpr std::size_t length = 40;
  using version = Field<0, 1, 0xF0>;
  using traffic_class = Field<0, 2, 0x0FF0>;
  using flow_label = Field<1, 3, 0x0FFFFF>;
  using payload_length = Field<4, 2>;
  using next_header = Field<6, 1>;
  using hop_limit = Field<7, 1>;
  static constexpr std::size_t src_offset = 8;
  static constexpr std::size_t dst_offset = 24;
};

class Ipv6View {
 public:
  static Result<Ipv6View> check(std::span<const std::uint8_t> bytes) {
    if (bytes.size() < Ipv6::length) return Error::truncated;
    if (Ipv6::version::get(bytes.data()) != 6) return Error::bad_version;
    const std::size_t total = Ipv6::length + Ipv6::payload_length::get(bytes.data());
    if (total > bytes.size()) return Error::truncated;
    return Ipv6View(bytes.first(total));
  }

  const std::uint8_t* data() const { return bytes_.data(); }
  std::span<const std::uint8_t> header() const { return bytes_.first(Ipv6::length); }
  std::span<const std::uint8_t> payload() const { return bytes_.subspan(Ipv6::length); }
  std::uint8_t next_header() const { return Ipv6::next_header::get(data()); }
  Ipv6Address src() const { return addr_at(Ipv6::src_offset); }
  Ipv6Address dst() const { return addr_at(Ipv6::dst_offset); }

 private:
  explicit Ipv6View(std::span<const std::uint8_t> b) : bytes_(b) {}
  Ipv6Address addr_at(std::size_t off) const {
    Ipv6Address a{};
    for (std::size_t i = 0; i < a.size(); ++i) a[i] = bytes_[off + i];
    return a;
  }
  std::span<const std::uint8_t> bytes_;
};

struct Ipv6Repr {
  Ipv6Address src{};
  Ipv6Address dst{};
  std::uint8_t next_header = 17;
  std::uint8_t traffic_class = 0;
  std::uint32_t flow_label = 0;
  std::uint8_t hop_limit = 64;

  void emit(std::uint8_t* out, std::size_t payload_length) const {
    Ipv6::version::set(out, 6);
    Ipv6::traffic_class::set(out, traffic_class);
    Ipv6::flow_label::set(out, flow_label);
    Ipv6::payload_length::set(out, payload_length);
    Ipv6::next_header::set(out, next_header);
    Ipv6::hop_limit::set(out, hop_limit);
    for (std::size_t i = 0; i < 16; ++i) {
      out[Ipv6::src_offset + i] = src[i];
      out[Ipv6::dst_offset + i] = dst[i];
    }
  }
};

// ::ffff:a.b.c.d, the IPv4-mapped address RoCEv2 uses as the GID of an IPv4 address
// (IBTA vol. 1 annex A17.3.1).
constexpr Ipv6Address ipv4_mapped(const std::array<std::uint8_t, 4>& v4) {
  return {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF, v4[0], v4[1], v4[2], v4[3]};
}

}  // namespace wire
