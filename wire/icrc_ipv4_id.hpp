// Recovering the IPv4 Identification a RoCEv2 sender used, from the ICRC it wrote.
//
// The ICRC covers the IPv4 Identification field (IBTA vol. 1 annex A17.4.2 masks only TOS,
// TTL and the header checksum), but a receiver behind a UDP socket never sees that field.
// softrdma sends ID 0; Linux rxe and NICs send DF with non-zero, incrementing IDs. Because
// CRC-32 is linear over GF(2), flipping bits of the ID changes the ICRC by a fixed linear
// function of those bits that depends only on how many bytes follow the field. Given the
// syndrome (received ICRC XOR the ICRC computed with a guessed ID) that is a system of 32
// equations in 16 unknowns, solved in closed form by dividing the syndrome by x^(32 + 8n)
// modulo the CRC polynomial: exactly one ID when the packet is intact, and a solution by
// chance for a corrupted packet with probability 2^-16 (such a packet is accepted with
// 16-bit strength, and the receiver counts it: docs/interop.md, "IPv4 IDs and the ICRC").
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>

#include "wire/roce_frame.hpp"

namespace wire {

// The bytes of the IPv4 header after its Identification field (offset 6 on), which the ICRC
// covers after the ID along with the UDP header and BTH through pad.
constexpr std::size_t kIpv4BytesAfterIdentification = 14;

// The XOR between the guessed ID and the one that explains `syndrome`, where `trailing` is
// the number of bytes the ICRC covers after the Identification field (for a 20-byte IPv4
// header: kIpv4BytesAfterIdentification + 8 + BTH-through-pad). nullopt when no ID does.
// A syndrome of 0 gives 0. Pure arithmetic: any input is safe.
std::optional<std::uint16_t> ipv4_identification_correction(std::uint32_t syndrome, std::size_t trailing);

// The other way round: how the ICRC changes when the Identification changes, for packets that
// cover `trailing` bytes after the field. A sender that lets the kernel number its packets
// (UDP GSO gives the segments of one send IDs 0, 1, 2, ...) computes each ICRC for ID 0 and
// XORs in syndrome(k). Each ID bit's syndrome is computed once; an ID's is their XOR.
class Ipv4IdentificationShift {
 public:
  explicit Ipv4IdentificationShift(std::size_t trailing);
  // The ICRC XOR between a packet with Identification `a` and the same packet with `b`,
  // where id_xor = a ^ b.
  std::uint32_t syndrome(std::uint16_t id_xor) const;

 private:
  std::array<std::uint32_t, 16> bit_syndromes_;  // by ID bit: D(x) * x^(32 + 8 * trailing)
};

// The Identification that makes `frame`'s ICRC verify: its own when it already does.
// nullopt for RoCEv1 and IPv6 frames, or when no ID makes the ICRC match.
std::optional<std::uint16_t> solve_ipv4_identification(const RoceFrame& frame);

}  // namespace wire
