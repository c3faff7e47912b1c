#include "verbs-shim/identity.hpp"

#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>

namespace softrdma::shim {

Gid roce_v2_gid(const Ipv4& address) {
  Gid gid{};
  gid[10] = 0xff;
  gid[11] = 0xff;
  for (std::size_t i = 0; i < 4; ++i) gid[12 + i] = address.bytes[i];
  return gid;
}

Guid node_guid(const Ipv4& address) {
  const auto& a = address.bytes;
  return Guid{0x02, 0x00, a[0], 0xff, 0xfe, a[1], a[2], a[3]};
}

namespace {

unsigned interface_mtu(const char* name) {
  int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return 0;
  ifreq req{};
  std::strncpy(req.ifr_name, name, IFNAMSIZ - 1);
  unsigned mtu = ::ioctl(fd, SIOCGIFMTU, &req) == 0 && req.ifr_mtu > 0 ? static_cast<unsigned>(req.ifr_mtu) : 0;
  ::close(fd);
  return mtu;
}

}  // namespace

std::optional<Interface> find_interface(const Ipv4& address) {
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) return std::nullopt;
  std::uint32_t want;
  std::memcpy(&want, address.bytes.data(), 4);
  // An exact address match wins; otherwise an interface whose subnet contains the address
  // (127.0.0.5 belongs to lo's 127.0.0.0/8 although only 127.0.0.1 is listed).
  const ifaddrs* exact = nullptr;
  const ifaddrs* subnet = nullptr;
  for (const ifaddrs* it = list; it != nullptr; it = it->ifa_next) {
    if (it->ifa_addr == nullptr || it->ifa_addr->sa_family != AF_INET) continue;
    sockaddr_in addr;
    std::memcpy(&addr, it->ifa_addr, sizeof addr);
    std::uint32_t mask = 0xffffffffu;
    if (it->ifa_netmask != nullptr) {
      sockaddr_in m;
      std::memcpy(&m, it->ifa_netmask, sizeof m);
      mask = m.sin_addr.s_addr;
    }
    if (addr.sin_addr.s_addr == want && exact == nullptr) exact = it;
    if (((addr.sin_addr.s_addr ^ want) & mask) == 0 && subnet == nullptr) subnet = it;
  }
  const ifaddrs* hit = exact != nullptr ? exact : subnet;
  std::optional<Interface> out;
  if (hit != nullptr) {
    out = Interface{static_cast<int>(::if_nametoindex(hit->ifa_name)), interface_mtu(hit->ifa_name)};
  }
  ::freeifaddrs(list);
  return out;
}

unsigned ib_mtu_bytes_for(unsigned ip_mtu) {
  constexpr unsigned kOverhead = 20 + 8 + 12 + 28 + 4;
  if (ip_mtu == 0) return 1024;
  for (unsigned mtu = 4096; mtu > 256; mtu /= 2) {
    if (mtu + kOverhead <= ip_mtu) return mtu;
  }
  return 256;
}

DeviceIdentity make_identity(const Ipv4& address, std::optional<Interface> iface) {
  DeviceIdentity id;
  id.address = address;
  id.guid = node_guid(address);
  id.gids[0] = roce_v2_gid(address);
  id.active_mtu_bytes = ib_mtu_bytes_for(iface ? iface->mtu : 0);
  id.ifindex = iface ? iface->index : 0;
  return id;
}

}  // namespace softrdma::shim
