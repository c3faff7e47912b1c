// The public verbs this slice does not implement yet: PDs, MRs, CQs, SRQs, QPs, AHs,
// multicast, import/export and ECE. Each fails as rdma-core fails a verb the provider lacks
// (unsupported.hpp): creators return NULL, the rest their documented error form, all with
// errno = EOPNOTSUPP. The definitions use verbs.h's own prototypes, so a signature mistake is
// a compile error.
#include "verbs-shim/unsupported.hpp"
#include "verbs-shim/verbs_api.hpp"

using softrdma::shim::unsupported_errno;
using softrdma::shim::unsupported_minus1;
using softrdma::shim::unsupported_null;

// Names that also have an @IBVERBS_1.0 compat version (compat_1_0.cpp) are bound to
// @@IBVERBS_1.1 explicitly; the rest are plain exports placed by the version script.
#define SRDMA_LATEST_1_1(name) SRDMA_DEFAULT_VERSION(name, "IBVERBS_1.1")

// Protection domains.
SRDMA_LATEST_1_1(ibv_alloc_pd)
ibv_pd* srdma_default_ibv_alloc_pd(ibv_context*) { return unsupported_null<ibv_pd>("ibv_alloc_pd"); }
SRDMA_LATEST_1_1(ibv_dealloc_pd)
int srdma_default_ibv_dealloc_pd(ibv_pd*) { return unsupported_errno("ibv_dealloc_pd"); }

// Memory regions. ibv_reg_mr() may compile to either ibv_reg_mr or ibv_reg_mr_iova2
// (verbs-abi.md §8.10).
SRDMA_LATEST_1_1(ibv_reg_mr)
ibv_mr* srdma_default_ibv_reg_mr(ibv_pd*, void*, std::size_t, int) { return unsupported_null<ibv_mr>("ibv_reg_mr"); }
SRDMA_EXPORT ibv_mr* ibv_reg_mr_iova(ibv_pd*, void*, std::size_t, std::uint64_t, int) {
  return unsupported_null<ibv_mr>("ibv_reg_mr_iova");
}
SRDMA_EXPORT ibv_mr* ibv_reg_mr_iova2(ibv_pd*, void*, std::size_t, std::uint64_t, unsigned int) {
  return unsupported_null<ibv_mr>("ibv_reg_mr_iova2");
}
SRDMA_EXPORT ibv_mr* ibv_reg_dmabuf_mr(ibv_pd*, std::uint64_t, std::size_t, std::uint64_t, int, int) {
  return unsupported_null<ibv_mr>("ibv_reg_dmabuf_mr");
}
// ibv_rereg_mr reports failures as enum ibv_rereg_mr_err_code (negative), errno the reason.
SRDMA_EXPORT int ibv_rereg_mr(ibv_mr*, int, ibv_pd*, void*, std::size_t, int) {
  unsupported_errno("ibv_rereg_mr");
  return IBV_REREG_MR_ERR_INPUT;
}
SRDMA_LATEST_1_1(ibv_dereg_mr)
int srdma_default_ibv_dereg_mr(ibv_mr*) { return unsupported_errno("ibv_dereg_mr"); }

// Completion queues.
SRDMA_LATEST_1_1(ibv_create_cq)
ibv_cq* srdma_default_ibv_create_cq(ibv_context*, int, void*, ibv_comp_channel*, int) {
  return unsupported_null<ibv_cq>("ibv_create_cq");
}
SRDMA_LATEST_1_1(ibv_resize_cq)
int srdma_default_ibv_resize_cq(ibv_cq*, int) { return unsupported_errno("ibv_resize_cq"); }
SRDMA_LATEST_1_1(ibv_destroy_cq)
int srdma_default_ibv_destroy_cq(ibv_cq*) { return unsupported_errno("ibv_destroy_cq"); }

// Shared receive queues.
SRDMA_LATEST_1_1(ibv_create_srq)
ibv_srq* srdma_default_ibv_create_srq(ibv_pd*, ibv_srq_init_attr*) { return unsupported_null<ibv_srq>("ibv_create_srq"); }
SRDMA_LATEST_1_1(ibv_modify_srq)
int srdma_default_ibv_modify_srq(ibv_srq*, ibv_srq_attr*, int) { return unsupported_errno("ibv_modify_srq"); }
SRDMA_LATEST_1_1(ibv_query_srq)
int srdma_default_ibv_query_srq(ibv_srq*, ibv_srq_attr*) { return unsupported_errno("ibv_query_srq"); }
SRDMA_LATEST_1_1(ibv_destroy_srq)
int srdma_default_ibv_destroy_srq(ibv_srq*) { return unsupported_errno("ibv_destroy_srq"); }

