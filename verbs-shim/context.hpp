// The shim's device and context objects, shared by the files that implement the verbs.
#pragma once

#include "verbs-shim/host_link.hpp"
#include "verbs-shim/identity.hpp"
#include "verbs-shim/verbs_api.hpp"

namespace softrdma::shim {

// The devices, srdma0 and srdmaiw0, in static storage: a device must stay valid from
// ibv_get_device_list until the last context on it closes (verbs-abi.md §4.1), and static
// storage outlives both. Null when the device is absent (for srdma0: the configured address
// is unusable; for srdmaiw0: see iwarp_device()).
ibv_device* the_device();
ibv_device* the_iwarp_device();
// The started device behind one of those; null for any other pointer.
const BoundDevice* bound_of(ibv_device* device);

// rdma-core's extended context: the application holds &vctx.context, and the inline verbs in
// verbs.h find vctx (and its ops) at fixed negative offsets from it (verbs-abi.md §3.2, §4.2).
struct Context {
  verbs_context vctx;
  const BoundDevice* bound = nullptr;  // the device it was opened on
  int async_post_fd = -1;              // the shim's end of the async event socket pair
};

// The Context behind an ibv_context this shim opened (container_of on vctx.context).
Context& context_of(ibv_context* ctx);
const DeviceIdentity& identity_of(ibv_context* ctx);

// Queues an async event for ibv_get_async_event; 0 or an errno value. Called from whichever
// thread delivers the engine's events (host_link.cpp).
int post_async_event(ibv_context* ctx, const ibv_async_event& event);

// Which kind of object an async event of type `type` names in its element (events.cpp).
enum class EventObject { none, cq, qp, srq, wq };
EventObject event_object(ibv_event_type type);

// Waits until an object's acknowledged-event counter reaches the `read` events the application
// has read for it (untrack's count): the destroy of a QP, CQ or SRQ (events.cpp).
void wait_acknowledged(pthread_mutex_t& mutex, pthread_cond_t& cond, const unsigned int& counter, unsigned int read);

// Writes a notification for `cq` to its completion channel (events.cpp).
void notify_channel(ibv_comp_channel* channel, ibv_cq* cq);
// Counts the CQs that report to a channel (ibv_destroy_comp_channel fails with EBUSY while any
// does).
void hold_channel(ibv_comp_channel* channel, int delta);

// Fills ibv_context.ops and the verbs_context ops (inline_ops.cpp).
void install_ops(verbs_context& vctx);

// The verbs_context ops that query (query.cpp).
int query_port_op(ibv_context* ctx, std::uint8_t port_num, ibv_port_attr* attr, std::size_t attr_len);
int query_device_ex_op(ibv_context* ctx, const ibv_query_device_ex_input* input, ibv_device_attr_ex* attr,
                       std::size_t attr_size);

}  // namespace softrdma::shim
