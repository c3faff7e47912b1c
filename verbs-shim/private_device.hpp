// The one export of softrdma's libibverbs.so.1 that rdma-core's does not have: how softrdma's
// librdmacm.so.1 reaches the device's connection manager. It lives in a version node of its
// own (SOFTRDMA_PRIVATE_1) that no program links against; the export-table check leaves it out.
#pragma once

#include "emulator/host/device_link.hpp"

namespace softrdma::shim {

struct PrivateDevice {
  host::DeviceLink* link = nullptr;  // null when the device could not start
  const char* address = nullptr;     // the address it holds ("127.0.0.2"), with a link
  const char* error = nullptr;       // without one: one line saying why
  bool iwarp = false;                // srdmaiw0: connections through its iWARP CM
};

}  // namespace softrdma::shim

extern "C" {
// Starts the process's device, binding `preferred_ip` if the device has not started yet and
// SOFTRDMA_IP / SOFTRDMA_NETDEV choose nothing (rdma_bind_addr to an address in embedded mode);
// null: the usual choice. Returns the device, started or not, whatever it holds: srdma0, or
// srdmaiw0 on its address while SOFTRDMA_IWARP=1 lists it (host_link.hpp).
const softrdma::shim::PrivateDevice* softrdma_private_device(const char* preferred_ip);
}
