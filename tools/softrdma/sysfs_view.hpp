// The file-system view of srdma0's sysfs directory (and srdmaiw0's, when SOFTRDMA_IWARP=1 lists
// it) that `softrdma run` gives a program. There is
// no /sys/class/infiniband without a kernel RDMA stack, yet programs read it directly rather
// than ask the verbs: rdma-core's tests look for the device's network interface there (with
// `ls` in a child process), UCX reads a GID's interface and type. libsoftrdma_sysfs.so
// (verbs-shim/sysfs_view/), appended to LD_PRELOAD, shows the tree write_sysfs_tree made in its
// place, to the program and to every child that inherits the environment.
#pragma once

#include <optional>
#include <string>

#include "tools/softrdma/sysfs_tree.hpp"
#include "verbs-shim/sysfs_files.hpp"

namespace softrdma::run {

inline constexpr const char* kSysfsLibrary = "libsoftrdma_sysfs.so";

// What is known of the device before the program starts, from the environment `run` set:
// the daemon's address (asked of softrdmad), SOFTRDMA_IP's or SOFTRDMA_NETDEV's; the interface
// holding it (an embedded device with no address takes a 127.0.0.N: loopback's).
shim::SysfsFacts known_facts();

// The machine's folders whose entries the tree links to: the real ones when the program's
// libibverbs lists the machine's devices (SOFTRDMA_REAL_DEVICES unset, first or after), none
// when it hides them (hide, or a value it does not know).
std::optional<RealFolders> real_folders();

// Writes the tree and sets LD_PRELOAD and SOFTRDMA_SYSFS_ROOT for the program, the library
// being in LIB_DIR. Returns why there is no view (the program then runs without it), or empty.
std::string offer_sysfs_view(const std::string& lib_dir);

}  // namespace softrdma::run
