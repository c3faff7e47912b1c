// Queue pairs: create (basic and extended), modify, query, destroy, and the inline data path
// (ibv_post_send, ibv_post_recv, ibv_post_srq_recv through ibv_context.ops).
#include <new>

#include "verbs-shim/context.hpp"
#include "verbs-shim/convert.hpp"
#include "verbs-shim/host_link.hpp"
#include "verbs-shim/objects.hpp"
#include "verbs-shim/ops.hpp"
#include "verbs-shim/system_rdma_core.hpp"

namespace softrdma::shim {

namespace {

// The ibv_wr_* operations the extended send API offers here: every operation of the engine.
// TSO is for raw Ethernet QPs. ATOMIC_WRITE is an RC operation of RoCE only (iWARP has none).
constexpr std::uint64_t kSendOps = IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM |
                                   IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM | IBV_QP_EX_WITH_RDMA_READ |
                                   IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP | IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD |
                                   IBV_QP_EX_WITH_LOCAL_INV | IBV_QP_EX_WITH_BIND_MW | IBV_QP_EX_WITH_SEND_WITH_INV |
                                   IBV_QP_EX_WITH_ATOMIC_WRITE;

bool offers_atomic_write(ibv_context* context, const ibv_qp_init_attr_ex& attr) {
  return attr.qp_type == IBV_QPT_RC && identity_of(context).transport != Transport::iwarp;
}

bool is_xrc(ibv_qp_type type) { return type == IBV_QPT_XRC_SEND || type == IBV_QPT_XRC_RECV; }

// What the QP type needs besides itself, as rdma-core's create_qp command checks: an XRC
// target its XRC domain only (comp_mask's XRCD is ignored for every other type); the others a
// PD and a send CQ, and a receive CQ unless they are XRC initiators.
bool has_objects(const ibv_qp_init_attr_ex& attr) {
  if (attr.qp_type == IBV_QPT_XRC_RECV) return (attr.comp_mask & IBV_QP_INIT_ATTR_XRCD) && attr.xrcd != nullptr;
  return (attr.comp_mask & IBV_QP_INIT_ATTR_PD) && attr.pd != nullptr && attr.send_cq != nullptr &&
         (attr.qp_type == IBV_QPT_XRC_SEND || attr.recv_cq != nullptr);
}

// Whether `attr` asks for something this device lacks (EOPNOTSUPP, so tests skip), is
// malformed (EINVAL), or is fine (0).
int check_create(ibv_context* context, const ibv_qp_init_attr_ex& attr) {
  constexpr std::uint32_t kKnown = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_XRCD | IBV_QP_INIT_ATTR_CREATE_FLAGS |
                                   IBV_QP_INIT_ATTR_MAX_TSO_HEADER | IBV_QP_INIT_ATTR_IND_TABLE |
                                   IBV_QP_INIT_ATTR_RX_HASH | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
  if (attr.comp_mask & ~kKnown) return EINVAL;
  const bool basic = attr.qp_type == IBV_QPT_RC || attr.qp_type == IBV_QPT_UC || attr.qp_type == IBV_QPT_UD;
  if (!basic && !(is_xrc(attr.qp_type) && offers_xrc(context))) return EOPNOTSUPP;
  if (attr.comp_mask & (IBV_QP_INIT_ATTR_MAX_TSO_HEADER | IBV_QP_INIT_ATTR_IND_TABLE | IBV_QP_INIT_ATTR_RX_HASH))
    return EOPNOTSUPP;
  if ((attr.comp_mask & IBV_QP_INIT_ATTR_CREATE_FLAGS) && attr.create_flags != 0) return EOPNOTSUPP;
  if ((attr.comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS) && (attr.send_ops_flags & ~kSendOps)) return EOPNOTSUPP;
  if ((attr.comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS) && (attr.send_ops_flags & IBV_QP_EX_WITH_ATOMIC_WRITE) &&
      !offers_atomic_write(context, attr))
    return EOPNOTSUPP;
  if (!has_objects(attr)) return EINVAL;
  return 0;
}

// The application's view of QP `qpn`, its engine object made already.
void fill(ibv_qp& qp, ibv_context* context, const ibv_qp_init_attr_ex& attr, std::uint32_t qpn) {
  qp.context = context;
  qp.qp_context = attr.qp_context;
  qp.pd = attr.qp_type == IBV_QPT_XRC_RECV ? nullptr : attr.pd;
  qp.send_cq = attr.send_cq;
  qp.recv_cq = attr.recv_cq;
  qp.srq = attr.srq;
  qp.handle = qp.qp_num = qpn;
  qp.state = IBV_QPS_RESET;
  qp.qp_type = attr.qp_type;
  pthread_mutex_init(&qp.mutex, nullptr);
  pthread_cond_init(&qp.cond, nullptr);
}

Qp* create(ibv_context* context, ibv_qp_init_attr_ex& attr) {
  if (const int err = check_create(context, attr)) {
    errno = err;
    return nullptr;
  }
  auto* q = new (std::nothrow) Qp{};
  if (q == nullptr) {
    errno = ENOMEM;
    return nullptr;
  }
  core::QpInitAttr init;
  init.qp_type = static_cast<core::QpType>(attr.qp_type);
  const bool target = attr.qp_type == IBV_QPT_XRC_RECV;
  init.pd = target ? 0 : pd_handle(attr.pd);
  init.send_cq = target ? 0 : attr.send_cq->handle;
  init.recv_cq = attr.recv_cq != nullptr && !is_xrc(attr.qp_type) ? attr.recv_cq->handle : 0;
  init.srq = attr.srq != nullptr && !is_xrc(attr.qp_type) ? attr.srq->handle : 0;
  init.xrcd = target ? xrcd_handle(attr.xrcd) : 0;
  init.cap = to_core(attr.cap);
  init.sq_sig_all = attr.sq_sig_all != 0;
  const auto created = link(context).create_qp(init);
  if (!created) {
    delete q;
    errno = created.error();
    return nullptr;
  }
  attr.cap = to_ibv(created->cap);  // what the QP got, as providers report it back
  ibv_qp& qp = q->ex.qp_base;
  fill(qp, context, attr, created->qpn);
  q->sq_sig_all = init.sq_sig_all;
  if (attr.comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS) {
    q->send_ops_flags = attr.send_ops_flags;
    install_send_ops(*q);
  }
  track(&qp);
  return q;
}

}  // namespace

// verbs_context.create_qp_ex (ibv_create_qp_ex with more than a PD).
ibv_qp* create_qp_ex_op(ibv_context* context, ibv_qp_init_attr_ex* attr) {
  if (attr == nullptr) {
    errno = EINVAL;
    return nullptr;
  }
  Qp* q = create(context, *attr);
  return q != nullptr ? &q->ex.qp_base : nullptr;
}

// verbs_context.open_qp (ibv_open_qp): one more handle on an XRC target of a domain, as
// another process sharing the domain would take (IBTA vol. 1 annex A14).
ibv_qp* open_qp_op(ibv_context* context, ibv_qp_open_attr* attr) {
  constexpr std::uint32_t kNeeded = IBV_QP_OPEN_ATTR_NUM | IBV_QP_OPEN_ATTR_XRCD | IBV_QP_OPEN_ATTR_TYPE;
  if (attr == nullptr || (attr->comp_mask & kNeeded) != kNeeded ||
      (attr->comp_mask & ~(kNeeded | IBV_QP_OPEN_ATTR_CONTEXT)) || attr->xrcd == nullptr ||
      attr->qp_type != IBV_QPT_XRC_RECV) {
    errno = EINVAL;
    return nullptr;
  }
  auto* q = new (std::nothrow) Qp{};
  if (q == nullptr) {
    errno = ENOMEM;
    return nullptr;
  }
  if (const int err = link(context).open_qp(xrcd_handle(attr->xrcd), attr->qp_num)) {
    delete q;
    errno = err;
    return nullptr;
  }
  ibv_qp_init_attr_ex as_created{};
  as_created.qp_context = attr->qp_context;
  as_created.qp_type = IBV_QPT_XRC_RECV;
  fill(q->ex.qp_base, context, as_created, attr->qp_num);
  core::QpAttr now;
  core::QpInitAttr init;
  if (link(context).query_qp(attr->qp_num, now, init) == 0)
    q->ex.qp_base.state = static_cast<ibv_qp_state>(now.qp_state);
  return &q->ex.qp_base;  // untracked: the creator's handle takes the target's async events
}

int post_send_op(ibv_qp* qp, ibv_send_wr* wr, ibv_send_wr** bad_wr) {
  // The chain in the engine's terms first (inline data copied now, as the verb requires), then
  // one call for all of it. Reused: the WRs' vectors keep their capacity.
  thread_local std::vector<core::SendWr> wrs;
  std::size_t n = 0;
  int err = 0;
  ibv_send_wr* it = wr;
  for (; it != nullptr; it = it->next, ++n) {
    if (n == wrs.size()) wrs.emplace_back();
    if ((err = to_core(*it, qp->qp_type, wrs[n])) != 0) break;
  }
  std::size_t posted = 0;
  if (n > 0) {
    const int post_err = link(qp->context).post_send(qp->qp_num, std::span<const core::SendWr>(wrs.data(), n), posted);
    if (post_err != 0) err = post_err;
  }
  if (err != 0) {
    it = wr;
    for (std::size_t i = 0; i < posted; ++i) it = it->next;
    *bad_wr = it;
  }
  return err;
}

int post_recv_op(ibv_qp* qp, ibv_recv_wr* wr, ibv_recv_wr** bad_wr) {
  return post_recv_chain(wr, bad_wr, [&](std::span<const core::RecvWr> wrs, std::size_t& posted) {
    return link(qp->context).post_recv(qp->qp_num, wrs, posted);
  });
}

}  // namespace softrdma::shim

