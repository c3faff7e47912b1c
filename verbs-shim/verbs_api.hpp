// The C API the shim implements: rdma-core 44's <infiniband/verbs.h> plus the few declarations
// that rdma-core keeps in its private, uninstalled headers, and the macros that put each
// definition at its exact ELF symbol version (verbs-abi.md §2, §8).
#pragma once

#include <infiniband/verbs.h>

#include <cstddef>
#include <cstdint>

// verbs.h turns these three calls into inline wrappers (verbs-abi.md §3.4). The shim defines
// the real exported functions, so the names must be plain identifiers here.
#undef ibv_query_port
#undef ibv_reg_mr
#undef ibv_reg_mr_iova

// From rdma-core's private driver.h (not installed): ibv_devinfo and pyverbs import
// ibv_query_gid_type@IBVERBS_PRIVATE_34 and print "RoCE v1"/"RoCE v2" from this enum.
enum ibv_gid_type_sysfs {
  IBV_GID_TYPE_SYSFS_IB_ROCE_V1 = 0,
  IBV_GID_TYPE_SYSFS_ROCE_V2 = 1,
};

extern "C" {
int ibv_query_gid_type(struct ibv_context* context, std::uint8_t port_num, unsigned int index,
                       enum ibv_gid_type_sysfs* type);
// Exported at IBVERBS_1.0 but no longer declared in the installed headers; real librdmacm
// calls both (verbs-abi.md §6).
const char* ibv_get_sysfs_path(void);
int ibv_read_sysfs_file(const char* dir, const char* file, char* buf, std::size_t size);
}

// Every exported definition carries default visibility: the shim is compiled with
// -fvisibility=hidden, and the version script (libibverbs.map) can only publish what the
// object file left visible.
#define SRDMA_EXPORT __attribute__((visibility("default")))

// A name listed in two version nodes (e.g. ibv_open_device in IBVERBS_1.0 and 1.1) must be
// bound explicitly: a plain definition would attach to the *first* node, the compat one
// (verbs-abi.md §8.3). So the implementation gets an internal name, and the assembler is
// told which versioned name it provides. `@@` is the default version new links bind to;
// `@` is a compat version that only old binaries reference. The internal names stay out of
// the dynamic table because the version script ends in `local: *`.
#if defined(__has_attribute) && __has_attribute(symver)
#define SRDMA_SYMVER_ATTR(versioned) __attribute__((symver(versioned)))
#define SRDMA_SYMVER_ASM(internal, versioned)
#else  // clang has no symver attribute; a top-level .symver directive does the same
#define SRDMA_SYMVER_ATTR(versioned)
#define SRDMA_SYMVER_ASM(internal, versioned) __asm__(".symver " #internal ", " versioned);
#endif

// Declares `srdma_default_NAME` with exactly the type verbs.h gives NAME (so the compiler
// checks the definition against the real prototype) and binds it as NAME@@NODE.
#define SRDMA_DEFAULT_VERSION(name, node)                                                           \
  extern "C" SRDMA_EXPORT SRDMA_SYMVER_ATTR(#name "@@" node) decltype(::name) srdma_default_##name; \
  SRDMA_SYMVER_ASM(srdma_default_##name, #name "@@" node)

// A compat version NAME@NODE is provided by an internal function: SRDMA_COMPAT_ATTR goes on
// its declaration, SRDMA_COMPAT_VERSION right after it (the directive form, for compilers
// without the attribute).
#define SRDMA_COMPAT_ATTR(name, node) SRDMA_EXPORT SRDMA_SYMVER_ATTR(#name "@" node)
#define SRDMA_COMPAT_VERSION(internal, name, node) SRDMA_SYMVER_ASM(internal, #name "@" node)
