#include "wire/crc32.hpp"

#include <array>

namespace wire {
namespace {

constexpr std::array<std::uint32_t, 256> make_table(std::uint32_t poly) {
  std::array<std::uint32_t, 256> t{};
  for (std::uint32_t i = 0; i < 256; ++i) {
    std::uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ poly : c >> 1;
    t[i] = c;
  }
  return t;
}
constexpr auto kTable = make_table(0xEDB88320u);

}  // namespace

std::uint32_t crc32_portable(std::span<const std::uint8_t> data, std::uint32_t prev) {
  std::uint32_t c = ~prev;
  for (std::uint8_t b : data) c = kTable[(c ^ b) & 0xFF] ^ (c >> 8);
  return ~c;
}

std::uint32_t crc32(std::span<const std::uint8_t> data, std::uint32_t prev) { return crc32_portable(data, prev); }
std::string_view crc32_implementation() { return "portable"; }

}  // namespace wire
