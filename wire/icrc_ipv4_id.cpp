#include "wire/icrc_ipv4_id.hpp"

#include <array>
#include <bit>

#include "wire/ipv4.hpp"

namespace wire {
namespace {

// CRC-32's reflected polynomial (wire/crc32.hpp). In this representation bit 31 of a
// register is the coefficient of x^0 and bit 0 that of x^31.
constexpr std::uint32_t kPoly = 0xEDB88320u;
constexpr std::uint32_t kOne = 1u << 31;  // the polynomial 1

// All ones when `bit` is 1, else 0: the loops below stay free of data-dependent branches.
constexpr std::uint32_t mask_of(std::uint32_t bit) { return 0u - (bit & 1); }

constexpr std::uint32_t times_x(std::uint32_t c) { return (c >> 1) ^ (kPoly & mask_of(c)); }

// a * b modulo the polynomial.
constexpr std::uint32_t multiply(std::uint32_t a, std::uint32_t b) {
  std::uint32_t product = 0;
  for (int k = 31; k >= 0; --k) {
    product ^= b & mask_of(a >> k);
    b = times_x(b);
  }
  return product;
}

// x^-1 modulo the polynomial P = x^32 + p(x): since p(0) = 1, x * (x^31 + (p(x) - 1) / x) = P + 1
// = 1. Reflected: clear p's x^0 bit (31), divide by x (shift towards bit 31), add x^31 (bit 0).
constexpr std::uint32_t kInverseOfX = ((kPoly & ~kOne) << 1) | 1;
static_assert(multiply(kInverseOfX, kOne >> 1) == kOne);

// Square-and-multiply over a table of squarings: Squares<b>[k] = b^(2^k) modulo the
// polynomial, so b^n takes one multiply per set bit of n.
using Squares = std::array<std::uint32_t, 64>;
constexpr Squares squares_of(std::uint32_t base) {
  Squares s{};
  s[0] = base;
  for (std::size_t k = 1; k < s.size(); ++k) s[k] = multiply(s[k - 1], s[k - 1]);
  return s;
}
constexpr Squares kPowersOfX = squares_of(kOne >> 1);  // x
constexpr Squares kPowersOfInverse = squares_of(kInverseOfX);

std::uint32_t power(const Squares& squares, std::uint64_t n) {
  std::uint32_t r = kOne;
  for (std::size_t k = 0; n != 0; n >>= 1, ++k)
    if (n & 1) r = multiply(r, squares[k]);
  return r;
}

// Where bit `id_bit` of the big-endian ID sits in D(x) (see ipv4_identification_correction):
// the high byte comes first, each byte least significant bit first, and s counts the ID bits
// that follow.
constexpr int d_position(int id_bit) { return id_bit < 8 ? 7 - id_bit : 23 - id_bit; }

}  // namespace

Ipv4IdentificationShift::Ipv4IdentificationShift(std::size_t trailing) {
  const std::uint32_t x_power = power(kPowersOfX, 32 + std::uint64_t{trailing} * 8);
  for (int b = 0; b < 16; ++b) bit_syndromes_[b] = multiply(kOne >> d_position(b), x_power);
}

std::uint32_t Ipv4IdentificationShift::syndrome(std::uint16_t id_xor) const {
  // The CRC is linear: several flipped bits change it by the XOR of what each one does.
  std::uint32_t s = 0;
  for (unsigned rest = id_xor; rest != 0; rest &= rest - 1) s ^= bit_syndromes_[std::countr_zero(rest)];
  return s;
}

std::optional<std::uint16_t> ipv4_identification_correction(std::uint32_t syndrome, std::size_t trailing) {
  // A flipped message bit with b bits after it changes the CRC register by x^(32 + b) modulo
  // the polynomial (the CRC's final complement cancels in the XOR). Number the ID's bits by
  // how many of them follow each in the stream, s = 0..15: the syndrome of a changed ID is
  // D(x) * x^(32 + 8 * trailing), D(x) = the sum of x^s over the changed bits, of degree < 16.
  // x is invertible modulo the polynomial, so D = syndrome * x^-(32 + 8 * trailing) is the
  // only candidate, and an ID explains the syndrome exactly when that D has degree < 16.
  const std::uint32_t d = multiply(syndrome, power(kPowersOfInverse, 32 + std::uint64_t{trailing} * 8));
  if (d & 0xFFFF) return std::nullopt;  // a coefficient of x^16..x^31: no ID does
  // A reflected CRC takes each byte least significant bit first, so the big-endian ID enters
  // as bits 8..15 then 0..7: s = 0 is bit 7 of the low byte, s = 7 its bit 0, s = 8 ID bit 15.
  std::uint16_t correction = 0;
  for (int s = 0; s < 16; ++s) {
    if (!(d & (kOne >> s))) continue;
    const int id_bit = s < 8 ? 7 - s : 15 - (s - 8);
    correction = static_cast<std::uint16_t>(correction | 1u << id_bit);
  }
  return correction;
}

std::optional<std::uint16_t> solve_ipv4_identification(const RoceFrame& frame) {
  if (frame.encapsulation() != Encapsulation::rocev2_ipv4) return std::nullopt;
  const std::span<const std::uint8_t> ip = frame.network_header();
  const std::size_t trailing = ip.size() - 6 + frame.udp_header().size() + frame.ib().covered().size();
  const auto correction = ipv4_identification_correction(frame.computed_icrc() ^ frame.ib().icrc(), trailing);
  if (!correction) return std::nullopt;
  return static_cast<std::uint16_t>(Ipv4::identification::get(ip.data()) ^ *correction);
}

}  // namespace wire
