#include "wire/icrc_ipv4_id.hpp"

#include <array>

#include "wire/ipv4.hpp"

namespace wire {
namespace {

// CRC-32's reflected polynomial (wire/crc32.hpp). In this representation bit 31 of a
// register is the coefficient of x^0 and bit 0 that of x^31.
constexpr std::uint32_t kPoly = 0xEDB88320u;
constexpr std::uint32_t kOne = 1u << 31;  // the polynomial 1

constexpr std::uint32_t lowest_bit(std::uint32_t v) { return v & (~v + 1); }

constexpr std::uint32_t times_x(std::uint32_t c) { return (c & 1) ? (c >> 1) ^ kPoly : c >> 1; }

// a * b modulo the polynomial.
constexpr std::uint32_t multiply(std::uint32_t a, std::uint32_t b) {
  std::uint32_t product = 0;
  for (std::uint32_t m = kOne; m != 0; m >>= 1) {
    if (a & m) product ^= b;
    b = times_x(b);
  }
  return product;
}

// kSquares[k] = x^(2^k) modulo the polynomial, so x^n takes one multiply per set bit of n.
constexpr std::array<std::uint32_t, 64> make_squares() {
  std::array<std::uint32_t, 64> s{};
  s[0] = kOne >> 1;  // x
  for (std::size_t k = 1; k < s.size(); ++k) s[k] = multiply(s[k - 1], s[k - 1]);
  return s;
}
constexpr std::array<std::uint32_t, 64> kSquares = make_squares();

std::uint32_t x_to_the(std::uint64_t n) {
  std::uint32_t r = kOne;
  for (std::size_t k = 0; n != 0; n >>= 1, ++k)
    if (n & 1) r = multiply(r, kSquares[k]);
  return r;
}

}  // namespace

std::optional<std::uint16_t> ipv4_identification_correction(std::uint32_t syndrome, std::size_t trailing) {
  if (syndrome == 0) return std::uint16_t{0};
  // The register change a flipped message bit causes is x^(32 + bits after it) modulo the
  // polynomial; the final complement of the CRC cancels in the XOR. A reflected CRC takes
  // each byte least significant bit first, so the ID (big-endian on the wire) enters as
  // bits 8..15 then bits 0..7, and its last bit in is bit 7 of the low byte.
  std::uint32_t column = x_to_the(32 + std::uint64_t{trailing} * 8);
  // Gaussian elimination, echelon basis: each vector with the ID bits it is the sum of; its
  // pivot is its lowest set bit, which no later vector has. CRC-32 catches every error burst of up to 32 bits, so the 16
  // columns are independent and the basis always reaches 16 vectors.
  std::array<std::uint32_t, 16> vec{};
  std::array<std::uint16_t, 16> ids{};
  std::size_t rank = 0;
  for (int last = 0; last < 16; ++last, column = times_x(column)) {
    // `last` counts bits between this one and the end of the field: bit 7 of the low byte is
    // 0, bit 0 of the low byte 7, bit 7 of the high byte (ID bit 15) 8, its bit 0 is 15.
    const int id_bit = last < 8 ? 7 - last : 15 - (last - 8);
    std::uint32_t v = column;
    std::uint16_t m = static_cast<std::uint16_t>(1u << id_bit);
    for (std::size_t k = 0; k < rank; ++k) {
      if (v & lowest_bit(vec[k])) {
        v ^= vec[k];
        m ^= ids[k];
      }
    }
    vec[rank] = v;
    ids[rank] = m;
    ++rank;
  }
  std::uint16_t correction = 0;
  for (std::size_t k = 0; k < rank; ++k) {
    if (syndrome & lowest_bit(vec[k])) {
      syndrome ^= vec[k];
      correction ^= ids[k];
    }
  }
  if (syndrome != 0) return std::nullopt;
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
