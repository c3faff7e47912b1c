// Communication IDs: creation, addresses, routes and listening. Resolution needs no traffic on
// softrdma (an IP address is its RoCEv2 GID, annex A17.4.5.1), so its events are queued at once.
#include <arpa/inet.h>

#include <cerrno>
#include <cstring>
#include <new>

#include "emulator/core/roce_headers.hpp"
#include "emulator/host/device_link.hpp"
#include "verbs-shim/rdmacm/cm_objects.hpp"
#include "verbs-shim/rdmacm/system_cm.hpp"

namespace softrdma::rdmacm {
namespace {

ibv_qp_type qp_type_for(rdma_port_space ps) {
  return ps == RDMA_PS_UDP || ps == RDMA_PS_IPOIB ? IBV_QPT_UD : IBV_QPT_RC;
}

bool known(rdma_port_space ps) {
  return ps == RDMA_PS_TCP || ps == RDMA_PS_UDP || ps == RDMA_PS_IPOIB || ps == RDMA_PS_IB;
}

// A synchronous ID's call waits for the event its asynchronous form would report.
int settle(Id& id, rdma_cm_event_type expected) { return id.own_channel ? wait_for(id, expected) : 0; }

// An unbound ID resolving a route is the kernel's when the source address, the one given or the
// one the kernel's routing picks, is one of the machine's RDMA devices' (0); ENODEV when it is
// softrdma's, another errno value when the kernel refuses it.
int adopt_for_route(Id& id, const sockaddr* src, const sockaddr* dst) {
  if (src != nullptr && !is_wildcard(src)) return system::adopt(id, src);
  sockaddr_storage source{};
  if (!system::route_source(dst, source)) return ENODEV;
  return system::adopt(id, reinterpret_cast<const sockaddr*>(&source));
}

}  // namespace

// The route of a RoCE port: one path whose GIDs are the two addresses' (s12.7.2's path record,
// as rdma_cm fills it on RoCE with no subnet administrator).
void fill_path(Id& id) {
  ibv_sa_path_rec& p = id.path;
  p = {};
  p.sgid = id.id.route.addr.addr.ibaddr.sgid;
  p.dgid = id.id.route.addr.addr.ibaddr.dgid;
  p.hop_limit = 64;
  p.traffic_class = id.tos;
  p.reversible = htonl(1);
  p.numb_path = 1;
  p.pkey = htons(0xFFFF);
  p.mtu_selector = 2;  // exactly
  ibv_port_attr port{};
  p.mtu = ibv_query_port(id.id.verbs, 1, &port) == 0 ? port.active_mtu : IBV_MTU_1024;
  p.rate_selector = 2;
  p.rate = 15;  // 25 Gb/s, the 1X EDR the port reports
  p.packet_life_time_selector = 2;
  id.id.route.path_rec = &p;
  id.id.route.num_paths = 1;
}

}  // namespace softrdma::rdmacm

using namespace softrdma::rdmacm;

SRDMA_RDMACM_VERSION(rdma_create_id, "RDMACM_1.0")
int srdma_rdmacm_rdma_create_id(rdma_event_channel* channel, rdma_cm_id** out, void* context, rdma_port_space ps) {
  if (out == nullptr || !known(ps)) return fail(EINVAL);
  auto* id = new (std::nothrow) Id;
  if (id == nullptr) return fail(ENOMEM);
  if (channel == nullptr) {
    channel = rdma_create_event_channel();
    if (channel == nullptr) {
      const int err = errno;
      delete id;
      return fail(err);
    }
    id->own_channel = true;
  }
  id->channel = &channel_of(channel);
  {
    std::lock_guard lock(id->channel->mutex);
    ++id->channel->ids;
  }
  id->id.channel = channel;
  id->id.context = context;
  id->id.ps = ps;
  id->id.qp_type = qp_type_for(ps);
  *out = &id->id;
  return 0;
}

SRDMA_RDMACM_VERSION(rdma_destroy_id, "RDMACM_1.0")
int srdma_rdmacm_rdma_destroy_id(rdma_cm_id* cm_id) {
  if (cm_id == nullptr) return fail(EINVAL);
  Id& id = id_of(cm_id);
  release_request_event(id);
  // No event reaches the ID from here on, and those not yet taken are dropped, as the kernel
  // drops a destroyed ID's; rdma_cma.h: destroying an ID waits until the events taken are
  // acknowledged.
  unroute(id);
  stop_listening(id);
  purge(id);
  {
    std::unique_lock lock(id.mutex);
    id.acked.wait(lock, [&id] { return id.unacked_events == 0 && id.events_in_hand.load() == 0; });
  }
  if (id.sys != nullptr) {
    system::destroy_kernel_id(id);
  } else if (id.connection != 0) {
    destroy_connection(id.connection);
  }
  release_port(id);
  {
    std::lock_guard lock(id.channel->mutex);
    --id.channel->ids;
  }
  if (id.own_channel) rdma_destroy_event_channel(&id.channel->channel);
  delete &id;
  return 0;
}

