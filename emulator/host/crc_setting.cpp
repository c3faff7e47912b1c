#include "emulator/host/crc_setting.hpp"

#include <cstdlib>

namespace softrdma::host {

std::optional<wire::CrcTier> parse_crc_cap(std::string_view value) {
  if (value == "portable") return wire::CrcTier::portable;
  if (value == "sse") return wire::CrcTier::sse;
  if (value == "avx2") return wire::CrcTier::avx2;
  return std::nullopt;
}

void apply_crc_variable() {
  const char* value = std::getenv(kCrcVariable);
  if (const auto cap = parse_crc_cap(value != nullptr ? value : "")) wire::cap_crc_tier(*cap);
}

}  // namespace softrdma::host
