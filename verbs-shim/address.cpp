#include "verbs-shim/address.hpp"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

namespace softrdma::shim {

namespace {

bool is_zero(const IpAddress& a) {
  return std::all_of(a.bytes.begin(), a.bytes.end(), [](std::uint8_t b) { return b == 0; });
}

bool is_link_local_v6(const IpAddress& a) { return a.bytes[0] == 0xfe && (a.bytes[1] & 0xc0) == 0x80; }  // fe80::/10

constexpr IpAddress kIpv6Loopback{{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1}};

// A getifaddrs address or netmask in IpAddress form; an IPv4 netmask gets the 96 ones of the
// mapped prefix in front, so one byte-wise comparison serves both families.
std::optional<IpAddress> from_sockaddr(const sockaddr* sa, bool is_mask) {
  if (sa == nullptr) return std::nullopt;
  IpAddress out;
  if (sa->sa_family == AF_INET) {
    sockaddr_in in;
    std::memcpy(&in, sa, sizeof in);
    out = IpAddress::v4(0, 0, 0, 0);
    if (is_mask) std::fill_n(out.bytes.begin(), 10, 0xff);
    std::memcpy(out.bytes.data() + 12, &in.sin_addr, 4);
    return out;
  }
  if (sa->sa_family == AF_INET6) {
    sockaddr_in6 in6;
    std::memcpy(&in6, sa, sizeof in6);
    std::memcpy(out.bytes.data(), &in6.sin6_addr, 16);
    return out;
  }
  return std::nullopt;
}

LocalInterface& interface_named(std::vector<LocalInterface>& list, const char* name) {
  auto it = std::find_if(list.begin(), list.end(), [&](const LocalInterface& i) { return i.name == name; });
  if (it != list.end()) return *it;
  return list.emplace_back(LocalInterface{name, static_cast<int>(::if_nametoindex(name)), {}});
}

AddressChoice refuse(std::string error) {
  AddressChoice c;
  c.error = std::move(error);
  return c;
}

AddressChoice address_choice(const Setting& ip) {
  const std::optional<IpAddress> parsed = parse_address(ip.value);
  if (!parsed) return refuse(ip.quoted() + " is not an IPv4 or IPv6 address");
  if (std::string why = why_unusable(*parsed); !why.empty()) return refuse(ip.quoted() + " " + why);
  return {parsed, {}};
}

AddressChoice netdev_choice(const Setting& netdev, const std::vector<LocalInterface>& interfaces) {
  auto it = std::find_if(interfaces.begin(), interfaces.end(),
                         [&](const LocalInterface& i) { return i.name == netdev.value; });
  if (it == interfaces.end()) return refuse(netdev.quoted() + ": no such network interface");
  std::optional<IpAddress> address = interface_address(*it);
  if (!address) return refuse(netdev.quoted() + ": the interface has no IPv4 or global IPv6 address");
  return {address, {}};
}

}  // namespace

std::optional<IpAddress> parse_address(std::string_view text) {
  // inet_pton is the strict parser: AF_INET takes exactly four decimal parts, each 0..255.
  char buf[INET6_ADDRSTRLEN];
  if (text.empty() || text.size() >= sizeof buf) return std::nullopt;
  text.copy(buf, text.size());
  buf[text.size()] = '\0';
  IpAddress out = IpAddress::v4(0, 0, 0, 0);
  if (inet_pton(AF_INET, buf, out.bytes.data() + 12) == 1) return out;
  if (inet_pton(AF_INET6, buf, out.bytes.data()) == 1) return out;  // ::ffff:a.b.c.d comes out as IPv4
  return std::nullopt;
}

std::string to_string(const IpAddress& address) {
  char buf[INET6_ADDRSTRLEN];
  if (address.is_v4()) {
    inet_ntop(AF_INET, address.bytes.data() + 12, buf, sizeof buf);
  } else {
    inet_ntop(AF_INET6, address.bytes.data(), buf, sizeof buf);
  }
  return buf;
}

std::string why_unusable(const IpAddress& address) {
  if (address.is_v4()) {
    const bool unspecified = address == IpAddress::v4(0, 0, 0, 0);
    return unspecified || address.bytes[12] >= 224 ? "is not a unicast IPv4 address" : "";
  }
  if (is_zero(address) || address.bytes[0] == 0xff) return "is not a unicast IPv6 address";
  if (is_link_local_v6(address)) {
    return "is a link-local IPv6 address, which works only with an interface scope that a GID cannot carry; use a "
           "global or unique-local one";
  }
  return "";
}

std::vector<LocalInterface> local_interfaces() {
  std::vector<LocalInterface> list;
  ifaddrs* all = nullptr;
  if (::getifaddrs(&all) != 0) return list;
  // Every interface has an AF_PACKET entry, so one without addresses is listed too.
  for (const ifaddrs* it = all; it != nullptr; it = it->ifa_next) {
    LocalInterface& iface = interface_named(list, it->ifa_name);
    const std::optional<IpAddress> address = from_sockaddr(it->ifa_addr, false);
    if (!address) continue;
    const std::optional<IpAddress> mask = from_sockaddr(it->ifa_netmask, true);
    IpAddress all_ones;
    all_ones.bytes.fill(0xff);
    iface.prefixes.push_back({*address, mask.value_or(all_ones)});
  }
  ::freeifaddrs(all);
  return list;
}

std::optional<IpAddress> interface_address(const LocalInterface& iface) {
  std::optional<IpAddress> v6;
  for (const LocalInterface::Prefix& p : iface.prefixes) {
    if (!why_unusable(p.address).empty()) continue;
    if (p.address.is_v4()) return p.address;
    if (!v6 && p.address != kIpv6Loopback) v6 = p.address;
  }
  return v6;
}

std::string Setting::quoted() const {
  const std::string v = value != nullptr ? value : "";
  return name[0] == '-' ? std::string(name) + " '" + v + "'" : std::string(name) + "='" + v + "'";
}

AddressRequest environment_request() {
  return {{kAddressVariable, std::getenv(kAddressVariable)}, {kNetdevVariable, std::getenv(kNetdevVariable)}};
}

AddressChoice choose_address(const AddressRequest& request, const std::vector<LocalInterface>& interfaces) {
  if (request.ip.is_set() && request.netdev.is_set()) {
    return refuse(std::string(request.ip.name) + " and " + request.netdev.name +
                  " are both set: choose one (an address, or an interface whose address to take)");
  }
  if (request.ip.is_set()) return address_choice(request.ip);
  if (request.netdev.is_set()) return netdev_choice(request.netdev, interfaces);
  return {};
}

AddressChoice choose_address(const AddressRequest& request) {
  return choose_address(request, request.netdev.is_set() ? local_interfaces() : std::vector<LocalInterface>{});
}

}  // namespace softrdma::shim
