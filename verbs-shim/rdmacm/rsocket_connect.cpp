// Opening rsockets: rsocket, rbind, rlisten, raccept, rconnect, and the steps between (address
// and route resolution, the REQ carrying our connection data, the REP carrying the peer's),
// all through this library's own rdma_cm calls on an ID with an event channel of its own.
// A non-blocking rconnect answers EINPROGRESS and the steps advance whenever the socket is
// used (rpoll, rsend, rrecv), as with rdma-core's. Also the CM events of a connected socket:
// an accepted socket's RTU, and the peer's DREQ.
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <new>

#include "verbs-shim/rdmacm/rsocket_state.hpp"

namespace softrdma::rsockets {
namespace {

constexpr int kResolveTimeoutMs = 2000;
constexpr int kAcceptWakeMs = 100;

socklen_t length_of(const sockaddr* a) { return a->sa_family == AF_INET6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in); }

// An address a stream rsocket can use: 0, or an errno value.
int check_address(const sockaddr* a, socklen_t len) {
  if (a == nullptr || len < sizeof(sa_family_t)) return EINVAL;
  if (a->sa_family != AF_INET && a->sa_family != AF_INET6) return EAFNOSUPPORT;
  return len < length_of(a) ? EINVAL : 0;
}

// Copies an address out as getsockname(2) does: truncated to the caller's room, the full
// length reported.
void copy_out(const sockaddr_storage& from, sockaddr* to, socklen_t* len) {
  if (to == nullptr || len == nullptr) return;
  const socklen_t full = length_of(reinterpret_cast<const sockaddr*>(&from));
  std::memcpy(to, &from, std::min(*len, full));
  *len = full;
}

rdma_event_channel* own_channel() {
  rdma_event_channel* c = rdma_create_event_channel();
  if (c != nullptr) ::fcntl(c->fd, F_SETFL, ::fcntl(c->fd, F_GETFL) | O_NONBLOCK);
  return c;
}

void connect_failed(Rsocket& s, int err) {
  s.phase = Phase::connect_error;
  s.err = err;
}

// The active side's steps, one CM event each.
void on_opening_event(Rsocket& s, rdma_cm_event_type type, int status, const std::uint8_t* data, std::size_t len) {
  const int cause = status < 0 ? -status : 0;
  switch (s.phase) {
    case Phase::resolving_addr:
      if (type != RDMA_CM_EVENT_ADDR_RESOLVED) return connect_failed(s, cause ? cause : EHOSTUNREACH);
      if (rdma_resolve_route(s.id, kResolveTimeoutMs) != 0) return connect_failed(s, errno);
      s.phase = Phase::resolving_route;
      return;
    case Phase::resolving_route: {
      if (type != RDMA_CM_EVENT_ROUTE_RESOLVED) return connect_failed(s, cause ? cause : EHOSTUNREACH);
      if (const int err = create_endpoint(s)) return connect_failed(s, err);
      std::uint8_t mine[wire::kConnDataSize];
      wire::emit(conn_data(s), std::span<std::uint8_t, wire::kConnDataSize>(mine));
      rdma_conn_param param{};
      param.private_data = mine;
      param.private_data_len = sizeof mine;
      param.flow_control = 1;
      param.retry_count = 7;
      param.rnr_retry_count = 7;  // infinite: a receiver short of receives is not an error
      if (rdma_connect(s.id, &param) != 0) return connect_failed(s, errno);
      s.phase = Phase::connecting;
      return;
    }
    case Phase::connecting:
      if (type == RDMA_CM_EVENT_ESTABLISHED) {
        if (data == nullptr || len < wire::kConnDataSize) {
          rdma_disconnect(s.id);
          return connect_failed(s, EPROTO);
        }
        const wire::ConnData peer =
            wire::parse(std::span<const std::uint8_t, wire::kConnDataSize>(data, wire::kConnDataSize));
        if (peer.version != wire::kVersion) {
          rdma_disconnect(s.id);
          return connect_failed(s, EOPNOTSUPP);
        }
        save_conn_data(s, peer);
        s.phase = Phase::connected;
        s.readable = s.writable = true;
        s.established = true;
        return;
      }
      if (type == RDMA_CM_EVENT_REJECTED) return connect_failed(s, ECONNREFUSED);
      if (type == RDMA_CM_EVENT_UNREACHABLE) return connect_failed(s, cause ? cause : ETIMEDOUT);
      if (type == RDMA_CM_EVENT_CONNECT_ERROR || type == RDMA_CM_EVENT_DISCONNECTED)
        return connect_failed(s, cause ? cause : ECONNRESET);
      return;
    default:
      return;
  }
}

void on_connected_event(Rsocket& s, rdma_cm_event_type type) {
  switch (type) {
    case RDMA_CM_EVENT_ESTABLISHED:
      s.established = true;  // an accepted socket's RTU: the peer's QP is ready for ours
      return;
    case RDMA_CM_EVENT_DISCONNECTED:
      // The peer's DREQ: answer it. What it wrote before is in the CQ and stays readable.
      rdma_disconnect(s.id);
      if (s.phase == Phase::connected) s.phase = Phase::disconnected;
      s.readable = s.writable = false;
      return;
    case RDMA_CM_EVENT_REJECTED:
    case RDMA_CM_EVENT_CONNECT_ERROR:
    case RDMA_CM_EVENT_UNREACHABLE:
      if (s.phase == Phase::connected) {
        s.phase = Phase::error;
        s.err = ECONNRESET;
        s.readable = s.writable = false;
      }
      return;
    default:
      return;
  }
}

}  // namespace

