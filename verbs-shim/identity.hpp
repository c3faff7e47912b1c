// Who the device is: its name, GUIDs, GID table and port MTU, all derived from the bound
// address so that two processes on different addresses look like two different NICs.
#pragma once

#include <array>
#include <cstdint>
#include <optional>

#include "verbs-shim/address.hpp"

namespace softrdma::shim {

inline constexpr const char* kDeviceName = "srdma0";
inline constexpr int kDeviceIndex = 0;
inline constexpr int kGidTableLength = 16;  // DeviceLimits::gid_table_len in emulator/core

using Gid = std::array<std::uint8_t, 16>;
using Guid = std::array<std::uint8_t, 8>;  // big-endian, as ibv_get_device_guid returns it

// The RoCEv2 GID of an IPv4 address is its IPv4-mapped IPv6 address, ::ffff:a.b.c.d.
Gid roce_v2_gid(const Ipv4& address);

// Node GUID: the EUI-64 of the locally administered MAC 02:00:a:b:c:d (FF:FE inserted in the
// middle, no bit flipping: IB GUIDs are EUI-64s, not IPv6 interface ids). 127.0.0.1 gives
// 0200:7fff:fe00:0001. The 0x02 bit keeps it out of every vendor's IEEE-assigned range.
Guid node_guid(const Ipv4& address);

// The interface that holds the address, if any: its index (GID entries report it as
// ndev_ifindex) and its MTU.
struct Interface {
  int index = 0;
  unsigned mtu = 0;
};
std::optional<Interface> find_interface(const Ipv4& address);

// Largest IB MTU (256..4096) whose RoCEv2 packets fit an IP MTU of `ip_mtu` bytes: IPv4 20 +
// UDP 8 + BTH 12 + the largest extended headers 28 (AtomicETH) + ICRC 4 around the payload.
// 1500 gives 1024 and loopback's 65536 gives 4096, as rxe reports. Unknown (0) gives 1024.
unsigned ib_mtu_bytes_for(unsigned ip_mtu);

struct DeviceIdentity {
  Ipv4 address;
  Guid guid{};
  std::array<Gid, kGidTableLength> gids{};  // all-zero entries are empty
  unsigned active_mtu_bytes = 1024;
  int ifindex = 0;  // 0 when no local interface holds the address
};

// Pure: everything but the interface facts, which come in as an argument.
DeviceIdentity make_identity(const Ipv4& address, std::optional<Interface> iface);

// The identity of this process's device, or null when it has none (host_link.hpp).
const DeviceIdentity* device_identity();

}  // namespace softrdma::shim
