// rsetsockopt, rgetsockopt and rfcntl: the options rsocket(7) lists. Supported: SOL_SOCKET
// SO_REUSEADDR, SO_RCVBUF, SO_SNDBUF (before the connection's buffers exist; doubled, as
// Linux doubles them), SO_LINGER, SO_KEEPALIVE, SO_OOBINLINE (kept and reported; no keepalive
// message is ever sent, and close never lingers), SO_ERROR and SO_TYPE (read only);
// IPPROTO_TCP TCP_NODELAY, TCP_MAXSEG, TCP_KEEPIDLE, TCP_KEEPCNT, TCP_KEEPINTVL (kept);
// IPPROTO_IPV6 IPV6_V6ONLY; SOL_RDMA RDMA_SQSIZE, RDMA_RQSIZE, RDMA_INLINE, RDMA_IOMAPSIZE,
// RDMA_ROUTE (before connecting). Any other option is EOPNOTSUPP, as rdma-core answers it;
// rfcntl knows F_GETFL and F_SETFL (O_NONBLOCK), and nothing else (EOPNOTSUPP).
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>

#include <algorithm>
#include <cerrno>
#include <cstdarg>
#include <cstring>

#include "verbs-shim/rdmacm/rsocket_state.hpp"

namespace softrdma::rsockets {
namespace {

void set_flag(std::uint64_t& flags, int name, bool on) {
  if (name < 0 || name >= 64) return;
  if (on) {
    flags |= std::uint64_t{1} << name;
  } else {
    flags &= ~(std::uint64_t{1} << name);
  }
}
bool flag(std::uint64_t flags, int name) { return name >= 0 && name < 64 && (flags >> name) & 1; }

int int_arg(const void* optval, socklen_t optlen, int& out) {
  if (optval == nullptr) return EFAULT;
  if (optlen < sizeof(int)) return EINVAL;
  std::memcpy(&out, optval, sizeof out);
  return 0;
}

int put_int(void* optval, socklen_t* optlen, int value) {
  if (optval == nullptr || optlen == nullptr) return EFAULT;
  if (*optlen < sizeof(int)) return EINVAL;
  std::memcpy(optval, &value, sizeof value);
  *optlen = sizeof(int);
  return 0;
}

// Options of the connection's resources: settable until it opens (a listener's pass to the
// sockets it accepts).
bool before_open(const Rsocket& s) {
  return s.phase == Phase::idle || s.phase == Phase::bound || s.phase == Phase::listening;
}

int set_socket_level(Rsocket& s, int name, const void* optval, socklen_t optlen) {
  if (name == SO_LINGER) {
    if (optval == nullptr) return EFAULT;
    if (optlen < sizeof(linger)) return EINVAL;
    linger l;
    std::memcpy(&l, optval, sizeof l);
    set_flag(s.opt.so_flags, SO_LINGER, l.l_onoff != 0);
    return 0;
  }
  int v = 0;
  if (const int err = int_arg(optval, optlen, v)) return err;
  switch (name) {
    case SO_REUSEADDR:
      // Ports are this process's own (each process has its own device, or its own ports on
      // softrdmad's): rdma_cm accepts the option and nothing changes.
      if (rdma_set_option(s.id, RDMA_OPTION_ID, RDMA_OPTION_ID_REUSEADDR, &v, sizeof v) != 0) return errno;
      break;
    case SO_RCVBUF:
      if (!s.rbuf) s.opt.rbuf_size = static_cast<std::uint32_t>(std::max(v, 1)) << 1;
      break;
    case SO_SNDBUF:
      if (!s.sbuf) s.opt.sbuf_size = std::max(static_cast<std::uint32_t>(std::max(v, 1)) << 1, 2 * kSendLowWater);
      break;
    case SO_KEEPALIVE:
    case SO_OOBINLINE:
      break;
    default:
      return EOPNOTSUPP;
  }
  set_flag(s.opt.so_flags, name, v != 0);
  return 0;
}

int set_tcp_level(Rsocket& s, int name, const void* optval, socklen_t optlen) {
  int v = 0;
  if (const int err = int_arg(optval, optlen, v)) return err;
  switch (name) {
    case TCP_NODELAY:
      set_flag(s.opt.tcp_flags, name, v != 0);  // every rsend is sent at once anyway
      return 0;
    case TCP_KEEPIDLE:
      if (v <= 0) return EINVAL;
      s.opt.keepalive_time = v;
      return 0;
    case TCP_MAXSEG:
    case TCP_KEEPCNT:
    case TCP_KEEPINTVL:
      return 0;  // nothing to segment, nothing to probe: RC is reliable
    default:
      return EOPNOTSUPP;
  }
}

int set_rdma_level(Rsocket& s, int name, const void* optval, socklen_t optlen) {
  if (name == RDMA_ROUTE) {
    if (!before_open(s)) return EINVAL;
    if (optval == nullptr) return EFAULT;
    // softrdma has one path between two addresses; the one given is kept for rgetsockopt.
    const auto* p = static_cast<const std::uint8_t*>(optval);
    s.opt.route.assign(p, p + optlen);
    return 0;
  }
  int v = 0;
  if (const int err = int_arg(optval, optlen, v)) return err;
  if (!before_open(s)) return EINVAL;
  const auto queue = static_cast<std::uint16_t>(std::min<std::uint32_t>(static_cast<std::uint32_t>(v), kQueueMax));
  switch (name) {
    case RDMA_SQSIZE:
      s.opt.sq_size = queue;
      return 0;
    case RDMA_RQSIZE:
      s.opt.rq_size = queue;
      return 0;
    case RDMA_INLINE:
      s.opt.sq_inline = queue;
      return 0;
    case RDMA_IOMAPSIZE:
      // Rounded to what the connection data's 8-bit field can say.
      s.opt.iomap_size = static_cast<std::uint16_t>(wire::value_of(wire::scale_of(std::clamp(v, 0, 0x7FFF))));
      return 0;
    default:
      return EOPNOTSUPP;
  }
}

// The connection's path as RDMA_ROUTE reports it (struct ibv_path_data), from the path rdma_cm
// resolved.
int get_route(const Rsocket& s, void* optval, socklen_t* optlen) {
  if (optval == nullptr || optlen == nullptr) return EFAULT;
  if (!s.opt.route.empty()) {
    if (*optlen < s.opt.route.size()) return EINVAL;
    std::memcpy(optval, s.opt.route.data(), s.opt.route.size());
    *optlen = static_cast<socklen_t>(s.opt.route.size());
    return 0;
  }
  if (*optlen < sizeof(ibv_path_data)) return EINVAL;
  socklen_t used = 0;
  if (s.id != nullptr && s.id->route.num_paths > 0 && s.id->route.path_rec != nullptr) {
    const ibv_sa_path_rec& r = *s.id->route.path_rec;
    ibv_path_data d{};
    d.flags = IBV_PATH_FLAG_PRIMARY | IBV_PATH_FLAG_BIDIRECTIONAL;
    d.path.dgid = r.dgid;
    d.path.sgid = r.sgid;
    d.path.dlid = r.dlid;
    d.path.slid = r.slid;
    d.path.flowlabel_hoplimit = htonl((ntohl(r.flow_label) << 8) | r.hop_limit);
    d.path.tclass = r.traffic_class;
    d.path.reversible_numpath = static_cast<std::uint8_t>((r.reversible ? 0x80 : 0) | 1);
    d.path.pkey = r.pkey;
    d.path.qosclass_sl = htons(r.sl & 0xF);
    const auto selected = [](std::uint8_t selector, std::uint8_t value) {
      return static_cast<std::uint8_t>((selector << 6) | (value & 0x3F));
    };
    d.path.mtu = selected(r.mtu_selector, r.mtu);
    d.path.rate = selected(r.rate_selector, r.rate);
    d.path.packetlifetime = selected(r.packet_life_time_selector, r.packet_life_time);
    d.path.preference = r.preference;
    std::memcpy(optval, &d, sizeof d);
    used = sizeof d;
  }
  *optlen = used;
  return 0;
}

int get_option(Rsocket& s, int level, int name, void* optval, socklen_t* optlen) {
  switch (level) {
    case SOL_SOCKET:
      switch (name) {
        case SO_REUSEADDR:
        case SO_KEEPALIVE:
        case SO_OOBINLINE:
          return put_int(optval, optlen, flag(s.opt.so_flags, name));
        case SO_RCVBUF:
          return put_int(optval, optlen, static_cast<int>(s.opt.rbuf_size));
        case SO_SNDBUF:
          return put_int(optval, optlen, static_cast<int>(s.opt.sbuf_size));
        case SO_TYPE:
          return put_int(optval, optlen, SOCK_STREAM);
        case SO_ERROR: {
          const int err = put_int(optval, optlen, s.err);
          if (err == 0) s.err = 0;
          return err;
        }
        case SO_LINGER: {
          if (optval == nullptr || optlen == nullptr) return EFAULT;
          if (*optlen < sizeof(linger)) return EINVAL;
          const linger l{flag(s.opt.so_flags, SO_LINGER) ? 1 : 0, 0};
          std::memcpy(optval, &l, sizeof l);
          *optlen = sizeof l;
          return 0;
        }
        default:
          return EOPNOTSUPP;
      }
    case IPPROTO_TCP:
      switch (name) {
        case TCP_NODELAY:
          return put_int(optval, optlen, flag(s.opt.tcp_flags, name));
        case TCP_MAXSEG: {
          // The path MTU in bytes (an IBV_MTU_* value n means 128 << n).
          const bool known = s.id != nullptr && s.id->route.num_paths > 0 && s.id->route.path_rec != nullptr;
          return put_int(optval, optlen, known ? 1 << (7 + s.id->route.path_rec->mtu) : 2048);
        }
        case TCP_KEEPIDLE:
          return put_int(optval, optlen, s.opt.keepalive_time);
        case TCP_KEEPCNT:
        case TCP_KEEPINTVL:
          return put_int(optval, optlen, 1);
        default:
          return EOPNOTSUPP;
      }
    case IPPROTO_IPV6:
      if (name == IPV6_V6ONLY) return put_int(optval, optlen, flag(s.opt.ipv6_flags, name));
      return EOPNOTSUPP;
    case SOL_RDMA:
      switch (name) {
        case RDMA_SQSIZE:
          return put_int(optval, optlen, s.opt.sq_size);
        case RDMA_RQSIZE:
          return put_int(optval, optlen, s.opt.rq_size);
        case RDMA_INLINE:
          return put_int(optval, optlen, s.opt.sq_inline);
        case RDMA_IOMAPSIZE:
          return put_int(optval, optlen, s.opt.iomap_size);
        case RDMA_ROUTE:
          return get_route(s, optval, optlen);
        default:
          return EOPNOTSUPP;
      }
    default:
      return EOPNOTSUPP;
  }
}

}  // namespace
}  // namespace softrdma::rsockets

