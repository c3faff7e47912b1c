// The C API softrdma's librdmacm.so.1 implements: rdma-core 44's <rdma/rdma_cma.h>,
// <rdma/rdma_verbs.h> and <rdma/rsocket.h>, and the macro that puts each definition at its
// exact ELF symbol version (verbs-abi.md §2.2: 68 names, all default versions, in the nodes
// RDMACM_1.0 <- 1.1 <- 1.2 <- 1.3; librdmacm.map lists them).
//
// This header does not include ../verbs_api.hpp: that one #undefs verbs.h's inline wrappers
// (ibv_query_port, ibv_reg_mr) for the verbs library, which defines the real functions. The
// connection manager calls verbs through the public API, as rdma-core's librdmacm does, and
// keeps the wrappers.
#pragma once

#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>
#include <rdma/rsocket.h>

// Every exported definition carries default visibility: the library is compiled with
// -fvisibility=hidden, and the version script can only publish what the object file left
// visible.
#define SRDMA_CM_EXPORT __attribute__((visibility("default")))

#if defined(__has_attribute) && __has_attribute(symver)
#define SRDMA_CM_SYMVER_ATTR(versioned) __attribute__((symver(versioned)))
#define SRDMA_CM_SYMVER_ASM(internal, versioned)
#else  // clang has no symver attribute; a top-level .symver directive does the same
#define SRDMA_CM_SYMVER_ATTR(versioned)
#define SRDMA_CM_SYMVER_ASM(internal, versioned) __asm__(".symver " #internal ", " versioned);
#endif

// Declares `srdma_rdmacm_NAME` with exactly the type rdma-core's headers give NAME (so a
// definition with another signature does not compile) and binds it as NAME@@NODE, the default
// version programs link against. The definition follows the macro:
//
//   SRDMA_RDMACM_VERSION(rdma_event_str, "RDMACM_1.0")
//   const char* srdma_rdmacm_rdma_event_str(rdma_cm_event_type event) { ... }
//
// Each of librdmacm's names is in exactly one node, so a plain definition plus the version
// script would do too; binding explicitly keeps the node next to the code (as verbs_api.hpp's
// SRDMA_DEFAULT_VERSION does), and the internal name stays out of the dynamic table because
// the script ends in `local: *`.
#define SRDMA_RDMACM_VERSION(name, node)                                                                 \
  extern "C" SRDMA_CM_EXPORT SRDMA_CM_SYMVER_ATTR(#name "@@" node) decltype(::name) srdma_rdmacm_##name; \
  SRDMA_CM_SYMVER_ASM(srdma_rdmacm_##name, #name "@@" node)
