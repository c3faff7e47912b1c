// The function pointers the shim installs where verbs.h's inline code calls them
// (verbs-abi.md §3): ibv_context.ops, verbs_context's extended verbs, and the ibv_qp_ex
// send API. inline_ops.cpp installs them; the files named here define them.
#pragma once

#include "verbs-shim/objects.hpp"
#include "verbs-shim/verbs_api.hpp"

namespace softrdma::shim {

// pd_mr_verbs.cpp
ibv_pd* alloc_parent_domain_op(ibv_context* context, ibv_parent_domain_init_attr* attr);
ibv_mw* alloc_mw_op(ibv_pd* pd, ibv_mw_type type);
int bind_mw_op(ibv_qp* qp, ibv_mw* mw, ibv_mw_bind* bind);
int dealloc_mw_op(ibv_mw* mw);

// odp_mrs.cpp: the on-demand MRs registered (pd_mr_verbs.cpp), and ibv_advise_mr on them.
void note_odp_mr(const ibv_mr& mr, std::uint64_t start);
void forget_odp_mr(const ibv_mr& mr);
int advise_mr_op(ibv_pd* pd, ibv_advise_mr_advice advice, std::uint32_t flags, ibv_sge* sg_list, std::uint32_t num_sge);

// cq_verbs.cpp
ibv_cq_ex* create_cq_ex_op(ibv_context* context, ibv_cq_init_attr_ex* attr);
int poll_cq_op(ibv_cq* cq, int num_entries, ibv_wc* wc);
int req_notify_cq_op(ibv_cq* cq, int solicited_only);

// completion_clock.cpp: the core clock now (ibv_query_rt_values_ex).
int query_rt_values_op(ibv_context* context, ibv_values_ex* values);

// qp_verbs.cpp
ibv_qp* create_qp_ex_op(ibv_context* context, ibv_qp_init_attr_ex* attr);
int post_send_op(ibv_qp* qp, ibv_send_wr* wr, ibv_send_wr** bad_wr);
int post_recv_op(ibv_qp* qp, ibv_recv_wr* wr, ibv_recv_wr** bad_wr);

ibv_qp* open_qp_op(ibv_context* context, ibv_qp_open_attr* attr);

// srq_ah_verbs.cpp
int post_srq_recv_op(ibv_srq* srq, ibv_recv_wr* wr, ibv_recv_wr** bad_wr);
ibv_srq* create_srq_ex_op(ibv_context* context, ibv_srq_init_attr_ex* attr);
int post_srq_ops_op(ibv_srq* srq, ibv_ops_wr* wr, ibv_ops_wr** bad_wr);
int get_srq_num_op(ibv_srq* srq, std::uint32_t* srq_num);

// xrc_verbs.cpp: XRC domains, on srdma0 when its link carries XRC.
bool offers_xrc(ibv_context* context);
ibv_xrcd* open_xrcd_op(ibv_context* context, ibv_xrcd_init_attr* attr);
int close_xrcd_op(ibv_xrcd* xrcd);

// qp_ex_ops.cpp: fills q.ex's wr_* pointers.
void install_send_ops(Qp& q);

}  // namespace softrdma::shim
