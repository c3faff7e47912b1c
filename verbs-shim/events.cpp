// Completion channels and async events: real descriptors an application can poll().
//
// Both are SOCK_SEQPACKET socket pairs carrying one record per datagram: the application
// reads (and polls, and sets O_NONBLOCK on) one end; the shim writes the other. A read then
// blocks exactly when rdma-core's would, and fails with EAGAIN when the application made the
// descriptor non-blocking (verbs-abi.md §4.3).
#include <sys/socket.h>
#include <unistd.h>

#include <new>

#include "verbs-shim/context.hpp"
#include "verbs-shim/system_rdma_core.hpp"

namespace softrdma::shim {

namespace {

struct CompChannel {
  ibv_comp_channel channel;  // first: the application holds &channel
  int post_fd = -1;          // where armed CQs' notifications are written
};

// Bumps an object's acknowledged-event counter and wakes a destroy waiting for it: the
// counters, mutex and cond are public fields of ibv_cq/qp/srq/wq that destroy reads.
void acknowledge(pthread_mutex_t& mutex, pthread_cond_t& cond, unsigned int& counter, unsigned int n) {
  pthread_mutex_lock(&mutex);
  counter += n;
  pthread_cond_signal(&cond);
  pthread_mutex_unlock(&mutex);
}

// The context of the object an event is about; null for a device's or a port's event, which
// names only the device.
const ibv_context* event_context(const ibv_async_event& event) {
  const auto& e = event.element;
  switch (event_object(event.event_type)) {
    case EventObject::cq:
      return e.cq->context;
    case EventObject::qp:
      return e.qp->context;
    case EventObject::srq:
      return e.srq->context;
    case EventObject::wq:
      return e.wq->context;
    case EventObject::none:
      break;
  }
  return nullptr;
}

}  // namespace

EventObject event_object(ibv_event_type type) {
  switch (type) {
    case IBV_EVENT_CQ_ERR:
      return EventObject::cq;
    case IBV_EVENT_QP_FATAL:
    case IBV_EVENT_QP_REQ_ERR:
    case IBV_EVENT_QP_ACCESS_ERR:
    case IBV_EVENT_COMM_EST:
    case IBV_EVENT_SQ_DRAINED:
    case IBV_EVENT_PATH_MIG:
    case IBV_EVENT_PATH_MIG_ERR:
    case IBV_EVENT_QP_LAST_WQE_REACHED:
      return EventObject::qp;
    case IBV_EVENT_SRQ_ERR:
    case IBV_EVENT_SRQ_LIMIT_REACHED:
      return EventObject::srq;
    case IBV_EVENT_WQ_FATAL:
      return EventObject::wq;
    default:
      return EventObject::none;
  }
}

void wait_acknowledged(pthread_mutex_t& mutex, pthread_cond_t& cond, const unsigned int& counter, unsigned int read) {
  pthread_mutex_lock(&mutex);
  while (counter != read) pthread_cond_wait(&cond, &mutex);
  pthread_mutex_unlock(&mutex);
}

void notify_channel(ibv_comp_channel* channel, ibv_cq* cq) {
  // Never blocks the notifying thread; a full socket means the application has thousands
  // of events unread, and one more would tell it nothing new.
  ::send(reinterpret_cast<CompChannel*>(channel)->post_fd, &cq, sizeof cq, MSG_DONTWAIT | MSG_NOSIGNAL);
}

void hold_channel(ibv_comp_channel* channel, int delta) {
  pthread_mutex_lock(&channel->context->mutex);
  channel->refcnt += delta;
  pthread_mutex_unlock(&channel->context->mutex);
}

}  // namespace softrdma::shim

using namespace softrdma::shim;

