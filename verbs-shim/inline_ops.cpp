// The function pointers verbs.h's static inline verbs call without any exported symbol
// (verbs-abi.md §3): ibv_context.ops for the data path and verbs_context for the extended
// verbs. The data-path slots are called with no NULL check (ibv_poll_cq, ibv_post_send, ...),
// so every one of them is installed, even while it can only fail.
#include "verbs-shim/context.hpp"
#include "verbs-shim/unsupported.hpp"

namespace softrdma::shim {

namespace {

// No CQ, QP, SRQ or MW can exist yet (their creators fail with EOPNOTSUPP), so these are only
// reachable through a misbehaving caller; they fail the way each verb reports errors.
int poll_cq(ibv_cq*, int, ibv_wc*) {
  note_unsupported("ibv_poll_cq");
  return -EOPNOTSUPP;  // ibv_poll_cq: a negative value on failure
}
int req_notify_cq(ibv_cq*, int) { return unsupported_errno("ibv_req_notify_cq"); }
int post_send(ibv_qp*, ibv_send_wr* wr, ibv_send_wr** bad_wr) {
  *bad_wr = wr;  // the first WR was not posted
  return unsupported_errno("ibv_post_send");
}
int post_recv(ibv_qp*, ibv_recv_wr* wr, ibv_recv_wr** bad_wr) {
  *bad_wr = wr;
  return unsupported_errno("ibv_post_recv");
}
int post_srq_recv(ibv_srq*, ibv_recv_wr* wr, ibv_recv_wr** bad_wr) {
  *bad_wr = wr;
  return unsupported_errno("ibv_post_srq_recv");
}
ibv_mw* alloc_mw(ibv_pd*, ibv_mw_type) { return unsupported_null<ibv_mw>("ibv_alloc_mw"); }
int bind_mw(ibv_qp*, ibv_mw*, ibv_mw_bind*) { return unsupported_errno("ibv_bind_mw"); }
int dealloc_mw(ibv_mw*) { return unsupported_errno("ibv_dealloc_mw"); }
// ibv_close_xrcd is the one verbs_context op the inline code calls unchecked.
int close_xrcd(ibv_xrcd*) { return unsupported_errno("ibv_close_xrcd"); }

}  // namespace

void install_ops(verbs_context& vctx) {
  ibv_context_ops& ops = vctx.context.ops;
  ops.poll_cq = poll_cq;
  ops.req_notify_cq = req_notify_cq;
  ops.post_send = post_send;
  ops.post_recv = post_recv;
  ops.post_srq_recv = post_srq_recv;
  ops.alloc_mw = alloc_mw;
  ops.bind_mw = bind_mw;
  ops.dealloc_mw = dealloc_mw;
  // Binaries built against very old headers call these two slots (rdma-core fills them too).
  ops._compat_query_device = ::ibv_query_device;
  ops._compat_query_port = ::ibv_query_port;

  vctx.query_port = query_port_op;
  vctx.query_device_ex = query_device_ex_op;
  vctx.close_xrcd = close_xrcd;
  // Every other verbs_context op stays NULL: the inline wrappers then return EOPNOTSUPP
  // themselves (ibv_create_cq_ex, ibv_open_xrcd, ibv_alloc_dm, flows, WQs, counters...), or
  // fall back to the exported basic verb (ibv_create_qp_ex with only a PD, ibv_create_srq_ex
  // of a basic SRQ). Flow ops are NULL, so ABI_placeholder1/2, which rdma-core points at
  // them for libibverbs 1.1.8 binaries, stay NULL as well.
}

}  // namespace softrdma::shim