// Queue pairs.
SRDMA_LATEST_1_1(ibv_create_qp)
ibv_qp* srdma_default_ibv_create_qp(ibv_pd*, ibv_qp_init_attr*) { return unsupported_null<ibv_qp>("ibv_create_qp"); }
SRDMA_LATEST_1_1(ibv_query_qp)
int srdma_default_ibv_query_qp(ibv_qp*, ibv_qp_attr*, int, ibv_qp_init_attr*) { return unsupported_errno("ibv_query_qp"); }
SRDMA_LATEST_1_1(ibv_modify_qp)
int srdma_default_ibv_modify_qp(ibv_qp*, ibv_qp_attr*, int) { return unsupported_errno("ibv_modify_qp"); }
SRDMA_LATEST_1_1(ibv_destroy_qp)
int srdma_default_ibv_destroy_qp(ibv_qp*) { return unsupported_errno("ibv_destroy_qp"); }
// Only QPs created with send_ops_flags have an ibv_qp_ex view; none exist yet.
SRDMA_EXPORT ibv_qp_ex* ibv_qp_to_qp_ex(ibv_qp*) { return unsupported_null<ibv_qp_ex>("ibv_qp_to_qp_ex"); }
// A bit mask of the guarantees; 0 promises nothing, which is rdma-core's answer too when the
// provider cannot tell.
SRDMA_EXPORT int ibv_query_qp_data_in_order(ibv_qp*, ibv_wr_opcode, std::uint32_t) { return 0; }
SRDMA_EXPORT int ibv_set_ece(ibv_qp*, ibv_ece*) { return unsupported_errno("ibv_set_ece"); }
SRDMA_EXPORT int ibv_query_ece(ibv_qp*, ibv_ece*) { return unsupported_errno("ibv_query_ece"); }

// Address handles and multicast.
SRDMA_LATEST_1_1(ibv_create_ah)
ibv_ah* srdma_default_ibv_create_ah(ibv_pd*, ibv_ah_attr*) { return unsupported_null<ibv_ah>("ibv_create_ah"); }
SRDMA_LATEST_1_1(ibv_destroy_ah)
int srdma_default_ibv_destroy_ah(ibv_ah*) { return unsupported_errno("ibv_destroy_ah"); }
SRDMA_EXPORT ibv_ah* ibv_create_ah_from_wc(ibv_pd*, ibv_wc*, ibv_grh*, std::uint8_t) {
  return unsupported_null<ibv_ah>("ibv_create_ah_from_wc");
}
SRDMA_EXPORT int ibv_init_ah_from_wc(ibv_context*, std::uint8_t, ibv_wc*, ibv_grh*, ibv_ah_attr*) {
  return unsupported_minus1("ibv_init_ah_from_wc");
}
// Ethernet L2 resolution is for providers that build Ethernet frames; softrdma sends UDP.
SRDMA_EXPORT int ibv_resolve_eth_l2_from_gid(ibv_context*, ibv_ah_attr*, std::uint8_t*, std::uint16_t*) {
  return unsupported_errno("ibv_resolve_eth_l2_from_gid");
}
SRDMA_LATEST_1_1(ibv_attach_mcast)
int srdma_default_ibv_attach_mcast(ibv_qp*, const ibv_gid*, std::uint16_t) { return unsupported_errno("ibv_attach_mcast"); }
SRDMA_LATEST_1_1(ibv_detach_mcast)
int srdma_default_ibv_detach_mcast(ibv_qp*, const ibv_gid*, std::uint16_t) { return unsupported_errno("ibv_detach_mcast"); }

// Sharing objects between processes through the command fd (kernel uverbs handles).
SRDMA_EXPORT ibv_context* ibv_import_device(int) { return unsupported_null<ibv_context>("ibv_import_device"); }
SRDMA_EXPORT ibv_pd* ibv_import_pd(ibv_context*, std::uint32_t) { return unsupported_null<ibv_pd>("ibv_import_pd"); }
SRDMA_EXPORT ibv_mr* ibv_import_mr(ibv_pd*, std::uint32_t) { return unsupported_null<ibv_mr>("ibv_import_mr"); }
SRDMA_EXPORT ibv_dm* ibv_import_dm(ibv_context*, std::uint32_t) { return unsupported_null<ibv_dm>("ibv_import_dm"); }
SRDMA_EXPORT void ibv_unimport_pd(ibv_pd*) {}  // nothing can have been imported
SRDMA_EXPORT void ibv_unimport_mr(ibv_mr*) {}
SRDMA_EXPORT void ibv_unimport_dm(ibv_dm*) {}
