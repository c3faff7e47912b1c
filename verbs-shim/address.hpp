// The address a softrdma device is asked to bind: SOFTRDMA_IP (an IPv4 or IPv6 address) or
// SOFTRDMA_NETDEV (an interface, whose address it takes), checked here; neither set, the
// embedded host takes the first free 127.0.0.N (host_link.hpp).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace softrdma::shim {

// An IPv4 or IPv6 address in IPv6 form, an IPv4 address as its IPv4-mapped ::ffff:a.b.c.d.
// That is the form of a RoCEv2 GID (IBTA annex A17.4.5.1), so an address's GID is its bytes,
// and "::ffff:10.0.0.1" and "10.0.0.1" are one address.
struct IpAddress {
  std::array<std::uint8_t, 16> bytes{};  // network order

  static constexpr IpAddress v4(std::uint8_t a, std::uint8_t b, std::uint8_t c, std::uint8_t d) {
    return {{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, a, b, c, d}};
  }
  constexpr bool is_v4() const {
    for (std::size_t i = 0; i < 10; ++i) {
      if (bytes[i] != 0) return false;
    }
    return bytes[10] == 0xff && bytes[11] == 0xff;
  }
  friend bool operator==(const IpAddress&, const IpAddress&) = default;
};

// The first of the loopback addresses an unconfigured device takes: a process alone gets it.
inline constexpr IpAddress kDefaultAddress = IpAddress::v4(127, 0, 0, 1);
inline constexpr const char* kAddressVariable = "SOFTRDMA_IP";
inline constexpr const char* kNetdevVariable = "SOFTRDMA_NETDEV";
inline constexpr std::uint16_t kRoceV2Port = 4791;  // IANA's RoCEv2 UDP port

// Strict inet_pton forms: a dotted quad ("10.0.0.1", not "10.1") or an IPv6 address
// ("fd00::1", "::ffff:10.0.0.1"); no hostnames, no "%scope" suffix, no surrounding spaces.
std::optional<IpAddress> parse_address(std::string_view text);
std::string to_string(const IpAddress& address);  // "10.0.0.1" for an IPv4 address

// Why a device cannot hold `address` ("is not a unicast IPv4 address", ...), or empty when it
// can. The all-zero address would be the all-zero GID, an empty table slot to every tool;
// multicast and broadcast are no one's own address; a link-local IPv6 address is bound and
// reached only with an interface scope, which a GID cannot carry.
std::string why_unusable(const IpAddress& address);

// One interface of this machine with its addresses, in the kernel's order (getifaddrs).
struct LocalInterface {
  struct Prefix {
    IpAddress address;
    IpAddress mask;  // in the same form: an IPv4 /24 is ffff:...:ffff:ff00 (96 + 24 bits)
  };
  std::string name;
  int index = 0;
  std::vector<Prefix> prefixes;
};
std::vector<LocalInterface> local_interfaces();  // empty when getifaddrs fails

// The address a device on interface `iface` takes: its first IPv4 address or, when it has
// none, its first global IPv6 address (not link-local, not ::1). Empty when it has neither.
std::optional<IpAddress> interface_address(const LocalInterface& iface);

// One configuration setting and where it came from, to name it in messages: an environment
// variable ("SOFTRDMA_IP") or a command-line flag ("--ip").
struct Setting {
  const char* name = nullptr;
  const char* value = nullptr;  // null or empty: not set
  bool is_set() const { return value != nullptr && *value != '\0'; }
  std::string quoted() const;  // SOFTRDMA_IP='x' or --ip 'x'
};

struct AddressRequest {
  Setting ip;      // an address
  Setting netdev;  // an interface whose address to take
};
AddressRequest environment_request();  // SOFTRDMA_IP and SOFTRDMA_NETDEV

struct AddressChoice {
  // The address to bind; empty with no error when nothing is configured: the first free
  // 127.0.0.N.
  std::optional<IpAddress> address;
  std::string error;  // when the configuration is unusable: one line saying why, naming it
  bool ok() const { return error.empty(); }
};

// What `request` asks for. Both an address and an interface is refused rather than one
// silently winning. `interfaces` is the machine's (local_interfaces()), or a test's.
AddressChoice choose_address(const AddressRequest& request, const std::vector<LocalInterface>& interfaces);
// The same against this machine's interfaces, listed only when an interface is named.
AddressChoice choose_address(const AddressRequest& request);

}  // namespace softrdma::shim
