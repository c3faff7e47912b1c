// DDP, Direct Data Placement (RFC 5041): the header at the start of every ULPDU.
//
//   tagged   (T=1): |T|L|Rsvd|DV| RsvdULP | STag (4) | TO (8)                    = 14 bytes
//   untagged (T=0): |T|L|Rsvd|DV| RsvdULP | RsvdULP (4) | QN (4) | MSN (4) | MO (4) = 18 bytes
//
// The RsvdULP octet after the DDP control octet, and the untagged header's 4-byte RsvdULP
// word, belong to the layer above: RDMAP keeps its version and opcode in the former and the
// Invalidate STag in the latter (rdmap.hpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "wire/error.hpp"
#include "wire/field.hpp"

namespace wire::iwarp {

struct Ddp {
  static constexpr std::size_t tagged_length = 14;    // RFC 5041 s4.3
  static constexpr std::size_t untagged_length = 18;  // RFC 5041 s4.4
  static constexpr unsigned version = 1;              // DV, RFC 5041 s4.2
  using tagged = Flag<0, 0x80>;
  using last = Flag<0, 0x40>;
  using dv = Field<0, 1, 0x03>;
  using ulp_control = Field<1, 1>;
  // Tagged buffer model.
  using stag = Field<2, 4>;
  using tagged_offset = Field<6, 8>;
  // Untagged buffer model.
  using ulp_word = Field<2, 4>;
  using queue_number = Field<6, 4>;
  using message_sequence_number = Field<10, 4>;
  using message_offset = Field<14, 4>;

  static constexpr std::size_t length(bool is_tagged) { return is_tagged ? tagged_length : untagged_length; }
};

struct DdpHeader {
  bool tagged = false;
  bool last = true;              // L: the last segment of its DDP message
  std::uint8_t ulp_control = 0;  // octet 1, RsvdULP
  // Tagged buffer model (tagged == true).
  std::uint32_t stag = 0;
  std::uint64_t tagged_offset = 0;
  // Untagged buffer model (tagged == false).
  std::uint32_t ulp_word = 0;  // octets 2..5, RsvdULP
  std::uint32_t queue_number = 0;
  std::uint32_t message_sequence_number = 0;
  std::uint32_t message_offset = 0;

  std::size_t length() const { return Ddp::length(tagged); }

  // Reserved bits are not checked: senders zero them, receivers need not look.
  static Result<DdpHeader> parse(std::span<const std::uint8_t> bytes) {
    if (bytes.empty()) return Error::truncated;
    const std::uint8_t* p = bytes.data();
    if (Ddp::dv::get(p) != Ddp::version) return Error::bad_version;  // RFC 5041 s4.2
    DdpHeader h;
    h.tagged = Ddp::tagged::get(p);
    if (bytes.size() < h.length()) return Error::truncated;
    h.last = Ddp::last::get(p);
    h.ulp_control = Ddp::ulp_control::get(p);
    if (h.tagged) {
      h.stag = Ddp::stag::get(p);
      h.tagged_offset = Ddp::tagged_offset::get(p);
    } else {
      h.ulp_word = Ddp::ulp_word::get(p);
      h.queue_number = Ddp::queue_number::get(p);
      h.message_sequence_number = Ddp::message_sequence_number::get(p);
      h.message_offset = Ddp::message_offset::get(p);
    }
    return h;
  }

  // Writes length() bytes, reserved bits zero.
  void emit(std::uint8_t* out) const {
    out[0] = 0;
    Ddp::tagged::set(out, tagged);
    Ddp::last::set(out, last);
    Ddp::dv::set(out, Ddp::version);
    Ddp::ulp_control::set(out, ulp_control);
    if (tagged) {
      Ddp::stag::set(out, stag);
      Ddp::tagged_offset::set(out, tagged_offset);
    } else {
      Ddp::ulp_word::set(out, ulp_word);
      Ddp::queue_number::set(out, queue_number);
      Ddp::message_sequence_number::set(out, message_sequence_number);
      Ddp::message_offset::set(out, message_offset);
    }
  }

  bool operator==(const DdpHeader&) const = default;
};

}  // namespace wire::iwarp