void handle_cm_events(Rsocket& s) {
  // A listener's requests wait on its channel for raccept.
  if (s.channel == nullptr || s.phase == Phase::listening) return;
  for (;;) {
    rdma_cm_event* e = nullptr;
    if (rdma_get_cm_event(s.channel, &e) != 0) return;  // EAGAIN: none
    const rdma_cm_event_type type = e->event;
    const int status = e->status;
    std::uint8_t data[256];
    std::size_t len = 0;
    if (e->param.conn.private_data != nullptr) {
      len = std::min<std::size_t>(e->param.conn.private_data_len, sizeof data);
      std::memcpy(data, e->param.conn.private_data, len);
    }
    rdma_ack_cm_event(e);
    if (opening(s.phase)) {
      on_opening_event(s, type, status, len != 0 ? data : nullptr, len);
    } else {
      on_connected_event(s, type);
    }
  }
}

}  // namespace softrdma::rsockets

using namespace softrdma::rsockets;

SRDMA_RDMACM_VERSION(rsocket, "RDMACM_1.0")
int srdma_rdmacm_rsocket(int domain, int type, int protocol) {
  if (domain != AF_INET && domain != AF_INET6) return fail(EAFNOSUPPORT);
  const int base = type & ~(SOCK_NONBLOCK | SOCK_CLOEXEC);
  if (base == SOCK_DGRAM) return fail(EOPNOTSUPP);  // UDP rsockets are not implemented
  if (base != SOCK_STREAM) return fail(ESOCKTNOSUPPORT);
  if (protocol != 0 && protocol != IPPROTO_TCP) return fail(EPROTONOSUPPORT);
  auto s = std::make_shared<Rsocket>();
  s->domain = domain;
  if (type & SOCK_NONBLOCK) s->fd_flags = O_NONBLOCK;
  s->channel = own_channel();
  if (s->channel == nullptr) return -1;
  if (rdma_create_id(s->channel, &s->id, s.get(), RDMA_PS_TCP) != 0) {
    const int err = errno;
    destroy(*s);
    return fail(err);
  }
  s->fd = s->channel->fd;
  insert(s);
  return s->fd;
}

