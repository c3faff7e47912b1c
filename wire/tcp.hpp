// TCP header (RFC 9293 s3.1), enough to carry MPA/DDP/RDMAP (iWARP) through captures.
#pragma once

#include <cstdint>
#include <span>

#include "wire/error.hpp"
#include "wire/field.hpp"
#include "wire/inet_checksum.hpp"
#include "wire/ipv4.hpp"

namespace wire {

struct Tcp {
  static constexpr std::size_t min_length = 20;
  using src_port = Field<0, 2>;
  using dst_port = Field<2, 2>;
  using seq = Field<4, 4>;
  using ack = Field<8, 4>;
  using data_offset = Field<12, 1, 0xF0>;
  using flags = Field<13, 1>;
  using window = Field<14, 2>;
  using checksum = Field<16, 2>;
  using urgent = Field<18, 2>;
  static constexpr std::uint8_t fin = 0x01, syn = 0x02, rst = 0x04, psh = 0x08, ack_flag = 0x10;
  // The Maximum Segment Size option (RFC 9293 s3.2: kind 2, length 4, the size), here as the
  // first option, right after the fixed header.
  static constexpr std::uint8_t mss_option_kind = 2;
  static constexpr std::size_t mss_option_length = 4;
  using mss_option_value = Field<22, 2>;
};

class TcpView {
 public:
  static Result<TcpView> check(std::span<const std::uint8_t> segment) {
    if (segment.size() < Tcp::min_length) return Error::truncated;
    const std::size_t hlen = std::size_t{Tcp::data_offset::get(segment.data())} * 4;
    if (hlen < Tcp::min_length) return Error::bad_header_length;
    if (hlen > segment.size()) return Error::truncated;
    return TcpView(segment, hlen);
  }

  const std::uint8_t* data() const { return bytes_.data(); }
  std::span<const std::uint8_t> payload() const { return bytes_.subspan(hlen_); }
  std::size_t header_length() const { return hlen_; }
  std::uint16_t src_port() const { return Tcp::src_port::get(data()); }
  std::uint16_t dst_port() const { return Tcp::dst_port::get(data()); }
  std::uint32_t seq() const { return Tcp::seq::get(data()); }
  std::uint32_t ack() const { return Tcp::ack::get(data()); }
  std::uint8_t flags() const { return Tcp::flags::get(data()); }

 private:
  TcpView(std::span<const std::uint8_t> b, std::size_t h) : bytes_(b), hlen_(h) {}
  std::span<const std::uint8_t> bytes_;
  std::size_t hlen_;
};

// A TCP header with no option but, when `mss` is set, the MSS option, which only a SYN may
// carry (RFC 9293 s3.7.1).
struct TcpRepr {
  std::uint16_t src_port = 0;
  std::uint16_t dst_port = 0;
  std::uint32_t seq = 0;
  std::uint32_t ack = 0;
  std::uint8_t flags = 0;
  std::uint16_t window = 0xFFFF;
  std::uint16_t mss = 0;  // 0: no MSS option

  std::size_t header_length() const { return Tcp::min_length + (mss != 0 ? Tcp::mss_option_length : 0); }

  // Writes header_length() bytes at `out` for a segment carrying `payload` (which the caller
  // places after them), the checksum over the pseudo-header of `src` and `dst` (4 bytes each
  // for IPv4, 16 for IPv6: RFC 9293 s3.1).
  void emit(std::uint8_t* out, std::span<const std::uint8_t> src, std::span<const std::uint8_t> dst,
            std::span<const std::uint8_t> payload) const {
    const std::size_t hlen = header_length();
    Tcp::src_port::set(out, src_port);
    Tcp::dst_port::set(out, dst_port);
    Tcp::seq::set(out, seq);
    Tcp::ack::set(out, ack);
    out[12] = 0;
    Tcp::data_offset::set(out, hlen / 4);
    Tcp::flags::set(out, flags);
    Tcp::window::set(out, window);
    Tcp::checksum::set(out, 0);
    Tcp::urgent::set(out, 0);
    if (mss != 0) {
      out[Tcp::min_length] = Tcp::mss_option_kind;
      out[Tcp::min_length + 1] = Tcp::mss_option_length;
      Tcp::mss_option_value::set(out, mss);
    }
    const std::uint32_t length = static_cast<std::uint32_t>(hlen + payload.size());
    const std::uint32_t sum =
        inet_sum(payload, inet_sum({out, hlen}, pseudo_header_sum(src, dst, ip_proto::tcp, length)));
    Tcp::checksum::set(out, inet_fold(sum));
  }
};

}  // namespace wire
