#include "verbs-shim/sysfs_files.hpp"

#include <cstdio>

#include "verbs-shim/attributes.hpp"
#include "verbs-shim/identity.hpp"

namespace softrdma::shim {

namespace {

// GUIDs and GIDs as sysfs prints them: groups of four hex digits ("0200:7fff:fe00:0001").
template <std::size_t N>
std::string hex_groups(const std::array<std::uint8_t, N>& bytes) {
  std::string out;
  for (std::size_t i = 0; i < N; i += 2) {
    char group[6];
    std::snprintf(group, sizeof group, "%s%02x%02x", i == 0 ? "" : ":", bytes[i], bytes[i + 1]);
    out += group;
  }
  return out + "\n";
}

}  // namespace

std::vector<SysfsFile> sysfs_files(const SysfsFacts& facts) {
  const bool iwarp = facts.transport == Transport::iwarp;
  std::vector<SysfsFile> files = {
      // Node type 4 is an RNIC, what the kernel shows for siw.
      {"node_type", iwarp ? "4: RNIC\n" : "1: CA\n"},
      {"node_desc", std::string("softrdma ") + (iwarp ? kIwarpDeviceName : kDeviceName) + "\n"},
      {"fw_ver", std::string(kFirmwareVersion) + "\n"},
      {"board_id", "SOFTRDMA\n"},    // ibv_devinfo prints it
      {"device/numa_node", "-1\n"},  // software: no node is nearer than another
      // What port_attr() and ibv_query_gid_type say (a test keeps them together).
      {"ports/1/state", "4: ACTIVE\n"},
      {"ports/1/phys_state", "5: LinkUp\n"},
      {"ports/1/link_layer", "Ethernet\n"},
      {"ports/1/gid_attrs/types/0", iwarp ? "IB/RoCE v1\n" : "RoCE v2\n"},
  };
  if (facts.address) {
    const DeviceIdentity id =
        iwarp ? make_iwarp_identity(*facts.address, std::nullopt) : make_identity(*facts.address, std::nullopt);
    files.push_back({"node_guid", hex_groups(id.guid)});
    files.push_back({"sys_image_guid", hex_groups(id.guid)});
    // Empty entries read as the zero GID, as the kernel shows them; siw's table holds one.
    const std::size_t gids = iwarp ? 1 : id.gids.size();
    for (std::size_t i = 0; i < gids; ++i)
      files.push_back({"ports/1/gids/" + std::to_string(i), hex_groups(id.gids[i])});
  }
  if (!facts.netdev.empty()) {
    files.push_back({"device/net/" + facts.netdev + "/", ""});
    files.push_back({"ports/1/gid_attrs/ndevs/0", facts.netdev + "\n"});
  }
  return files;
}

}  // namespace softrdma::shim
