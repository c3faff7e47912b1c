// IPv4 header (RFC 791): view over untrusted bytes and a builder for option-less headers.
#pragma once

#include <array>
#include <cstdint>
#include <span>

#include "wire/error.hpp"
#include "wire/field.hpp"
#include "wire/inet_checksum.hpp"

namespace wire {

using Ipv4Address = std::array<std::uint8_t, 4>;

namespace ip_proto {
inline constexpr std::uint8_t tcp = 6;
inline constexpr std::uint8_t udp = 17;
inline constexpr std::uint8_t icmpv6 = 58;  // IPv6's Next Header shares these numbers (RFC 8200 s3)
}  // namespace ip_proto

struct Ipv4 {
  static constexpr std::size_t min_length = 20;
  using version = Field<0, 1, 0xF0>;
  using ihl = Field<0, 1, 0x0F>;
  using tos = Field<1, 1>;
  using dscp = Field<1, 1, 0xFC>;
  using ecn = Field<1, 1, 0x03>;
  using total_length = Field<2, 2>;
  using identification = Field<4, 2>;
  using dont_fragment = Flag<6, 0x40>;
  using more_fragments = Flag<6, 0x20>;
  using fragment_offset = Field<6, 2, 0x1FFF>;
  using ttl = Field<8, 1>;
  using protocol = Field<9, 1>;
  using checksum = Field<10, 2>;
  using src = Field<12, 4>;
  using dst = Field<16, 4>;
};

class Ipv4View {
 public:
  // Accepts a datagram whose declared total length fits in `bytes` (link padding may follow).
  static Result<Ipv4View> check(std::span<const std::uint8_t> bytes) {
    if (bytes.size() < Ipv4::min_length) return Error::truncated;
    const std::uint8_t* p = bytes.data();
    if (Ipv4::version::get(p) != 4) return Error::bad_version;
    const std::size_t hlen = std::size_t{Ipv4::ihl::get(p)} * 4;
    if (hlen < Ipv4::min_length) return Error::bad_header_length;
    const std::size_t total = Ipv4::total_length::get(p);
    if (total < hlen) return Error::bad_length;
    if (total > bytes.size()) return Error::truncated;
    return Ipv4View(bytes.first(total), hlen);
  }

  const std::uint8_t* data() const { return bytes_.data(); }
  std::span<const std::uint8_t> header() const { return bytes_.first(hlen_); }
  std::span<const std::uint8_t> payload() const { return bytes_.subspan(hlen_); }
  std::uint8_t protocol() const { return Ipv4::protocol::get(data()); }
  bool is_fragment() const { return Ipv4::more_fragments::get(data()) || Ipv4::fragment_offset::get(data()) != 0; }
  Ipv4Address src() const { return addr_at(12); }
  Ipv4Address dst() const { return addr_at(16); }
  bool checksum_ok() const { return inet_checksum(header()) == 0; }

 private:
  Ipv4View(std::span<const std::uint8_t> b, std::size_t h) : bytes_(b), hlen_(h) {}
  Ipv4Address addr_at(std::size_t off) const {
    return {bytes_[off], bytes_[off + 1], bytes_[off + 2], bytes_[off + 3]};
  }
  std::span<const std::uint8_t> bytes_;
  std::size_t hlen_;
};

struct Ipv4Repr {
  Ipv4Address src{};
  Ipv4Address dst{};
  std::uint8_t protocol = ip_proto::udp;
  std::uint8_t tos = 0;
  std::uint8_t ttl = 64;
  std::uint16_t identification = 0;
  bool dont_fragment = true;

  // Writes a 20-byte header for `payload_length` bytes of payload, checksum filled in.
  void emit(std::uint8_t* out, std::size_t payload_length) const {
    emit_without_checksum(out, payload_length);
    Ipv4::checksum::set(out, inet_checksum({out, Ipv4::min_length}));
  }

  // The same with checksum 0: for a header only an ICRC covers, which masks the checksum
  // (IBTA annex A17.4.2), so computing it would be wasted per packet.
  void emit_without_checksum(std::uint8_t* out, std::size_t payload_length) const {
    Ipv4::version::set(out, 4);
    Ipv4::ihl::set(out, 5);
    Ipv4::tos::set(out, tos);
    Ipv4::total_length::set(out, Ipv4::min_length + payload_length);
    Ipv4::identification::set(out, identification);
    out[6] = 0;
    out[7] = 0;
    Ipv4::dont_fragment::set(out, dont_fragment);
    Ipv4::ttl::set(out, ttl);
    Ipv4::protocol::set(out, protocol);
    Ipv4::checksum::set(out, 0);
    for (std::size_t i = 0; i < 4; ++i) {
      out[12 + i] = src[i];
      out[16 + i] = dst[i];
    }
  }
};

}  // namespace wire
