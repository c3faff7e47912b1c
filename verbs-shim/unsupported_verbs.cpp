// The public verbs the device does not implement: dma-buf MRs, import/export between
// processes and ECE. Each fails as rdma-core fails a verb the provider lacks
// (unsupported.hpp): creators return NULL, the rest their documented error form, all with
// errno = EOPNOTSUPP. On the machine's own devices, rdma-core answers (system_rdma_core.hpp).
// The definitions use verbs.h's own prototypes, so a signature mistake is a compile error.
#include <sys/stat.h>

#include "verbs-shim/system_rdma_core.hpp"
#include "verbs-shim/unsupported.hpp"
#include "verbs-shim/verbs_api.hpp"

using softrdma::shim::unsupported_errno;
using softrdma::shim::unsupported_minus1;
using softrdma::shim::unsupported_null;

// Memory regions backed by a dma-buf (GPU memory): nothing here exports one.
SRDMA_EXPORT ibv_mr* ibv_reg_dmabuf_mr(ibv_pd* pd, std::uint64_t offset, std::size_t length, std::uint64_t iova, int fd,
                                       int access) {
  SRDMA_FORWARD_IF_SYSTEM(pd, ibv_reg_dmabuf_mr, pd, offset, length, iova, fd, access);
  return unsupported_null<ibv_mr>("ibv_reg_dmabuf_mr");
}

// Queue pairs: data-ordering guarantees and ECE. A bit mask of the guarantees; 0 promises nothing, which is rdma-core's
// answer too when the provider cannot tell.
SRDMA_EXPORT int ibv_query_qp_data_in_order(ibv_qp* qp, ibv_wr_opcode op, std::uint32_t flags) {
  SRDMA_FORWARD_IF_SYSTEM(qp, ibv_query_qp_data_in_order, qp, op, flags);
  return 0;
}
SRDMA_EXPORT int ibv_set_ece(ibv_qp* qp, ibv_ece* ece) {
  SRDMA_FORWARD_IF_SYSTEM(qp, ibv_set_ece, qp, ece);
  return unsupported_errno("ibv_set_ece");
}
SRDMA_EXPORT int ibv_query_ece(ibv_qp* qp, ibv_ece* ece) {
  SRDMA_FORWARD_IF_SYSTEM(qp, ibv_query_ece, qp, ece);
  return unsupported_errno("ibv_query_ece");
}

// Ethernet L2 resolution is for providers that build Ethernet frames; softrdma sends UDP.
SRDMA_EXPORT int ibv_resolve_eth_l2_from_gid(ibv_context* context, ibv_ah_attr* attr, std::uint8_t* eth_mac,
                                             std::uint16_t* vid) {
  SRDMA_FORWARD_IF_SYSTEM(context, ibv_resolve_eth_l2_from_gid, context, attr, eth_mac, vid);
  return unsupported_errno("ibv_resolve_eth_l2_from_gid");
}

// Sharing objects between processes through the command fd (kernel uverbs handles). A
// character device is a kernel uverbs file, so one of the machine's own devices.
SRDMA_EXPORT ibv_context* ibv_import_device(int cmd_fd) {
  struct stat st {};
  const bool uverbs = ::fstat(cmd_fd, &st) == 0 && S_ISCHR(st.st_mode);
  if (uverbs && !softrdma::shim::system::devices().empty()) {
    ibv_context* machines = SRDMA_SYSTEM_CALL(ibv_import_device, cmd_fd);
    if (machines != nullptr) softrdma::shim::system::keep_errno(machines);
    return machines;
  }
  return unsupported_null<ibv_context>("ibv_import_device");
}
SRDMA_EXPORT ibv_pd* ibv_import_pd(ibv_context* context, std::uint32_t handle) {
  SRDMA_FORWARD_IF_SYSTEM(context, ibv_import_pd, context, handle);
  return unsupported_null<ibv_pd>("ibv_import_pd");
}
SRDMA_EXPORT ibv_mr* ibv_import_mr(ibv_pd* pd, std::uint32_t handle) {
  SRDMA_FORWARD_IF_SYSTEM(pd, ibv_import_mr, pd, handle);
  return unsupported_null<ibv_mr>("ibv_import_mr");
}
SRDMA_EXPORT ibv_dm* ibv_import_dm(ibv_context* context, std::uint32_t handle) {
  SRDMA_FORWARD_IF_SYSTEM(context, ibv_import_dm, context, handle);
  return unsupported_null<ibv_dm>("ibv_import_dm");
}
// Nothing of softrdma's can have been imported.
SRDMA_EXPORT void ibv_unimport_pd(ibv_pd* pd) { SRDMA_FORWARD_IF_SYSTEM(pd, ibv_unimport_pd, pd); }
SRDMA_EXPORT void ibv_unimport_mr(ibv_mr* mr) { SRDMA_FORWARD_IF_SYSTEM(mr, ibv_unimport_mr, mr); }
SRDMA_EXPORT void ibv_unimport_dm(ibv_dm* dm) { SRDMA_FORWARD_IF_SYSTEM(dm, ibv_unimport_dm, dm); }
