// IBVERBS_PRIVATE_34: rdma-core's provider ABI (the 34 changes with rdma-core releases).
// No provider ever drives a softrdma device, but libmlx5 and libefa link against this node
// and get loaded anyway, by perftest and by pyverbs (the rdma-core tests import their
// modules), and everything is bound at load time (verbs-abi.md §1, §8.2). So every name
// exists; their constructors call verbs_register_driver_34, which must quietly do nothing;
// the rest fail with EOPNOTSUPP if ever reached. ibv_query_gid_type, the one PRIVATE_34 call
// applications make, is real (query.cpp).
#include "verbs-shim/unsupported.hpp"
#include "verbs-shim/verbs_api.hpp"

using softrdma::shim::note_unsupported;
using softrdma::shim::unsupported_errno;
using softrdma::shim::unsupported_minus1;
using softrdma::shim::unsupported_null;

// A bool in .bss, size 1, as in rdma-core: providers read it.
extern "C" SRDMA_EXPORT bool verbs_allow_disassociate_destroy;
bool verbs_allow_disassociate_destroy = false;

extern "C" {

// Load-time registration from each provider's constructor: accepted, ignored.
SRDMA_EXPORT void verbs_register_driver_34(const void*) {}

// Context set-up helpers a provider's alloc_context would call; never reached.
SRDMA_EXPORT void* _verbs_init_and_alloc_context(void*, int, std::size_t, void*, std::uint32_t) {
  return unsupported_null<void>("_verbs_init_and_alloc_context");
}
SRDMA_EXPORT void* verbs_open_device(void*, void*) { return unsupported_null<void>("verbs_open_device"); }
SRDMA_EXPORT void verbs_uninit_context(void*) { note_unsupported("verbs_uninit_context"); }
SRDMA_EXPORT void verbs_set_ops(void*, const void*) { note_unsupported("verbs_set_ops"); }
SRDMA_EXPORT void verbs_init_cq(void*, void*, void*, void*) { note_unsupported("verbs_init_cq"); }
SRDMA_EXPORT void __verbs_log(void*, const char*, ...) {}
SRDMA_EXPORT int ibv_read_ibdev_sysfs_file(char*, std::size_t, void*, const char*, ...) {
  return unsupported_minus1("ibv_read_ibdev_sysfs_file");
}

// The kernel command interface (ioctl and write() commands on cmd_fd). There is no kernel
// device behind a softrdma context.
SRDMA_EXPORT unsigned int __ioctl_final_num_attrs(unsigned int, void*) { return 0; }
SRDMA_EXPORT int execute_ioctl(void*, void*) { return unsupported_errno("execute_ioctl"); }

}  // extern "C"

// The ibv_cmd_* wrappers all return an errno value; their arguments are never read.
#define SRDMA_IBV_CMD(name) \
  extern "C" SRDMA_EXPORT int name(void) { return unsupported_errno(#name); }

SRDMA_IBV_CMD(ibv_cmd_advise_mr)
SRDMA_IBV_CMD(ibv_cmd_alloc_dm)
SRDMA_IBV_CMD(ibv_cmd_alloc_mw)
SRDMA_IBV_CMD(ibv_cmd_alloc_pd)
SRDMA_IBV_CMD(ibv_cmd_attach_mcast)
SRDMA_IBV_CMD(ibv_cmd_close_xrcd)
SRDMA_IBV_CMD(ibv_cmd_create_ah)
SRDMA_IBV_CMD(ibv_cmd_create_counters)
SRDMA_IBV_CMD(ibv_cmd_create_cq)
SRDMA_IBV_CMD(ibv_cmd_create_cq_ex)
SRDMA_IBV_CMD(ibv_cmd_create_flow)
SRDMA_IBV_CMD(ibv_cmd_create_flow_action_esp)
SRDMA_IBV_CMD(ibv_cmd_create_qp)
SRDMA_IBV_CMD(ibv_cmd_create_qp_ex)
SRDMA_IBV_CMD(ibv_cmd_create_qp_ex2)
SRDMA_IBV_CMD(ibv_cmd_create_rwq_ind_table)
SRDMA_IBV_CMD(ibv_cmd_create_srq)
SRDMA_IBV_CMD(ibv_cmd_create_srq_ex)
SRDMA_IBV_CMD(ibv_cmd_create_wq)
SRDMA_IBV_CMD(ibv_cmd_dealloc_mw)
SRDMA_IBV_CMD(ibv_cmd_dealloc_pd)
SRDMA_IBV_CMD(ibv_cmd_dereg_mr)
SRDMA_IBV_CMD(ibv_cmd_destroy_ah)
SRDMA_IBV_CMD(ibv_cmd_destroy_counters)
SRDMA_IBV_CMD(ibv_cmd_destroy_cq)
SRDMA_IBV_CMD(ibv_cmd_destroy_flow)
SRDMA_IBV_CMD(ibv_cmd_destroy_flow_action)
SRDMA_IBV_CMD(ibv_cmd_destroy_qp)
SRDMA_IBV_CMD(ibv_cmd_destroy_rwq_ind_table)
SRDMA_IBV_CMD(ibv_cmd_destroy_srq)
SRDMA_IBV_CMD(ibv_cmd_destroy_wq)
SRDMA_IBV_CMD(ibv_cmd_detach_mcast)
SRDMA_IBV_CMD(ibv_cmd_free_dm)
SRDMA_IBV_CMD(ibv_cmd_get_context)
SRDMA_IBV_CMD(ibv_cmd_modify_cq)
SRDMA_IBV_CMD(ibv_cmd_modify_flow_action_esp)
SRDMA_IBV_CMD(ibv_cmd_modify_qp)
SRDMA_IBV_CMD(ibv_cmd_modify_qp_ex)
SRDMA_IBV_CMD(ibv_cmd_modify_srq)
SRDMA_IBV_CMD(ibv_cmd_modify_wq)
SRDMA_IBV_CMD(ibv_cmd_open_qp)
SRDMA_IBV_CMD(ibv_cmd_open_xrcd)
SRDMA_IBV_CMD(ibv_cmd_poll_cq)
SRDMA_IBV_CMD(ibv_cmd_post_recv)
SRDMA_IBV_CMD(ibv_cmd_post_send)
SRDMA_IBV_CMD(ibv_cmd_post_srq_recv)
SRDMA_IBV_CMD(ibv_cmd_query_context)
SRDMA_IBV_CMD(ibv_cmd_query_device_any)
SRDMA_IBV_CMD(ibv_cmd_query_mr)
SRDMA_IBV_CMD(ibv_cmd_query_port)
SRDMA_IBV_CMD(ibv_cmd_query_qp)
SRDMA_IBV_CMD(ibv_cmd_query_srq)
SRDMA_IBV_CMD(ibv_cmd_read_counters)
SRDMA_IBV_CMD(ibv_cmd_reg_dm_mr)
SRDMA_IBV_CMD(ibv_cmd_reg_dmabuf_mr)
SRDMA_IBV_CMD(ibv_cmd_reg_mr)
SRDMA_IBV_CMD(ibv_cmd_req_notify_cq)
SRDMA_IBV_CMD(ibv_cmd_rereg_mr)
SRDMA_IBV_CMD(ibv_cmd_resize_cq)
