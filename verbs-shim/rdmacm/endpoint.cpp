// The synchronous interface (rdma_verbs.h): rdma_create_ep makes an ID from rdma_getaddrinfo's
// answer, with a QP and the CQs it needs, whose calls wait for their own events;
// rdma_get_request takes a synchronous listener's next connection request. Also the SRQs an
// ID may carry.
#include <cerrno>
#include <cstring>

#include "verbs-shim/rdmacm/cm_objects.hpp"
#include "verbs-shim/rdmacm/system_cm.hpp"

namespace softrdma::rdmacm {
namespace {

ibv_cq* make_cq(rdma_cm_id* id, std::uint32_t entries, ibv_comp_channel*& channel) {
  channel = ibv_create_comp_channel(id->verbs);
  if (channel == nullptr) return nullptr;
  ibv_cq* cq = ibv_create_cq(id->verbs, static_cast<int>(entries == 0 ? 1 : entries), id, channel, 0);
  if (cq == nullptr) {
    ibv_destroy_comp_channel(channel);
    channel = nullptr;
  }
  return cq;
}

}  // namespace

int create_missing_cqs(Id& id, ibv_qp_init_attr_ex& attr) {
  rdma_cm_id* cm = &id.id;
  if (attr.send_cq == nullptr && cm->send_cq == nullptr) {
    cm->send_cq = make_cq(cm, attr.cap.max_send_wr, cm->send_cq_channel);
    if (cm->send_cq == nullptr) return errno ? errno : ENOMEM;
    id.own_cqs = true;
  }
  if (attr.recv_cq == nullptr && cm->recv_cq == nullptr) {
    cm->recv_cq = make_cq(cm, attr.cap.max_recv_wr, cm->recv_cq_channel);
    if (cm->recv_cq == nullptr) return errno ? errno : ENOMEM;
    id.own_cqs = true;
  }
  if (attr.send_cq == nullptr) attr.send_cq = cm->send_cq;
  if (attr.recv_cq == nullptr) attr.recv_cq = cm->recv_cq;
  return 0;
}

void release_request_event(Id& id) {
  if (id.id.event == nullptr) return;
  delete reinterpret_cast<Event*>(id.id.event);
  id.id.event = nullptr;
}

void destroy_own_cqs(Id& id) {
  if (!id.own_cqs) return;
  rdma_cm_id* cm = &id.id;
  for (auto [cq, channel] :
       {std::pair{&cm->send_cq, &cm->send_cq_channel}, std::pair{&cm->recv_cq, &cm->recv_cq_channel}}) {
    if (*cq != nullptr) ibv_destroy_cq(*cq);
    if (*channel != nullptr) ibv_destroy_comp_channel(*channel);
    *cq = nullptr;
    *channel = nullptr;
  }
  id.own_cqs = false;
}

}  // namespace softrdma::rdmacm

using namespace softrdma::rdmacm;

SRDMA_RDMACM_VERSION(rdma_create_ep, "RDMACM_1.0")
int srdma_rdmacm_rdma_create_ep(rdma_cm_id** out, rdma_addrinfo* res, ibv_pd* pd, ibv_qp_init_attr* qp_init_attr) {
  if (out == nullptr || res == nullptr) return fail(EINVAL);
  rdma_cm_id* cm = nullptr;
  const rdma_port_space ps = static_cast<rdma_port_space>(res->ai_port_space);
  if (rdma_create_id(nullptr, &cm, nullptr, ps) != 0) return -1;
  const auto undo = [cm](int err) {
    rdma_destroy_id(cm);
    return fail(err);
  };
  if (res->ai_flags & RAI_PASSIVE) {
    if (rdma_bind_addr(cm, res->ai_src_addr) != 0) return undo(errno);
  } else {
    if (rdma_resolve_addr(cm, res->ai_src_addr, res->ai_dst_addr, 2000) != 0) return undo(errno);
    if (rdma_resolve_route(cm, 2000) != 0) return undo(errno);
  }
  if (qp_init_attr != nullptr) {
    // The QP's type is the address's (rdma_getaddrinfo's ai_qp_type), whatever the caller left.
    qp_init_attr->qp_type = res->ai_qp_type != 0 ? static_cast<ibv_qp_type>(res->ai_qp_type) : cm->qp_type;
    if (pd != nullptr) cm->pd = pd;
    if (res->ai_flags & RAI_PASSIVE) {
      id_of(cm).request_qp = *qp_init_attr;  // a listener has no QP; its requests get one each
    } else if (rdma_create_qp(cm, pd, qp_init_attr) != 0) {
      return undo(errno);
    }
  }
  *out = cm;
  return 0;
}

