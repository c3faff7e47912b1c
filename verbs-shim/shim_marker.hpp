// A byte string that only softrdma's libibverbs.so.1 contains. The library has rdma-core's
// soname and export table by design, so `softrdma run` looks for this string before it puts a
// folder on LD_LIBRARY_PATH: it must never hand a program rdma-core's own library (e.g. a
// SOFTRDMA_LIB_DIR or a relative path that lands on /usr/lib) while claiming it is softrdma.
#pragma once

#define SOFTRDMA_SHIM_MARKER "softrdma-verbs-shim: not rdma-core's libibverbs"