SRDMA_EXPORT ibv_comp_channel* ibv_create_comp_channel(ibv_context* context) {
  SRDMA_FORWARD_IF_SYSTEM(context, ibv_create_comp_channel, context);
  if (context == nullptr) {
    errno = EINVAL;
    return nullptr;
  }
  int pair[2];
  if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) != 0) return nullptr;
  auto* cc = new (std::nothrow) CompChannel{};
  if (cc == nullptr) {
    ::close(pair[0]);
    ::close(pair[1]);
    errno = ENOMEM;
    return nullptr;
  }
  cc->channel.context = context;
  cc->channel.fd = pair[0];
  cc->channel.refcnt = 0;
  cc->post_fd = pair[1];
  return &cc->channel;
}

SRDMA_EXPORT int ibv_destroy_comp_channel(ibv_comp_channel* channel) {
  SRDMA_FORWARD_IF_SYSTEM(channel, ibv_destroy_comp_channel, channel);
  if (channel == nullptr) return EINVAL;
  pthread_mutex_lock(&channel->context->mutex);
  const bool busy = channel->refcnt != 0;  // a CQ still reports to it
  pthread_mutex_unlock(&channel->context->mutex);
  if (busy) return EBUSY;
  auto* cc = reinterpret_cast<CompChannel*>(channel);
  ::close(cc->channel.fd);
  ::close(cc->post_fd);
  delete cc;
  return 0;
}

SRDMA_DEFAULT_VERSION(ibv_get_cq_event, "IBVERBS_1.1")
int srdma_default_ibv_get_cq_event(ibv_comp_channel* channel, ibv_cq** cq, void** cq_context) {
  SRDMA_FORWARD_IF_SYSTEM(channel, ibv_get_cq_event, channel, cq, cq_context);
  ibv_cq* which = nullptr;  // a notification is the CQ's address
  ssize_t n = ::recv(channel->fd, &which, sizeof which, 0);
  if (n != static_cast<ssize_t>(sizeof which)) {
    if (n >= 0) errno = EIO;
    return -1;
  }
  *cq = which;
  *cq_context = which->cq_context;
  return 0;
}

SRDMA_DEFAULT_VERSION(ibv_ack_cq_events, "IBVERBS_1.1")
void srdma_default_ibv_ack_cq_events(ibv_cq* cq, unsigned int nevents) {
  SRDMA_FORWARD_IF_SYSTEM(cq, ibv_ack_cq_events, cq, nevents);
  acknowledge(cq->mutex, cq->cond, cq->comp_events_completed, nevents);
}

SRDMA_DEFAULT_VERSION(ibv_get_async_event, "IBVERBS_1.1")
int srdma_default_ibv_get_async_event(ibv_context* context, ibv_async_event* event) {
  SRDMA_FORWARD_IF_SYSTEM(context, ibv_get_async_event, context, event);
  for (;;) {
    ssize_t n = ::recv(context->async_fd, event, sizeof *event, 0);
    if (n != static_cast<ssize_t>(sizeof *event)) {
      if (n >= 0) errno = EIO;
      return -1;
    }
    if (claim_async_event(context, *event)) return 0;  // else its object is gone: the next one
  }
}

SRDMA_DEFAULT_VERSION(ibv_ack_async_event, "IBVERBS_1.1")
void srdma_default_ibv_ack_async_event(ibv_async_event* event) {
  SRDMA_FORWARD_IF_SYSTEM(event_context(*event), ibv_ack_async_event, event);
  const auto& e = event->element;
  switch (event_object(event->event_type)) {
    case EventObject::cq:
      return acknowledge(e.cq->mutex, e.cq->cond, e.cq->async_events_completed, 1);
    case EventObject::qp:
      return acknowledge(e.qp->mutex, e.qp->cond, e.qp->events_completed, 1);
    case EventObject::srq:
      return acknowledge(e.srq->mutex, e.srq->cond, e.srq->events_completed, 1);
    case EventObject::wq:
      return acknowledge(e.wq->mutex, e.wq->cond, e.wq->events_completed, 1);
    case EventObject::none:
      return;  // the device's or a port's: nothing counts it
  }
}
