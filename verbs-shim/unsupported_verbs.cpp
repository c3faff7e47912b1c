// The public verbs the device does not implement: dma-buf MRs, import/export between
// processes and ECE. Each fails as rdma-core fails a verb the provider lacks
// (unsupported.hpp): creators return NULL, the rest their documented error form, all with
// errno = EOPNOTSUPP. The definitions use verbs.h's own prototypes, so a signature mistake is
// a compile error.
#include "verbs-shim/unsupported.hpp"
#include "verbs-shim/verbs_api.hpp"

using softrdma::shim::unsupported_errno;
using softrdma::shim::unsupported_minus1;
using softrdma::shim::unsupported_null;

// Memory regions backed by a dma-buf (GPU memory): nothing here exports one.
SRDMA_EXPORT ibv_mr* ibv_reg_dmabuf_mr(ibv_pd*, std::uint64_t, std::size_t, std::uint64_t, int, int) {
  return unsupported_null<ibv_mr>("ibv_reg_dmabuf_mr");
}

// Queue pairs: data-ordering guarantees and ECE. A bit mask of the guarantees; 0 promises nothing, which is rdma-core's
// answer too when the provider cannot tell.
SRDMA_EXPORT int ibv_query_qp_data_in_order(ibv_qp*, ibv_wr_opcode, std::uint32_t) { return 0; }
SRDMA_EXPORT int ibv_set_ece(ibv_qp*, ibv_ece*) { return unsupported_errno("ibv_set_ece"); }
SRDMA_EXPORT int ibv_query_ece(ibv_qp*, ibv_ece*) { return unsupported_errno("ibv_query_ece"); }

// Ethernet L2 resolution is for providers that build Ethernet frames; softrdma sends UDP.
SRDMA_EXPORT int ibv_resolve_eth_l2_from_gid(ibv_context*, ibv_ah_attr*, std::uint8_t*, std::uint16_t*) {
  return unsupported_errno("ibv_resolve_eth_l2_from_gid");
}

// Sharing objects between processes through the command fd (kernel uverbs handles).
SRDMA_EXPORT ibv_context* ibv_import_device(int) { return unsupported_null<ibv_context>("ibv_import_device"); }
SRDMA_EXPORT ibv_pd* ibv_import_pd(ibv_context*, std::uint32_t) { return unsupported_null<ibv_pd>("ibv_import_pd"); }
SRDMA_EXPORT ibv_mr* ibv_import_mr(ibv_pd*, std::uint32_t) { return unsupported_null<ibv_mr>("ibv_import_mr"); }
SRDMA_EXPORT ibv_dm* ibv_import_dm(ibv_context*, std::uint32_t) { return unsupported_null<ibv_dm>("ibv_import_dm"); }
SRDMA_EXPORT void ibv_unimport_pd(ibv_pd*) {}  // nothing can have been imported
SRDMA_EXPORT void ibv_unimport_mr(ibv_mr*) {}
SRDMA_EXPORT void ibv_unimport_dm(ibv_dm*) {}
