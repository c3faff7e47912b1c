#include "wire/field.hpp"

#include <array>
#include <catch2/catch.hpp>

using wire::Field;
using wire::Flag;

TEST_CASE("Field reads big-endian bytes and masks sub-byte fields", "[wire][field]") {
  const std::array<std::uint8_t, 4> b{0x12, 0x34, 0x56, 0x78};
  CHECK(Field<0, 1>::get(b.data()) == 0x12);
  CHECK(Field<1, 2>::get(b.data()) == 0x3456);
  CHECK(Field<1, 3>::get(b.data()) == 0x345678);
  CHECK(Field<0, 4>::get(b.data()) == 0x12345678u);
  CHECK(Field<0, 1, 0xF0>::get(b.data()) == 0x1);
  CHECK(Field<0, 1, 0x0F>::get(b.data()) == 0x2);
  CHECK(Field<1, 1, 0x30>::get(b.data()) == 0x3);
  CHECK(Flag<2, 0x40>::get(b.data()));
  CHECK_FALSE(Flag<2, 0x80>::get(b.data()));
}

TEST_CASE("Field::set writes only its own bits", "[wire][field]") {
  std::array<std::uint8_t, 4> b{0xA5, 0xA5, 0xA5, 0xA5};  // poisoned: untouched bits show
  Field<0, 1, 0x30>::set(b.data(), 0x1);
  CHECK(b[0] == 0x95);
  Field<1, 3>::set(b.data(), 0x123456);
  CHECK(b == std::array<std::uint8_t, 4>{0x95, 0x12, 0x34, 0x56});
  Flag<0, 0x80>::set(b.data(), false);
  CHECK(b[0] == 0x15);
  Field<0, 1, 0x0F>::set(b.data(), 0x1F);  // truncated to the field's width
  CHECK(b[0] == 0x1F);
}

TEST_CASE("Field widths up to 8 bytes round-trip", "[wire][field]") {
  std::array<std::uint8_t, 8> b{};
  Field<0, 8>::set(b.data(), 0x0102030405060708ull);
  CHECK(b == std::array<std::uint8_t, 8>{1, 2, 3, 4, 5, 6, 7, 8});
  CHECK(Field<0, 8>::get(b.data()) == 0x0102030405060708ull);
  CHECK(Field<2, 6>::get(b.data()) == 0x030405060708ull);
}
