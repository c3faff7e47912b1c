// The node GUID a device derives from its RoCEv2 GID, so that two devices on different
// addresses look like two NICs: the EUI-64 of a locally administered MAC (FF:FE inserted in
// the middle, no bit flipping: IB GUIDs are EUI-64s, not IPv6 interface IDs).
// - IPv4 a.b.c.d (GID ::ffff:a.b.c.d): the MAC 02:00:a:b:c:d. 127.0.0.1 gives 0200:7fff:fe00:0001.
// - IPv6: the MAC made of the address's low 48 bits, with the locally administered bit (0x02)
//   set and the group bit (0x01) cleared in its first octet. fd53:7264:6d61::1 gives
//   0200:00ff:fe00:0001.
// The 0x02 bit keeps it out of every vendor's IEEE-assigned range.
#pragma once

#include <cstdint>

#include "emulator/core/roce_headers.hpp"
#include "emulator/core/verbs_types.hpp"

namespace softrdma::core {

inline std::uint64_t node_guid(const Gid& gid) {
  const bool v4 = is_ipv4_mapped(gid);
  const std::uint8_t first = v4 ? 0x02 : static_cast<std::uint8_t>((gid[10] | 0x02) & ~0x01);
  const std::uint8_t second = v4 ? 0x00 : gid[11];
  const std::uint8_t bytes[8] = {first, second, gid[12], 0xff, 0xfe, gid[13], gid[14], gid[15]};
  std::uint64_t guid = 0;
  for (const std::uint8_t b : bytes) guid = (guid << 8) | b;
  return guid;
}

}  // namespace softrdma::core
