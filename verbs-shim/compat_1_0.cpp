// The 33 names rdma-core still exports at the compat version IBVERBS_1.0, plus
// ibv_register_driver@IBVERBS_1.1. Only binaries linked against libibverbs 1.0 (before 2008)
// bind to them, with the old struct layouts; nothing current does (verbs-abi.md §2.1). They
// must exist because the export table must match rdma-core's, and they fail cleanly: the
// parameters are never read, so each stub takes none (harmless in the x86-64 C ABI) and
// returns the right kind of value (NULL for pointers, so no caller mistakes an errno for one).
#include "verbs-shim/unsupported.hpp"
#include "verbs-shim/verbs_api.hpp"

using softrdma::shim::unsupported_errno;
using softrdma::shim::unsupported_minus1;
using softrdma::shim::unsupported_null;

#define SRDMA_COMPAT_1_0(ret, name, body)                                              \
  extern "C" SRDMA_COMPAT_ATTR(name, "IBVERBS_1.0") ret srdma_compat_1_0_##name(void); \
  SRDMA_COMPAT_VERSION(srdma_compat_1_0_##name, name, "IBVERBS_1.0")                   \
  ret srdma_compat_1_0_##name(void) { body; }

#define SRDMA_COMPAT_1_0_NULL(name) SRDMA_COMPAT_1_0(void*, name, return unsupported_null<void>(#name "@IBVERBS_1.0"))
#define SRDMA_COMPAT_1_0_ERRNO(name) SRDMA_COMPAT_1_0(int, name, return unsupported_errno(#name "@IBVERBS_1.0"))
#define SRDMA_COMPAT_1_0_MINUS1(name) SRDMA_COMPAT_1_0(int, name, return unsupported_minus1(#name "@IBVERBS_1.0"))
#define SRDMA_COMPAT_1_0_VOID(name) SRDMA_COMPAT_1_0(void, name, softrdma::shim::note_unsupported(#name "@IBVERBS_1.0"))

// Returning pointers.
SRDMA_COMPAT_1_0_NULL(ibv_get_device_list)
SRDMA_COMPAT_1_0_NULL(ibv_get_device_name)
SRDMA_COMPAT_1_0_NULL(ibv_open_device)
SRDMA_COMPAT_1_0_NULL(ibv_alloc_pd)
SRDMA_COMPAT_1_0_NULL(ibv_reg_mr)
SRDMA_COMPAT_1_0_NULL(ibv_create_cq)
SRDMA_COMPAT_1_0_NULL(ibv_create_srq)
SRDMA_COMPAT_1_0_NULL(ibv_create_qp)
SRDMA_COMPAT_1_0_NULL(ibv_create_ah)
// ibv_get_device_guid returns a 64-bit value: 0 is "no GUID".
SRDMA_COMPAT_1_0(std::uint64_t, ibv_get_device_guid,
                 softrdma::shim::note_unsupported("ibv_get_device_guid@IBVERBS_1.0");
                 return 0)

// Returning an errno value.
SRDMA_COMPAT_1_0_ERRNO(ibv_close_device)
SRDMA_COMPAT_1_0_ERRNO(ibv_query_device)
SRDMA_COMPAT_1_0_ERRNO(ibv_query_port)
SRDMA_COMPAT_1_0_ERRNO(ibv_dealloc_pd)
SRDMA_COMPAT_1_0_ERRNO(ibv_dereg_mr)
SRDMA_COMPAT_1_0_ERRNO(ibv_resize_cq)
SRDMA_COMPAT_1_0_ERRNO(ibv_destroy_cq)
SRDMA_COMPAT_1_0_ERRNO(ibv_modify_srq)
SRDMA_COMPAT_1_0_ERRNO(ibv_query_srq)
SRDMA_COMPAT_1_0_ERRNO(ibv_destroy_srq)
SRDMA_COMPAT_1_0_ERRNO(ibv_modify_qp)
SRDMA_COMPAT_1_0_ERRNO(ibv_query_qp)
SRDMA_COMPAT_1_0_ERRNO(ibv_destroy_qp)
SRDMA_COMPAT_1_0_ERRNO(ibv_destroy_ah)
SRDMA_COMPAT_1_0_ERRNO(ibv_attach_mcast)
SRDMA_COMPAT_1_0_ERRNO(ibv_detach_mcast)

// Returning -1 with errno.
SRDMA_COMPAT_1_0_MINUS1(ibv_query_gid)
SRDMA_COMPAT_1_0_MINUS1(ibv_query_pkey)
SRDMA_COMPAT_1_0_MINUS1(ibv_get_async_event)
SRDMA_COMPAT_1_0_MINUS1(ibv_get_cq_event)

// Returning nothing.
SRDMA_COMPAT_1_0_VOID(ibv_free_device_list)
SRDMA_COMPAT_1_0_VOID(ibv_ack_async_event)
SRDMA_COMPAT_1_0_VOID(ibv_ack_cq_events)

// How providers registered themselves before rdma-core's private provider ABI. softrdma
// loads no providers, so a registration is accepted and ignored.
extern "C" SRDMA_COMPAT_ATTR(ibv_register_driver,
                             "IBVERBS_1.1") void srdma_compat_1_1_ibv_register_driver(const char* name,
                                                                                      void* init_func);
SRDMA_COMPAT_VERSION(srdma_compat_1_1_ibv_register_driver, ibv_register_driver, "IBVERBS_1.1")
void srdma_compat_1_1_ibv_register_driver(const char*, void*) {}