SRDMA_RDMACM_VERSION(rbind, "RDMACM_1.0")
int srdma_rdmacm_rbind(int socket, const sockaddr* addr, socklen_t addrlen) {
  const Ptr s = find(socket);
  if (!s) return fail(EBADF);
  if (const int err = check_address(addr, addrlen)) return fail(err);
  std::lock_guard lock(s->mutex);
  if (s->phase != Phase::idle) return fail(EINVAL);
  sockaddr_storage copy{};
  std::memcpy(&copy, addr, length_of(addr));
  if (rdma_bind_addr(s->id, reinterpret_cast<sockaddr*>(&copy)) != 0) {
    // An address no device of ours holds: as bind(2) says it.
    return fail(errno == ENODEV ? EADDRNOTAVAIL : errno);
  }
  s->phase = Phase::bound;
  return 0;
}

SRDMA_RDMACM_VERSION(rlisten, "RDMACM_1.0")
int srdma_rdmacm_rlisten(int socket, int backlog) {
  const Ptr s = find(socket);
  if (!s) return fail(EBADF);
  std::lock_guard lock(s->mutex);
  if (s->phase == Phase::listening) return 0;
  if (s->phase != Phase::idle && s->phase != Phase::bound) return fail(EINVAL);
  if (rdma_listen(s->id, backlog) != 0) return -1;
  s->phase = Phase::listening;
  return 0;
}

SRDMA_RDMACM_VERSION(raccept, "RDMACM_1.0")
int srdma_rdmacm_raccept(int socket, sockaddr* addr, socklen_t* addrlen) {
  const Ptr l = find(socket);
  if (!l) return fail(EBADF);
  rdma_cm_id* child = nullptr;
  std::uint8_t data[wire::kConnDataSize] = {};
  std::size_t len = 0;
  rdma_conn_param asked{};
  Options inherited;
  bool blocking = true;
  {
    std::unique_lock lock(l->mutex);
    if (l->phase != Phase::listening) return fail(EINVAL);
    blocking = !(l->fd_flags & O_NONBLOCK);
    while (child == nullptr) {
      rdma_cm_event* e = nullptr;
      if (rdma_get_cm_event(l->channel, &e) == 0) {
        if (e->event == RDMA_CM_EVENT_CONNECT_REQUEST) {
          child = e->id;
          asked = e->param.conn;
          len = std::min<std::size_t>(e->param.conn.private_data_len, sizeof data);
          if (e->param.conn.private_data != nullptr) std::memcpy(data, e->param.conn.private_data, len);
        }
        rdma_ack_cm_event(e);
        continue;
      }
      if (errno != EAGAIN && errno != EWOULDBLOCK) return -1;
      if (!blocking) return fail(EAGAIN);
      pollfd p{l->channel->fd, POLLIN, 0};
      lock.unlock();
      ::poll(&p, 1, kAcceptWakeMs);
      lock.lock();
      if (l->phase != Phase::listening) return fail(EINVAL);
    }
    inherited = l->opt;  // buffer and queue sizes, inline and iomap sizes; not O_NONBLOCK
    inherited.route.clear();
  }

  auto s = std::make_shared<Rsocket>();
  s->domain = l->domain;
  s->opt = inherited;
  const auto refuse = [&](int err) {
    rdma_reject(child, nullptr, 0);
    if (s->id == nullptr) rdma_destroy_id(child);
    destroy(*s);
    return fail(err);
  };
  s->channel = own_channel();
  if (s->channel == nullptr) return refuse(errno);
  if (rdma_migrate_id(child, s->channel) != 0) return refuse(errno);
  s->id = child;
  child->context = s.get();
  if (len < wire::kConnDataSize) return refuse(EPROTO);
  const wire::ConnData peer =
      wire::parse(std::span<const std::uint8_t, wire::kConnDataSize>(data, wire::kConnDataSize));
  if (peer.version != wire::kVersion) return refuse(EOPNOTSUPP);
  std::unique_lock lock(s->mutex);
  if (const int err = create_endpoint(*s)) return refuse(err);
  save_conn_data(*s, peer);
  std::uint8_t mine[wire::kConnDataSize];
  wire::emit(conn_data(*s), std::span<std::uint8_t, wire::kConnDataSize>(mine));
  rdma_conn_param param{};
  param.private_data = mine;
  param.private_data_len = sizeof mine;
  param.responder_resources = asked.responder_resources;
  param.initiator_depth = asked.initiator_depth;
  param.flow_control = 1;
  param.rnr_retry_count = 7;
  if (rdma_accept(child, &param) != 0) {
    const int err = errno;
    destroy(*s);
    return fail(err);
  }
  // Receives may arrive from now on; sends wait for the RTU (established).
  s->phase = Phase::connected;
  s->readable = s->writable = true;
  s->fd = s->channel->fd;
  insert(s);
  if (blocking) {
    wait_until(*s, lock, false, [&s] { return s->established || s->phase != Phase::connected; });
    if (!s->established && s->phase != Phase::connected) {
      lock.unlock();
      close_socket(s->fd);
      return fail(ECONNABORTED);
    }
  }
  copy_out(s->id->route.addr.dst_storage, addr, addrlen);
  return s->fd;
}

