/* Where a path lies in the file-system view of srdma0's sysfs directory and device node that
 * `softrdma run` gives programs: a path under /sys/class/infiniband or
 * /sys/class/infiniband_verbs is the same path under $SOFTRDMA_SYSFS_ROOT/class, one under
 * /dev/infiniband the same under $SOFTRDMA_SYSFS_ROOT/dev, in the tree softrdma run wrote
 * (tools/softrdma/sysfs_tree.hpp); every other path is itself. */
#pragma once

#define SOFTRDMA_SYSFS_ROOT_VARIABLE "SOFTRDMA_SYSFS_ROOT"

#ifdef __cplusplus
extern "C" {
#endif

/* PATH itself when it is outside the view, or the variable is unset or empty. Otherwise OUT
 * (PATH_MAX bytes) holding the path in the tree, or NULL with errno ENAMETOOLONG when that
 * does not fit. Only absolute paths are in the view; repeated slashes and "." and ".."
 * components are resolved first (a ".." leaving the view makes the path an outside one).
 * Allocates nothing, and reads the variable only for a path in the view. */
const char *softrdma_view_path(const char *path, char *out);

#ifdef __cplusplus
}
#endif
