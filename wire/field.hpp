// Header fields declared once: byte offset, byte width and bit mask over big-endian bytes.
//
// Wire layouts never use compiler bit-fields (their layout is implementation-defined). A
// header is a struct of `Field` constants; reading or writing one is a single call on the
// header's first byte:
//
//   struct Bth { static constexpr Field<5, 3> dest_qp{}; ... };
//   uint32_t qpn = Bth::dest_qp.get(p);   Bth::dest_qp.set(p, qpn);
//
// A field covers `Width` bytes starting at `Offset`, read as one big-endian integer, and then
// masked with `Mask` and shifted down by the mask's trailing zeros. The caller guarantees the
// bytes exist: views call `get` only after their `check()` has validated the length.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <type_traits>

namespace wire {

// The smallest unsigned integer type holding `Bytes` bytes.
template <std::size_t Bytes>
using uint_for_t = std::conditional_t<
    Bytes <= 1, std::uint8_t,
    std::conditional_t<Bytes <= 2, std::uint16_t, std::conditional_t<Bytes <= 4, std::uint32_t, std::uint64_t>>>;

constexpr std::uint64_t all_ones(std::size_t bytes) {
  return bytes >= 8 ? ~std::uint64_t{0} : (std::uint64_t{1} << (8 * bytes)) - 1;
}

template <std::size_t Offset, std::size_t Width, std::uint64_t Mask = all_ones(Width)>
struct Field {
  static_assert(Width >= 1 && Width <= 8, "a field spans 1 to 8 bytes");
  static_assert(Mask != 0 && (Mask & ~all_ones(Width)) == 0, "mask must fit the width");

  using value_type = uint_for_t<Width>;
  static constexpr std::size_t offset = Offset;
  static constexpr std::size_t width = Width;
  static constexpr std::size_t end = Offset + Width;  // bytes a view must hold to read it
  static constexpr unsigned shift = static_cast<unsigned>(std::countr_zero(Mask));
  static constexpr std::uint64_t mask = Mask;
  static constexpr std::uint64_t max = Mask >> shift;

  static constexpr std::uint64_t load(const std::uint8_t* p) {
    std::uint64_t v = 0;
    for (std::size_t i = 0; i < Width; ++i) v = (v << 8) | p[Offset + i];
    return v;
  }
  static constexpr void store(std::uint8_t* p, std::uint64_t v) {
    for (std::size_t i = 0; i < Width; ++i) p[Offset + Width - 1 - i] = static_cast<std::uint8_t>(v >> (8 * i));
  }

  static constexpr value_type get(const std::uint8_t* header) {
    return static_cast<value_type>((load(header) & Mask) >> shift);
  }
  // Writes the field and leaves the other bits of the shared bytes as they were. Values wider
  // than the field are truncated to it: builders pass values already range-checked.
  static constexpr void set(std::uint8_t* header, std::uint64_t value) {
    const std::uint64_t rest = Mask == all_ones(Width) ? 0 : load(header) & ~Mask;
    store(header, rest | ((value << shift) & Mask));
  }
};

// One bit flag inside a byte, as a bool.
template <std::size_t Offset, std::uint8_t Bit>
struct Flag {
  using field = Field<Offset, 1, Bit>;
  static constexpr std::size_t end = Offset + 1;
  static constexpr bool get(const std::uint8_t* header) { return field::get(header) != 0; }
  static constexpr void set(std::uint8_t* header, bool on) { field::set(header, on ? 1 : 0); }
};

}  // namespace wire
