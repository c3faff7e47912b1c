// The files of srdma0's directory /sys/class/infiniband/srdma0, as the kernel writes them for a
// RoCE device, and of srdmaiw0's, as it writes them for Linux siw. One list serves the shim's ibv_read_sysfs_file
// (sysfs.cpp) and the tree that `softrdma run` writes for its file-system view (tools/softrdma/sysfs_view.hpp), so the
// two never disagree.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "verbs-shim/address.hpp"
#include "verbs-shim/identity.hpp"

namespace softrdma::shim {

// What is known of the device. Before exec, `softrdma run` may not know the address (an
// embedded device takes the first free 127.0.0.N when it starts): files that depend on an
// unknown fact are left out rather than guessed.
struct SysfsFacts {
  std::optional<IpAddress> address;       // the bound address: node GUID and GIDs
  std::string netdev;                     // the interface holding it (GID 0's ndev); empty: unknown
  Transport transport = Transport::roce;  // srdma0's files, or srdmaiw0's
};

struct SysfsFile {
  std::string path;     // relative to the device's directory; a trailing '/' names a directory
  std::string content;  // with the kernel's trailing newline; empty for a directory
};

std::vector<SysfsFile> sysfs_files(const SysfsFacts& facts);

}  // namespace softrdma::shim
