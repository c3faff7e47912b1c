#include "verbs-shim/address.hpp"

#include <arpa/inet.h>

#include <cstdlib>

namespace softrdma::shim {

std::optional<Ipv4> parse_ipv4(std::string_view text) {
  // inet_pton(AF_INET) is the strict parser: exactly four decimal parts, each 0..255.
  char buf[INET_ADDRSTRLEN];
  if (text.empty() || text.size() >= sizeof buf) return std::nullopt;
  text.copy(buf, text.size());
  buf[text.size()] = '\0';
  Ipv4 out;
  if (inet_pton(AF_INET, buf, out.bytes.data()) != 1) return std::nullopt;
  return out;
}

std::string to_string(const Ipv4& address) {
  char buf[INET_ADDRSTRLEN];
  inet_ntop(AF_INET, address.bytes.data(), buf, sizeof buf);
  return buf;
}

AddressChoice choose_address(const char* value) {
  AddressChoice choice;
  if (value == nullptr || *value == '\0') {
    choice.address = kDefaultAddress;
    return choice;
  }
  choice.address = parse_ipv4(value);
  if (!choice.address) {
    choice.error = std::string(kAddressVariable) + "='" + value + "' is not an IPv4 address (expected a.b.c.d)";
  } else if (choice.address->bytes == std::array<std::uint8_t, 4>{} ||
             choice.address->bytes[0] >= 224) {
    // 0.0.0.0 would give the all-zero GID, which every tool treats as an empty table slot;
    // multicast and broadcast addresses cannot be a device's own unicast address.
    choice.error = std::string(kAddressVariable) + "='" + value + "' is not a unicast IPv4 address";
    choice.address.reset();
  }
  return choice;
}

}  // namespace softrdma::shim
