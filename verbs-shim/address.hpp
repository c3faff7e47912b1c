// The IPv4 address a softrdma device is asked to bind: SOFTRDMA_IP, checked here; unset, the
// embedded host takes the first free 127.0.0.N (host_link.hpp).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace softrdma::shim {

struct Ipv4 {
  std::array<std::uint8_t, 4> bytes{};  // network order: 127.0.0.1 is {127, 0, 0, 1}
  friend bool operator==(const Ipv4&, const Ipv4&) = default;
};

inline constexpr Ipv4 kDefaultAddress{{127, 0, 0, 1}};
inline constexpr const char* kAddressVariable = "SOFTRDMA_IP";
inline constexpr std::uint16_t kRoceV2Port = 4791;  // IANA's RoCEv2 UDP port

// Strict dotted-quad ("10.0.0.1"); no hostnames, no shorthand forms like "10.1".
std::optional<Ipv4> parse_ipv4(std::string_view text);
std::string to_string(const Ipv4& address);

struct AddressChoice {
  std::optional<Ipv4> address;  // empty when the configuration is unusable
  std::string error;            // then: one line saying why, naming the variable
};

// What SOFTRDMA_IP asks for (`value` is its content, or null when unset: kDefaultAddress,
// the address `softrdma devices` reports for a first process).
AddressChoice choose_address(const char* value);

}  // namespace softrdma::shim
