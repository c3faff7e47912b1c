// Why untrusted bytes were refused. `check()` functions return one of these instead of
// throwing or reading out of bounds; every code has a stable name for counters and JSON.
#pragma once

#include <cstdint>
#include <string_view>
#include <utility>
#include <variant>

namespace wire {

enum class Error : std::uint8_t {
  truncated,              // fewer bytes than the headers declare or need
  oversized,              // a length field larger than anything this codec accepts
  bad_length,             // a length field disagrees with the bytes present (IP/UDP total length)
  bad_header_length,      // IPv4 IHL below 5, or options beyond the datagram
  bad_version,            // IP version, BTH TVer, DDP or RDMAP version not the one supported
  bad_pad_count,          // BTH pad count larger than the payload it would strip
  unknown_opcode,         // BTH opcode reserved in IBTA vol. 1 table 35, RDMAP opcode unused, or an
                          // ICMPv6 message that is not a Neighbor Solicitation or Advertisement
  fragmented,             // IPv4 fragment: RoCEv2 never fragments (IBTA vol. 1 A17.4.3)
  not_roce,               // a frame that is not RoCEv1 (0x8915) or RoCEv2 (UDP port 4791)
  bad_mpa_key,            // MPA request/reply key is neither "MPA ID Req Frame" nor "...Rep Frame"
  bad_mpa_marker,         // a marker's FPDU pointer does not point at an FPDU start (RFC 5044 s4.3)
  bad_crc,                // a CRC that was checked did not match
  bad_buffer_model,       // DDP tagged flag or queue number not the one the RDMAP opcode uses (RFC 5040 s4.2)
  bad_checksum,           // an Internet checksum (RFC 1071) that does not add up
  invalid_field,          // a value the protocol's validity rules refuse (ND: RFC 4861 s7.1.1, s7.1.2;
                          // CM: a reserved code point, IBTA vol. 1 ch. 12.6)
  unsupported_class,      // a MAD whose management class is not the one the codec decodes (IBTA vol. 1 s13.4.4)
  unsupported_attribute,  // a MAD attribute the codec does not decode (CM: ClassPortInfo, LAP, APR, undefined IDs)
  bad_qkey,               // a packet to QP1 without QP1's well-known Q_Key 0x80010000 (IBTA vol. 1 ch. 13.5)
  bad_source_qp,          // a packet to QP1 that does not come from QP1 (IBTA vol. 1 ch. 13.5: GMPs go GSI to GSI)
};

constexpr std::string_view name(Error e) {
  switch (e) {
    case Error::truncated:
      return "truncated";
    case Error::oversized:
      return "oversized";
    case Error::bad_length:
      return "bad_length";
    case Error::bad_header_length:
      return "bad_header_length";
    case Error::bad_version:
      return "bad_version";
    case Error::bad_pad_count:
      return "bad_pad_count";
    case Error::unknown_opcode:
      return "unknown_opcode";
    case Error::fragmented:
      return "fragmented";
    case Error::not_roce:
      return "not_roce";
    case Error::bad_mpa_key:
      return "bad_mpa_key";
    case Error::bad_mpa_marker:
      return "bad_mpa_marker";
    case Error::bad_crc:
      return "bad_crc";
    case Error::bad_buffer_model:
      return "bad_buffer_model";
    case Error::bad_checksum:
      return "bad_checksum";
    case Error::invalid_field:
      return "invalid_field";
    case Error::unsupported_class:
      return "unsupported_class";
    case Error::unsupported_attribute:
      return "unsupported_attribute";
    case Error::bad_qkey:
      return "bad_qkey";
    case Error::bad_source_qp:
      return "bad_source_qp";
  }
  return "unknown_error";
}

// A value or the reason there is none (std::expected arrives with C++23; this is the subset
// the codecs need).
template <typename T>
class Result {
 public:
  constexpr Result(T value) : v_(std::move(value)) {}  // NOLINT: implicit by design
  constexpr Result(Error e) : v_(e) {}                 // NOLINT: implicit by design

  constexpr bool ok() const { return v_.index() == 0; }
  constexpr explicit operator bool() const { return ok(); }
  constexpr const T& value() const& { return std::get<0>(v_); }
  constexpr T& value() & { return std::get<0>(v_); }
  constexpr const T* operator->() const { return &std::get<0>(v_); }
  constexpr const T& operator*() const { return std::get<0>(v_); }
  constexpr Error error() const { return std::get<1>(v_); }

 private:
  std::variant<T, Error> v_;
};

}  // namespace wire