using namespace softrdma::shim;
namespace core = softrdma::core;

#define SRDMA_LATEST_1_1(name) SRDMA_DEFAULT_VERSION(name, "IBVERBS_1.1")

SRDMA_LATEST_1_1(ibv_create_qp)
ibv_qp* srdma_default_ibv_create_qp(ibv_pd* pd, ibv_qp_init_attr* attr) {
  SRDMA_FORWARD_IF_SYSTEM(pd, ibv_create_qp, pd, attr);
  if (pd == nullptr || attr == nullptr) {
    errno = EINVAL;
    return nullptr;
  }
  ibv_qp_init_attr_ex ex{};
  ex.qp_context = attr->qp_context;
  ex.send_cq = attr->send_cq;
  ex.recv_cq = attr->recv_cq;
  ex.srq = attr->srq;
  ex.cap = attr->cap;
  ex.qp_type = attr->qp_type;
  ex.sq_sig_all = attr->sq_sig_all;
  ex.comp_mask = IBV_QP_INIT_ATTR_PD;
  ex.pd = pd;
  Qp* q = create(pd->context, ex);
  if (q == nullptr) return nullptr;
  attr->cap = ex.cap;
  return &q->ex.qp_base;
}

SRDMA_LATEST_1_1(ibv_modify_qp)
int srdma_default_ibv_modify_qp(ibv_qp* qp, ibv_qp_attr* attr, int attr_mask) {
  SRDMA_FORWARD_IF_SYSTEM(qp, ibv_modify_qp, qp, attr, attr_mask);
  if (qp == nullptr || attr == nullptr) return EINVAL;
  const auto mask = static_cast<std::uint32_t>(attr_mask);
  // A RoCE address is a GID: without a GRH there is nowhere to send (IBTA vol. 1 annex A16.4;
  // the kernel refuses such an AV on RoCE ports with EINVAL too).
  if ((mask & IBV_QP_AV) && !attr->ah_attr.is_global) return EINVAL;
  const core::QpAttr a = to_core(*attr);
  const int err = link(qp->context).modify_qp(qp->qp_num, a, mask);
  if (err == 0 && (mask & IBV_QP_STATE)) qp->state = attr->qp_state;
  return err;
}

