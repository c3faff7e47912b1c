// UDP header (RFC 768). RoCEv2 is UDP destination port 4791 (IBTA vol. 1 annex A17.2.1).
#pragma once

#include <cstdint>
#include <span>

#include "wire/error.hpp"
#include "wire/field.hpp"

namespace wire {

inline constexpr std::uint16_t kRoceV2Port = 4791;

struct Udp {
  static constexpr std::size_t length = 8;
  using src_port = Field<0, 2>;
  using dst_port = Field<2, 2>;
  using total_length = Field<4, 2>;
  using checksum = Field<6, 2>;
};

class UdpView {
 public:
  static Result<UdpView> check(std::span<const std::uint8_t> bytes) {
    if (bytes.size() < Udp::length) return Error::truncated;
    const std::size_t total = Udp::total_length::get(bytes.data());
    if (total < Udp::length) return Error::bad_length;
    if (total > bytes.size()) return Error::truncated;
    return UdpView(bytes.first(total));
  }

  const std::uint8_t* data() const { return bytes_.data(); }
  std::span<const std::uint8_t> datagram() const { return bytes_; }
  std::span<const std::uint8_t> payload() const { return bytes_.subspan(Udp::length); }
  std::uint16_t src_port() const { return Udp::src_port::get(data()); }
  std::uint16_t dst_port() const { return Udp::dst_port::get(data()); }
  std::uint16_t checksum() const { return Udp::checksum::get(data()); }

 private:
  explicit UdpView(std::span<const std::uint8_t> b) : bytes_(b) {}
  std::span<const std::uint8_t> bytes_;
};

}  // namespace wire
