// The attribute structs the query verbs return, built from the device identity and the
// engine's limits (emulator/core DeviceConfig / DeviceLimits defaults).
#pragma once

#include "emulator/core/multicast_groups.hpp"
#include "verbs-shim/identity.hpp"
#include "verbs-shim/verbs_api.hpp"

namespace softrdma::shim {

// IEEE assigns vendor ids (OUIs) with the locally-administered bit (0x02 of the first octet)
// clear, so an id with it set belongs to no NIC vendor; "SR" fills the rest. It must not be 0:
// rdma-core's test_query_device asserts vendor_id != 0. Mellanox (0x02c9) or Amazon (0x1d0f)
// ids, or a ConnectX/EFA part id, would send perftest and the rdma-core tests down vendor
// paths (mlx5dv_*/efadv_* calls on our context; verbs-abi.md §8.11).
inline constexpr std::uint32_t kVendorId = 0x025352;
inline constexpr std::uint32_t kVendorPartId = 0x5352;
inline constexpr const char* kFirmwareVersion = "softrdma 0.1.0";
inline constexpr std::uint8_t kPortNum = 1;  // the device's only port
inline constexpr std::uint16_t kDefaultPkey = 0xffff;

// What the device's link (host::DeviceLink) can serve: multicast groups, XRC, tag matching.
struct LinkOffers {
  core::MulticastLimits mcast;
  bool xrc = false;
  core::TmCaps tm;
};

ibv_device_attr device_attr(const DeviceIdentity& id, const LinkOffers& link);
ibv_device_attr_ex device_attr_ex(const DeviceIdentity& id, const LinkOffers& link);
ibv_port_attr port_attr(const DeviceIdentity& id);

// IB MTU enum for a byte count (256..4096).
ibv_mtu mtu_enum(unsigned bytes);

}  // namespace softrdma::shim
