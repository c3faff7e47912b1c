// Connections on the iWARP device, as rdma_cm makes them over the kernel's iw_cm: the active
// side's QP and MPA offer go to the iWARP CM (core/iwarp_cm.hpp), which opens the TCP
// connection, runs the MPA exchange (RFC 5044 s7, RFC 6581) and moves the QP to RTS itself;
// this library moves no QP past INIT. Private data travels as is (no annex A11 header, which
// is the IB CM's), and the IRD and ORD the consumers ask for are the MPA offer's (RFC 6581
// s5): responder_resources is the IRD, initiator_depth the ORD.
#include <algorithm>
#include <cerrno>
#include <cstring>

#include "emulator/core/qp_transition.hpp"
#include "emulator/host/device_link.hpp"
#include "verbs-shim/rdmacm/cm_objects.hpp"

namespace softrdma::rdmacm {
namespace {

// The engine's max_qp_rd_atom, the same as its max_qp_init_rd_atom.
constexpr std::uint16_t kMaxReads = core::DeviceLimits{}.max_qp_rd_atom;
static_assert(kMaxReads == core::DeviceLimits{}.max_qp_init_rd_atom);

core::MpaOffer offer_of(const rdma_conn_param* param) {
  core::MpaOffer offer;
  offer.ird = offer.ord = kMaxReads;
  if (param == nullptr) return offer;
  offer.ird = std::min<std::uint16_t>(param->responder_resources, kMaxReads);
  offer.ord = std::min<std::uint16_t>(param->initiator_depth, kMaxReads);
  if (param->private_data != nullptr) {
    const auto* bytes = static_cast<const std::uint8_t*>(param->private_data);
    offer.private_data.assign(bytes, bytes + param->private_data_len);
  }
  return offer;
}

void to_sockaddr(const core::TcpEndpoint& e, sockaddr_storage& out) {
  out = {};
  if (core::is_ipv4_mapped(e.address)) {
    auto* v4 = reinterpret_cast<sockaddr_in*>(&out);
    v4->sin_family = AF_INET;
    v4->sin_port = htons(e.port);
    std::memcpy(&v4->sin_addr, e.address.data() + 12, 4);
  } else {
    auto* v6 = reinterpret_cast<sockaddr_in6*>(&out);
    v6->sin6_family = AF_INET6;
    v6->sin6_port = htons(e.port);
    std::memcpy(&v6->sin6_addr, e.address.data(), 16);
  }
}

// The event's private data and the peer's IRD and ORD, as the kernel's cma reports them.
void set_conn_param(Event& out, const core::IwarpEvent& e) {
  const std::size_t length = std::min<std::size_t>(e.private_data.size(), 255);  // private_data_len is 8 bits
  std::copy_n(e.private_data.begin(), length, out.private_data.begin());
  rdma_conn_param& c = out.event.param.conn;
  c.private_data = out.private_data.data();
  c.private_data_len = static_cast<std::uint8_t>(length);
  c.initiator_depth = static_cast<std::uint8_t>(std::min<std::uint16_t>(e.ird, 255));
  c.responder_resources = static_cast<std::uint8_t>(std::min<std::uint16_t>(e.ord, 255));
}

bool on_request(Id& listener, const core::IwarpEvent& e, Event& out) {
  sockaddr_storage local, remote;
  to_sockaddr(e.local, local);
  to_sockaddr(e.remote, remote);
  Id* child = new_passive_id(listener, local, remote, e.remote.address);
  if (child == nullptr) {
    dev().link->iw_reject(e.id, {});
    return false;
  }
  route_connection(*child, e.id);
  out.event.id = &child->id;
  out.event.listen_id = &listener.id;
  out.event.event = RDMA_CM_EVENT_CONNECT_REQUEST;
  set_conn_param(out, e);
  return true;
}

// How a connection that did not come up is reported: a refusal (TCP's, or an MPA reject) as
// REJECTED, no answer as UNREACHABLE, anything else as CONNECT_ERROR, each with its errno.
void not_connected(const core::IwarpEvent& e, Event& out) {
  switch (e.type) {
    case core::IwarpEventType::rejected:
      out.event.event = RDMA_CM_EVENT_REJECTED;
      out.event.status = -(e.status != 0 ? e.status : ECONNREFUSED);
      set_conn_param(out, e);
      return;
    case core::IwarpEventType::unreachable:
      out.event.event = RDMA_CM_EVENT_UNREACHABLE;
      out.event.status = -(e.status != 0 ? e.status : ETIMEDOUT);
      return;
    default:
      out.event.event = RDMA_CM_EVENT_CONNECT_ERROR;
      out.event.status = -(e.status != 0 ? e.status : ECONNRESET);
      return;
  }
}

}  // namespace

core::TcpEndpoint endpoint_of(const sockaddr* address, std::uint16_t port) {
  const sockaddr* at = is_wildcard(address) ? reinterpret_cast<const sockaddr*>(&dev().address) : address;
  return {gid_of(at), port};
}

void destroy_connection(std::uint32_t connection) {
  const Device& d = dev();
  if (d.iwarp) {
    d.link->iw_destroy(connection);
  } else {
    d.link->cm_destroy(connection);
  }
}

bool translate(Id& id, const core::IwarpEvent& e, Event& out) {
  out.event.id = &id.id;
  switch (e.type) {
    case core::IwarpEventType::connect_request:
      return on_request(id, e, out);
    case core::IwarpEventType::established:
      id.state = IdState::connected;
      out.event.event = RDMA_CM_EVENT_ESTABLISHED;
      set_conn_param(out, e);
      return true;
    case core::IwarpEventType::disconnected:
      id.peer_disconnected = id.state != IdState::disconnecting;
      id.state = IdState::disconnected;
      out.event.event = RDMA_CM_EVENT_DISCONNECTED;
      return true;
    default:
      id.state = IdState::disconnected;
      not_connected(e, out);
      return true;
  }
}

int iwarp_connect(Id& id, const rdma_conn_param* param) {
  // The CM attaches a QP's stream as the exchange ends: an iWARP connection needs its QP.
  if (id.id.qp == nullptr || id.id.qp->qp_type != IBV_QPT_RC) return fail(EINVAL);
  const sockaddr* peer = &id.id.route.addr.dst_addr;
  const auto started = dev().link->iw_connect(endpoint_of(peer, port_of(peer)), id.id.qp->qp_num, offer_of(param));
  if (!started) return fail(started.error());
  id.state = IdState::connecting;
  route_connection(id, *started);
  return id.own_channel ? wait_for(id, RDMA_CM_EVENT_ESTABLISHED) : 0;
}

int iwarp_accept(Id& id, const rdma_conn_param* param) {
  if (id.id.qp == nullptr) return fail(EINVAL);
  if (const int err = dev().link->iw_accept(id.connection, id.id.qp->qp_num, offer_of(param))) return fail(err);
  id.state = IdState::accepted;
  return id.own_channel ? wait_for(id, RDMA_CM_EVENT_ESTABLISHED) : 0;
}

int iwarp_reject(Id& id, std::span<const std::uint8_t> private_data) {
  if (const int err = dev().link->iw_reject(id.connection, private_data)) return fail(err);
  id.state = IdState::disconnected;
  return 0;
}

// The CM moves the QP to ERR (its WRs flush) and closes the connection once its bytes are out.
// A connection the peer has closed already, whether or not its event has been taken, has
// nothing left to end: the call succeeds, as the kernel's iw_cm_disconnect does then.
int iwarp_disconnect(Id& id) {
  const bool up = id.state == IdState::connected || id.state == IdState::accepted;
  if (!up && !id.peer_disconnected) return fail(EINVAL);
  id.peer_disconnected = false;
  if (up && dev().link->iw_disconnect(id.connection) == 0) id.state = IdState::disconnecting;
  return 0;
}

}  // namespace softrdma::rdmacm