SRDMA_RDMACM_VERSION(rdma_destroy_ep, "RDMACM_1.0")
void srdma_rdmacm_rdma_destroy_ep(rdma_cm_id* cm) {
  if (cm == nullptr) return;
  if (cm->qp != nullptr) rdma_destroy_qp(cm);
  if (cm->srq != nullptr) rdma_destroy_srq(cm);
  destroy_own_cqs(id_of(cm));
  rdma_destroy_id(cm);
}

SRDMA_RDMACM_VERSION(rdma_get_request, "RDMACM_1.0")
int srdma_rdmacm_rdma_get_request(rdma_cm_id* listen, rdma_cm_id** out) {
  if (listen == nullptr || out == nullptr) return fail(EINVAL);
  Id& listener = id_of(listen);
  // A request's shell cannot move to a channel of its own (rdma_migrate_id).
  if (listener.sys != nullptr) return fail(EOPNOTSUPP);
  if (!listener.own_channel || listener.state != IdState::listening) return fail(EINVAL);
  for (;;) {
    rdma_cm_event* event = nullptr;
    if (rdma_get_cm_event(listen->channel, &event) != 0) return -1;
    if (event->event != RDMA_CM_EVENT_CONNECT_REQUEST) {
      rdma_ack_cm_event(event);
      continue;
    }
    rdma_cm_id* child = event->id;
    // The request's ID is synchronous too, on a channel of its own, and keeps the event for
    // the application to read (rdma_get_request(3): id->event).
    Id& c = id_of(child);
    {
      std::lock_guard lock(c.mutex);
      --c.unacked_events;  // the ID owns it now: rdma_accept, rdma_reject or rdma_destroy_id frees it
    }
    if (rdma_migrate_id(child, nullptr) != 0) return -1;
    child->event = event;
    if (listen->pd != nullptr) child->pd = listen->pd;
    if (listener.request_qp) {
      ibv_qp_init_attr attr = *listener.request_qp;
      if (rdma_create_qp(child, listen->pd, &attr) != 0) {
        const int err = errno;
        rdma_reject(child, nullptr, 0);
        rdma_destroy_id(child);
        return fail(err);
      }
    }
    *out = child;
    return 0;
  }
}

SRDMA_RDMACM_VERSION(rdma_create_srq_ex, "RDMACM_1.0")
int srdma_rdmacm_rdma_create_srq_ex(rdma_cm_id* cm, ibv_srq_init_attr_ex* attr) {
  SRDMA_CM_FORWARD_IF_SYSTEM(cm, rdma_create_srq_ex, attr);
  if (cm == nullptr || attr == nullptr || cm->verbs == nullptr) return fail(EINVAL);
  if (!(attr->comp_mask & IBV_SRQ_INIT_ATTR_PD) || attr->pd == nullptr) {
    attr->pd = cm->pd != nullptr ? cm->pd : dev().pd;
    attr->comp_mask |= IBV_SRQ_INIT_ATTR_PD;
  }
  ibv_srq* srq = ibv_create_srq_ex(cm->verbs, attr);
  if (srq == nullptr) return -1;
  cm->srq = srq;
  return 0;
}

SRDMA_RDMACM_VERSION(rdma_create_srq, "RDMACM_1.0")
int srdma_rdmacm_rdma_create_srq(rdma_cm_id* cm, ibv_pd* pd, ibv_srq_init_attr* attr) {
  SRDMA_CM_FORWARD_IF_SYSTEM(cm, rdma_create_srq, pd, attr);
  if (cm == nullptr || attr == nullptr || cm->verbs == nullptr) return fail(EINVAL);
  ibv_srq* srq = ibv_create_srq(pd != nullptr ? pd : (cm->pd != nullptr ? cm->pd : dev().pd), attr);
  if (srq == nullptr) return -1;
  cm->srq = srq;
  return 0;
}

SRDMA_RDMACM_VERSION(rdma_destroy_srq, "RDMACM_1.0")
void srdma_rdmacm_rdma_destroy_srq(rdma_cm_id* cm) {
  SRDMA_CM_FORWARD_IF_SYSTEM(cm, rdma_destroy_srq);
  if (cm == nullptr || cm->srq == nullptr) return;
  ibv_destroy_srq(cm->srq);
  cm->srq = nullptr;
}