using namespace softrdma::rsockets;

SRDMA_RDMACM_VERSION(rsetsockopt, "RDMACM_1.0")
int srdma_rdmacm_rsetsockopt(int socket, int level, int optname, const void* optval, socklen_t optlen) {
  const Ptr p = find(socket);
  if (!p) return fail(EBADF);
  Rsocket& s = *p;
  std::lock_guard lock(s.mutex);
  int err = EOPNOTSUPP;
  switch (level) {
    case SOL_SOCKET:
      err = set_socket_level(s, optname, optval, optlen);
      break;
    case IPPROTO_TCP:
      err = set_tcp_level(s, optname, optval, optlen);
      break;
    case IPPROTO_IPV6:
      if (optname == IPV6_V6ONLY) {
        int v = 0;
        err = int_arg(optval, optlen, v);
        if (err == 0 && rdma_set_option(s.id, RDMA_OPTION_ID, RDMA_OPTION_ID_AFONLY, &v, sizeof v) != 0) err = errno;
        if (err == 0) set_flag(s.opt.ipv6_flags, optname, v != 0);
      }
      break;
    case SOL_RDMA:
      err = set_rdma_level(s, optname, optval, optlen);
      break;
    default:
      break;
  }
  return err == 0 ? 0 : fail(err);
}

SRDMA_RDMACM_VERSION(rgetsockopt, "RDMACM_1.0")
int srdma_rdmacm_rgetsockopt(int socket, int level, int optname, void* optval, socklen_t* optlen) {
  const Ptr p = find(socket);
  if (!p) return fail(EBADF);
  std::lock_guard lock(p->mutex);
  const int err = get_option(*p, level, optname, optval, optlen);
  return err == 0 ? 0 : fail(err);
}

SRDMA_RDMACM_VERSION(rfcntl, "RDMACM_1.0")
int srdma_rdmacm_rfcntl(int socket, int cmd, ...) {
  const Ptr p = find(socket);
  if (!p) return fail(EBADF);
  std::lock_guard lock(p->mutex);
  switch (cmd) {
    case F_GETFL:
      return p->fd_flags;
    case F_SETFL: {
      va_list args;
      va_start(args, cmd);
      const int flags = va_arg(args, int);
      va_end(args);
      // The socket's own channels never block; O_NONBLOCK only says whether calls wait.
      p->fd_flags = flags;
      return 0;
    }
    default:
      return fail(EOPNOTSUPP);
  }
}
