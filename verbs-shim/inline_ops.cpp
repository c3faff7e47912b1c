// The function pointers verbs.h's static inline verbs call without any exported symbol
// (verbs-abi.md §3): ibv_context.ops for the data path and verbs_context for the extended
// verbs. The data-path slots are called with no NULL check (ibv_poll_cq, ibv_post_send, ...),
// so every one of them is installed.
#include "verbs-shim/context.hpp"
#include "verbs-shim/ops.hpp"

namespace softrdma::shim {

void install_ops(verbs_context& vctx) {
  ibv_context_ops& ops = vctx.context.ops;
  ops.poll_cq = poll_cq_op;
  ops.req_notify_cq = req_notify_cq_op;
  ops.post_send = post_send_op;
  ops.post_recv = post_recv_op;
  ops.post_srq_recv = post_srq_recv_op;
  ops.alloc_mw = alloc_mw_op;
  ops.bind_mw = bind_mw_op;
  ops.dealloc_mw = dealloc_mw_op;
  // Binaries built against very old headers call these two slots (rdma-core fills them too).
  ops._compat_query_device = ::ibv_query_device;
  ops._compat_query_port = ::ibv_query_port;

  vctx.query_port = query_port_op;
  vctx.query_device_ex = query_device_ex_op;
  vctx.create_cq_ex = create_cq_ex_op;
  vctx.query_rt_values = query_rt_values_op;
  vctx.create_qp_ex = create_qp_ex_op;
  vctx.alloc_parent_domain = alloc_parent_domain_op;
  vctx.advise_mr = advise_mr_op;
  vctx.open_xrcd = open_xrcd_op;
  vctx.close_xrcd = close_xrcd_op;
  vctx.create_srq_ex = create_srq_ex_op;
  vctx.get_srq_num = get_srq_num_op;
  vctx.post_srq_ops = post_srq_ops_op;
  vctx.open_qp = open_qp_op;
  // Every other verbs_context op stays NULL: the inline wrappers then return EOPNOTSUPP
  // themselves (ibv_alloc_dm, ibv_alloc_td, flows, WQs, counters...). Flow ops are NULL, so
  // ABI_placeholder1/2, which rdma-core points at them for libibverbs 1.1.8 binaries, stay
  // NULL as well.
}

}  // namespace softrdma::shim
