// TCP header (RFC 9293 s3.1), enough to carry MPA/DDP/RDMAP (iWARP) through captures.
#pragma once

#include <cstdint>
#include <span>

#include "wire/error.hpp"
#include "wire/field.hpp"

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
  std::uint8_t flags() const { return Tcp::flags::get(data()); }

 private:
  TcpView(std::span<const std::uint8_t> b, std::size_t h) : bytes_(b), hlen_(h) {}
  std::span<const std::uint8_t> bytes_;
  std::size_t hlen_;
};

}  // namespace wire