SRDMA_LATEST_1_1(ibv_query_qp)
int srdma_default_ibv_query_qp(ibv_qp* qp, ibv_qp_attr* attr, int attr_mask, ibv_qp_init_attr* init_attr) {
  SRDMA_FORWARD_IF_SYSTEM(qp, ibv_query_qp, qp, attr, attr_mask, init_attr);
  if (qp == nullptr || attr == nullptr || init_attr == nullptr) return EINVAL;
  core::QpAttr a;
  core::QpInitAttr init;
  const int err = link(qp->context).query_qp(qp->qp_num, a, init);
  if (err != 0) return err;
  *attr = to_ibv(a);
  attr->cap = to_ibv(init.cap);
  *init_attr = ibv_qp_init_attr{};
  init_attr->qp_context = qp->qp_context;
  init_attr->send_cq = qp->send_cq;
  init_attr->recv_cq = qp->recv_cq;
  init_attr->srq = qp->srq;
  init_attr->cap = to_ibv(init.cap);
  init_attr->qp_type = qp->qp_type;
  init_attr->sq_sig_all = init.sq_sig_all ? 1 : 0;
  qp->state = attr->qp_state;  // the engine may have moved it (to ERR, SQE, SQD)
  return 0;
}

SRDMA_LATEST_1_1(ibv_destroy_qp)
int srdma_default_ibv_destroy_qp(ibv_qp* qp) {
  SRDMA_FORWARD_IF_SYSTEM(qp, ibv_destroy_qp, qp);
  if (qp == nullptr) return EINVAL;
  const int err = link(qp->context).destroy_qp(qp->qp_num);
  if (err != 0) return err;
  wait_acknowledged(qp->mutex, qp->cond, qp->events_completed, untrack(qp));
  delete &qp_of(qp);
  return 0;
}

// Only a QP created with send_ops_flags has the extended send API (rdma-core returns NULL for
// the others too).
SRDMA_EXPORT ibv_qp_ex* ibv_qp_to_qp_ex(ibv_qp* qp) {
  SRDMA_FORWARD_IF_SYSTEM(qp, ibv_qp_to_qp_ex, qp);
  if (qp == nullptr || qp_of(qp).send_ops_flags == 0) return nullptr;
  return &qp_of(qp).ex;
}
