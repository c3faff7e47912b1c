#include "verbs-shim/identity.hpp"

#include <net/if.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "emulator/core/node_guid.hpp"

namespace softrdma::shim {

Gid roce_v2_gid(const IpAddress& address) { return address.bytes; }

Guid node_guid(const IpAddress& address) {
  const std::uint64_t guid = core::node_guid(address.bytes);
  Guid out{};
  for (std::size_t i = 0; i < out.size(); ++i) out[i] = static_cast<std::uint8_t>(guid >> (8 * (out.size() - 1 - i)));
  return out;
}

namespace {

unsigned interface_mtu(const std::string& name) {
  int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return 0;
  ifreq req{};
  std::strncpy(req.ifr_name, name.c_str(), IFNAMSIZ - 1);
  unsigned mtu = ::ioctl(fd, SIOCGIFMTU, &req) == 0 && req.ifr_mtu > 0 ? static_cast<unsigned>(req.ifr_mtu) : 0;
  ::close(fd);
  return mtu;
}

bool in_prefix(const IpAddress& address, const LocalInterface::Prefix& p) {
  for (std::size_t i = 0; i < address.bytes.size(); ++i) {
    if (((address.bytes[i] ^ p.address.bytes[i]) & p.mask.bytes[i]) != 0) return false;
  }
  return true;
}

}  // namespace

const LocalInterface* interface_holding(const IpAddress& address, const std::vector<LocalInterface>& interfaces) {
  const LocalInterface* subnet = nullptr;
  for (const LocalInterface& iface : interfaces) {
    for (const LocalInterface::Prefix& p : iface.prefixes) {
      if (p.address == address) return &iface;
      if (subnet == nullptr && in_prefix(address, p)) subnet = &iface;
    }
  }
  return subnet;
}

std::optional<Interface> find_interface(const IpAddress& address) {
  const std::vector<LocalInterface> interfaces = local_interfaces();
  const LocalInterface* hit = interface_holding(address, interfaces);
  if (hit == nullptr) return std::nullopt;
  return Interface{hit->index, interface_mtu(hit->name)};
}

unsigned ib_mtu_bytes_for(unsigned ip_mtu, bool ipv4) {
  const unsigned overhead = (ipv4 ? 20 : 40) + 8 + 12 + 28 + 4;
  if (ip_mtu == 0) return 1024;
  for (unsigned mtu = 4096; mtu > 256; mtu /= 2) {
    if (mtu + overhead <= ip_mtu) return mtu;
  }
  return 256;
}

DeviceIdentity make_identity(const IpAddress& address, std::optional<Interface> iface) {
  DeviceIdentity id;
  id.address = address;
  id.guid = node_guid(address);
  id.gids[0] = roce_v2_gid(address);
  id.active_mtu_bytes = ib_mtu_bytes_for(iface ? iface->mtu : 0, address.is_v4());
  id.ifindex = iface ? iface->index : 0;
  return id;
}

DeviceIdentity make_iwarp_identity(const IpAddress& address, std::optional<Interface> iface) {
  DeviceIdentity id = make_identity(address, iface);
  id.transport = Transport::iwarp;
  id.guid = node_guid(address);
  id.guid[0] |= 0x04;  // another locally administered MAC than the RoCE device's
  const std::array<std::uint8_t, 6> mac = {id.guid[0], id.guid[1], id.guid[2], id.guid[5], id.guid[6], id.guid[7]};
  id.gids = {};
  std::copy(mac.begin(), mac.end(), id.gids[0].begin());
  // siw's active MTU is the interface's, as an IB MTU (1500 gives 1024, loopback 4096).
  const unsigned ip_mtu = iface ? iface->mtu : 0;
  id.active_mtu_bytes = 1024;
  for (unsigned mtu = 4096; mtu > 1024; mtu /= 2) {
    if (ip_mtu >= mtu) {
      id.active_mtu_bytes = mtu;
      break;
    }
  }
  return id;
}

}  // namespace softrdma::shim
