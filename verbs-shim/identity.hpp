// Who the device is: its name, GUIDs, GID table and port MTU, all derived from the bound
// address so that two processes on different addresses look like two different NICs.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <vector>

#include "verbs-shim/address.hpp"

namespace softrdma::shim {

inline constexpr const char* kDeviceName = "srdma0";
inline constexpr int kDeviceIndex = 0;
inline constexpr const char* kIwarpDeviceName = "srdmaiw0";
inline constexpr int kIwarpDeviceIndex = 1;
// A device's dev_name, its node under /dev/infiniband, is this prefix and its name.
inline constexpr const char* kDevNamePrefix = "uverbs_";
inline constexpr int kGidTableLength = 16;  // DeviceLimits::gid_table_len in emulator/core

using Gid = std::array<std::uint8_t, 16>;
using Guid = std::array<std::uint8_t, 8>;  // big-endian, as ibv_get_device_guid returns it

// The RoCEv2 GID of an address: for IPv4 the IPv4-mapped ::ffff:a.b.c.d, for IPv6 the
// address itself (IBTA annex A17.4.5.1); IpAddress already holds that form.
Gid roce_v2_gid(const IpAddress& address);

// Node GUID: core::node_guid of the address's GID (emulator/core/node_guid.hpp), big-endian.
Guid node_guid(const IpAddress& address);

// The interface that holds the address, if any: its index (GID entries report it as
// ndev_ifindex) and its MTU.
struct Interface {
  int index = 0;
  unsigned mtu = 0;
};
// An exact address match wins; otherwise an interface whose prefix contains the address
// (127.0.0.5 belongs to lo's 127.0.0.0/8 although only 127.0.0.1 is listed). Null for none.
const LocalInterface* interface_holding(const IpAddress& address, const std::vector<LocalInterface>& interfaces);
std::optional<Interface> find_interface(const IpAddress& address);  // among this machine's

// Largest IB MTU (256..4096) whose RoCEv2 packets fit an IP MTU of `ip_mtu` bytes: the IP
// header (IPv4 20, IPv6 40) + UDP 8 + BTH 12 + the largest extended headers 28 (AtomicETH) +
// ICRC 4 around the payload. 1500 gives 1024 and loopback's 65536 gives 4096, as rxe reports;
// IPv6 needs 20 bytes more (4096 + 72 gives 4096 over IPv4, 2048 over IPv6). Unknown (0)
// gives 1024.
unsigned ib_mtu_bytes_for(unsigned ip_mtu, bool ipv4);

enum class Transport : std::uint8_t { roce, iwarp };

struct DeviceIdentity {
  Transport transport = Transport::roce;
  IpAddress address;
  Guid guid{};
  std::array<Gid, kGidTableLength> gids{};  // all-zero entries are empty
  unsigned active_mtu_bytes = 1024;
  int ifindex = 0;  // 0 when no local interface holds the address
};

// Pure: everything but the interface facts, which come in as an argument. The GID table
// holds exactly the bound address, at index 0: the device has one socket on one address, and
// a GID it could not receive on would only mislead.
DeviceIdentity make_identity(const IpAddress& address, std::optional<Interface> iface);
// The iWARP device on the same address, identified as Linux siw identifies itself: by a MAC,
// whose EUI-64 is the node GUID and which, zero-padded, is GID 0 (iWARP addresses by IP, not
// GID). The MAC is the RoCE device's with the 0x04 bit of its first octet set (06:00:7f:00:00:01
// for 127.0.0.1), so the two devices' GUIDs differ, as rdma_cm tells devices apart by GUID.
DeviceIdentity make_iwarp_identity(const IpAddress& address, std::optional<Interface> iface);

// The identity of this process's device, or null when it has none (host_link.hpp).
const DeviceIdentity* device_identity();

}  // namespace softrdma::shim