SRDMA_RDMACM_VERSION(rdma_bind_addr, "RDMACM_1.0")
int srdma_rdmacm_rdma_bind_addr(rdma_cm_id* cm_id, sockaddr* address) {
  if (cm_id == nullptr || address == nullptr) return fail(EINVAL);
  SRDMA_CM_FORWARD_IF_SYSTEM(cm_id, rdma_bind_addr, address);
  Id& id = id_of(cm_id);
  if (id.state != IdState::idle) return fail(EINVAL);
  if (const int err = system::adopt(id, address); err != ENODEV) return err == 0 ? 0 : fail(err);
  if (const int err = bind_and_listen(id, address)) return fail(err);
  return 0;
}

SRDMA_RDMACM_VERSION(rdma_resolve_addr, "RDMACM_1.0")
int srdma_rdmacm_rdma_resolve_addr(rdma_cm_id* cm_id, sockaddr* src, sockaddr* dst, int timeout_ms) {
  if (cm_id == nullptr || dst == nullptr || (dst->sa_family != AF_INET && dst->sa_family != AF_INET6))
    return fail(EINVAL);
  Id& id = id_of(cm_id);
  if (id.state == IdState::idle && id.sys == nullptr) {
    if (const int err = adopt_for_route(id, src, dst); err != 0 && err != ENODEV) return fail(err);
  }
  SRDMA_CM_FORWARD_SETTLE(cm_id, RDMA_CM_EVENT_ADDR_RESOLVED, rdma_resolve_addr, src, dst, timeout_ms);
  if (id.state == IdState::idle) {
    if (const int err = bind_id(id, src)) return fail(err);
  } else if (id.state != IdState::bound) {
    return fail(EINVAL);
  }
  stop_listening(id);  // bound to connect from, not to serve
  const Device* d = device(nullptr);
  std::memcpy(&id.id.route.addr.dst_storage, dst, address_length(dst));
  const core::Gid dgid = gid_of(dst);
  std::memcpy(id.id.route.addr.addr.ibaddr.dgid.raw, dgid.data(), 16);
  // The source is the device's address once resolved, even when the ID was bound to a wildcard.
  sockaddr_storage& srcs = id.id.route.addr.src_storage;
  std::memcpy(&srcs, &d->address, sizeof srcs);
  if (srcs.ss_family == AF_INET)
    reinterpret_cast<sockaddr_in*>(&srcs)->sin_port = htons(id.port);
  else
    reinterpret_cast<sockaddr_in6*>(&srcs)->sin6_port = htons(id.port);
  // One socket bound to one address: an IPv4 device cannot reach an IPv6 peer, nor the reverse.
  if (core::is_ipv4_mapped(d->gid) != core::is_ipv4_mapped(dgid)) {
    queue_local(id, RDMA_CM_EVENT_ADDR_ERROR, -EHOSTUNREACH);
    return settle(id, RDMA_CM_EVENT_ADDR_RESOLVED);
  }
  id.state = IdState::addr_resolved;
  queue_local(id, RDMA_CM_EVENT_ADDR_RESOLVED);
  return settle(id, RDMA_CM_EVENT_ADDR_RESOLVED);
}

SRDMA_RDMACM_VERSION(rdma_resolve_route, "RDMACM_1.0")
int srdma_rdmacm_rdma_resolve_route(rdma_cm_id* cm_id, int timeout_ms) {
  SRDMA_CM_FORWARD_SETTLE(cm_id, RDMA_CM_EVENT_ROUTE_RESOLVED, rdma_resolve_route, timeout_ms);
  if (cm_id == nullptr) return fail(EINVAL);
  Id& id = id_of(cm_id);
  if (id.state != IdState::addr_resolved) return fail(EINVAL);
  fill_path(id);
  id.state = IdState::route_resolved;
  queue_local(id, RDMA_CM_EVENT_ROUTE_RESOLVED);
  return settle(id, RDMA_CM_EVENT_ROUTE_RESOLVED);
}

