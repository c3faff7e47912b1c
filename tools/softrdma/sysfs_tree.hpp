// The tree `softrdma run` writes for its sysfs view: srdma0's files (verbs-shim/sysfs_files.hpp)
// at ROOT/class/infiniband/srdma0/ (and srdmaiw0's beside them when it is listed), ROOT/class
// standing for /sys/class, and srdma0's device node at ROOT/dev/infiniband/, standing for
// /dev/infiniband (verbs-shim/sysfs_view/view_path.h).
//
// softrdma run execs the program, so nothing is left to remove the tree when it ends. It lives
// instead in the runtime directory (emulator/host/runtime_dir.hpp) under a name made from its
// content, sysfs-HASH, and every run with the same content uses the same one; the program holds
// it (sysfs_tree_lock.hpp), and a later run removes the trees no program holds. A tree is written
// under a temporary name and renamed into place, so no reader sees half of one; a tree found in
// place is used only if it still holds every file with its content (/tmp's cleaning removes
// files one by one).
//
// softrdma's libibverbs lists the machine's own RDMA devices (rxe0, mlx5_0) beside its own
// unless SOFTRDMA_REAL_DEVICES=hide, and the view hides the real folders, so the tree then holds
// a link to every entry of them: a program reading sysfs directly finds those devices too.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "verbs-shim/sysfs_files.hpp"

namespace softrdma::run {

struct SysfsTree {
  std::string root;   // absolute
  std::string error;  // when there is no tree: one line saying why
  int lock = -1;      // the descriptor holding the tree, to be left open across exec
};
// The machine's folders that the view hides, whose entries the tree links to. A test gives
// folders of its own: a machine without a kernel RDMA stack has none.
struct RealFolders {
  std::string infiniband_class = "/sys/class/infiniband";
  std::string verbs_class = "/sys/class/infiniband_verbs";
  std::string devices = "/dev/infiniband";
};

// `iwarp_files`: srdmaiw0's, none when it is not listed. `real`: the folders whose entries are
// linked, none when the program does not list the machine's devices.
SysfsTree write_sysfs_tree(const std::vector<shim::SysfsFile>& files,
                           const std::vector<shim::SysfsFile>& iwarp_files = {},
                           const std::optional<RealFolders>& real = std::nullopt);

}  // namespace softrdma::run