SRDMA_RDMACM_VERSION(rconnect, "RDMACM_1.0")
int srdma_rdmacm_rconnect(int socket, const sockaddr* addr, socklen_t addrlen) {
  const Ptr s = find(socket);
  if (!s) return fail(EBADF);
  if (const int err = check_address(addr, addrlen)) return fail(err);
  std::unique_lock lock(s->mutex);
  switch (s->phase) {
    case Phase::idle:
    case Phase::bound: {
      sockaddr_storage dst{};
      std::memcpy(&dst, addr, length_of(addr));
      if (rdma_resolve_addr(s->id, nullptr, reinterpret_cast<sockaddr*>(&dst), kResolveTimeoutMs) != 0) {
        const int err = errno == ENODEV ? ENETUNREACH : errno;
        connect_failed(*s, err);
        s->err = 0;
        return fail(err);
      }
      s->phase = Phase::resolving_addr;
      break;
    }
    case Phase::resolving_addr:
    case Phase::resolving_route:
    case Phase::connecting:
      progress(*s);
      if (opening(s->phase) && (s->fd_flags & O_NONBLOCK)) return fail(EALREADY);
      break;
    case Phase::connected:
    case Phase::disconnected:
    case Phase::error:
      return fail(EISCONN);
    default:
      return fail(EINVAL);
  }
  wait_until(*s, lock, (s->fd_flags & O_NONBLOCK) != 0, [&s] { return !opening(s->phase); });
  if (opening(s->phase)) return fail(EINPROGRESS);
  if (s->phase == Phase::connect_error) {
    const int err = s->err;
    s->err = 0;  // reported here, as connect(2) reports it, not again through SO_ERROR
    return fail(err);
  }
  return 0;
}

SRDMA_RDMACM_VERSION(rgetpeername, "RDMACM_1.0")
int srdma_rdmacm_rgetpeername(int socket, sockaddr* addr, socklen_t* addrlen) {
  const Ptr s = find(socket);
  if (!s) return fail(EBADF);
  if (addr == nullptr || addrlen == nullptr) return fail(EFAULT);
  std::lock_guard lock(s->mutex);
  if (s->phase != Phase::connected && s->phase != Phase::disconnected && s->phase != Phase::error)
    return fail(ENOTCONN);
  copy_out(s->id->route.addr.dst_storage, addr, addrlen);
  return 0;
}

SRDMA_RDMACM_VERSION(rgetsockname, "RDMACM_1.0")
int srdma_rdmacm_rgetsockname(int socket, sockaddr* addr, socklen_t* addrlen) {
  const Ptr s = find(socket);
  if (!s) return fail(EBADF);
  if (addr == nullptr || addrlen == nullptr) return fail(EFAULT);
  std::lock_guard lock(s->mutex);
  sockaddr_storage local = s->id->route.addr.src_storage;
  if (local.ss_family == 0) local.ss_family = static_cast<sa_family_t>(s->domain);  // unbound: any, port 0
  copy_out(local, addr, addrlen);
  return 0;
}