SRDMA_RDMACM_VERSION(rdma_listen, "RDMACM_1.0")
int srdma_rdmacm_rdma_listen(rdma_cm_id* cm_id, int backlog) {
  if (cm_id == nullptr) return fail(EINVAL);
  Id& id = id_of(cm_id);
  if (id.state == IdState::idle && id.sys == nullptr) {
    // Listening unbound is listening on IPv4's wildcard, as the kernel binds it, which may be
    // the kernel's (system_cm.hpp).
    sockaddr_in any{};
    any.sin_family = AF_INET;
    if (const int err = system::adopt(id, reinterpret_cast<sockaddr*>(&any)); err != 0 && err != ENODEV) {
      return fail(err);
    }
  }
  SRDMA_CM_FORWARD_IF_SYSTEM(cm_id, rdma_listen, backlog);
  if (id.state == IdState::idle) {
    if (const int err = bind_and_listen(id, nullptr)) return fail(err);
  }
  if (id.state != IdState::bound) return fail(EINVAL);
  if (id.listener == 0) {
    if (const int err = start_listening(id)) return fail(err);
  }
  id.state = IdState::listening;
  accept_requests(id);
  return 0;
}

SRDMA_RDMACM_VERSION(rdma_get_src_port, "RDMACM_1.0")
__be16 srdma_rdmacm_rdma_get_src_port(rdma_cm_id* cm_id) {
  return cm_id == nullptr ? 0 : htons(port_of(&cm_id->route.addr.src_addr));
}

SRDMA_RDMACM_VERSION(rdma_get_dst_port, "RDMACM_1.0")
__be16 srdma_rdmacm_rdma_get_dst_port(rdma_cm_id* cm_id) {
  return cm_id == nullptr ? 0 : htons(port_of(&cm_id->route.addr.dst_addr));
}

SRDMA_RDMACM_VERSION(rdma_set_option, "RDMACM_1.0")
int srdma_rdmacm_rdma_set_option(rdma_cm_id* cm_id, int level, int optname, void* optval, size_t optlen) {
  SRDMA_CM_FORWARD_IF_SYSTEM(cm_id, rdma_set_option, level, optname, optval, optlen);
  if (cm_id == nullptr || optval == nullptr) return fail(EINVAL);
  Id& id = id_of(cm_id);
  if (level == RDMA_OPTION_ID) {
    switch (optname) {
      case RDMA_OPTION_ID_TOS:
        if (optlen != sizeof(std::uint8_t)) return fail(EINVAL);
        id.tos = *static_cast<std::uint8_t*>(optval);
        return 0;
      case RDMA_OPTION_ID_REUSEADDR:
      case RDMA_OPTION_ID_AFONLY:
        // Ports are this process's own (each process has its device); both are accepted as is.
        return optlen == sizeof(int) ? 0 : fail(EINVAL);
      case RDMA_OPTION_ID_ACK_TIMEOUT:
        if (optlen != sizeof(std::uint8_t)) return fail(EINVAL);
        id.ack_timeout = *static_cast<std::uint8_t*>(optval) & 0x1F;
        return 0;
      default:
        return fail(ENOSYS);
    }
  }
  if (level == RDMA_OPTION_IB && optname == RDMA_OPTION_IB_PATH) {
    // A path from the application's own resolution: softrdma's single path is the same.
    return optlen >= sizeof(ibv_path_data) ? 0 : fail(EINVAL);
  }
  return fail(ENOSYS);
}

SRDMA_RDMACM_VERSION(rdma_migrate_id, "RDMACM_1.0")
int srdma_rdmacm_rdma_migrate_id(rdma_cm_id* cm_id, rdma_event_channel* channel) {
  if (cm_id == nullptr) return fail(EINVAL);
  Id& id = id_of(cm_id);
  if (id.sys != nullptr) return fail(EOPNOTSUPP);  // its kernel ID stays on its channel's twin
  bool own = false;
  if (channel == nullptr) {
    channel = rdma_create_event_channel();
    if (channel == nullptr) return -1;
    own = true;
  }
  {
    std::unique_lock lock(id.mutex);
    id.acked.wait(lock, [&id] { return id.unacked_events == 0; });
  }
  Channel& from = *id.channel;
  Channel& to = channel_of(channel);
  std::deque<Queued> moving;
  {
    std::lock_guard lock(from.mutex);
    for (auto it = from.queue.begin(); it != from.queue.end();) {
      if (it->id == &id) {
        moving.push_back(std::move(*it));
        it = from.queue.erase(it);
      } else {
        ++it;
      }
    }
    --from.ids;
  }
  id.channel = &to;
  id.id.channel = channel;
  {
    std::lock_guard lock(to.mutex);
    ++to.ids;
  }
  for (Queued& q : moving) repost(id, std::move(q));
  if (id.own_channel) rdma_destroy_event_channel(&from.channel);
  id.own_channel = own;
  return 0;
}
