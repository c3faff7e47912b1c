// rdma_getaddrinfo / rdma_freeaddrinfo with the semantics of rdma-core 44's addrinfo.c:
//
// - NODE and SERVICE go through getaddrinfo(3) with hints translated from the RDMA ones:
//   RAI_PASSIVE -> AI_PASSIVE, RAI_NUMERICHOST -> AI_NUMERICHOST, ai_family (unless AF_IB),
//   ai_qp_type -> socket type (RC/UC -> SOCK_STREAM, UD -> SOCK_DGRAM), ai_port_space ->
//   protocol (RDMA_PS_TCP -> TCP, RDMA_PS_UDP / RDMA_PS_IPOIB -> UDP). Only the FIRST result
//   is used, and the answer is one rdma_addrinfo (ai_next NULL).
// - The answer's qp type and port space are the hints' when given, else derived from that
//   result (SOCK_STREAM -> IBV_QPT_RC, SOCK_DGRAM -> IBV_QPT_UD; TCP -> RDMA_PS_TCP, UDP ->
//   RDMA_PS_UDP). A passive answer carries the address in ai_src_addr and ai_flags =
//   RAI_PASSIVE; an active one in ai_dst_addr and ai_flags 0. hints->ai_src_addr is copied
//   when the answer has no source. RAI_FAMILY with AF_IB and RAI_NUMERICHOST reads NODE as
//   a GID and answers a struct sockaddr_ib.
// - With neither NODE nor SERVICE the hints' flags, family, qp type, port space and
//   addresses are copied; with no hints either, EINVAL.
// - ai_route and ai_connect stay empty: rdma-core fills them only from an ibacm daemon's
//   answer (ucma_ib_resolve), which serves InfiniBand path records; on RoCE, and with
//   softrdma, there is none.
// - Errors: -1 with errno (EINVAL, ENOMEM), or getaddrinfo(3)'s nonzero EAI_* code returned
//   as it is (gai_strerror describes it; rdma_getaddrinfo(3) lists them), with *res untouched.
//
// Unlike rdma-core's, this does not first look for RDMA devices (ucma_init, ENODEV when there
// is none): softrdma's device starts on first use, and resolving a name must not start it
// while the address it binds may still be chosen by the connection manager.
//
// Every part of the answer comes from malloc/calloc/strdup and is freed one by one by
// rdma_freeaddrinfo, so a program may also free it with rdma-core's own (ABI compatible).
#include <infiniband/ib.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "verbs-shim/rdmacm/rdmacm_api.hpp"

namespace {

const rdma_addrinfo kNoHints{};

// rdma-core's ucma_convert_to_ai.
addrinfo to_socket_hints(const rdma_addrinfo& rai) {
  addrinfo ai{};
  if (rai.ai_flags & RAI_PASSIVE) ai.ai_flags = AI_PASSIVE;
  if (rai.ai_flags & RAI_NUMERICHOST) ai.ai_flags |= AI_NUMERICHOST;
  if (rai.ai_family != AF_IB) ai.ai_family = rai.ai_family;
  switch (rai.ai_qp_type) {
    case IBV_QPT_RC:
    case IBV_QPT_UC:
    case IBV_QPT_XRC_SEND:
    case IBV_QPT_XRC_RECV:
      ai.ai_socktype = SOCK_STREAM;
      break;
    case IBV_QPT_UD:
      ai.ai_socktype = SOCK_DGRAM;
      break;
    default:
      break;
  }
  switch (rai.ai_port_space) {
    case RDMA_PS_TCP:
      ai.ai_protocol = IPPROTO_TCP;
      break;
    case RDMA_PS_IPOIB:
    case RDMA_PS_UDP:
      ai.ai_protocol = IPPROTO_UDP;
      break;
    case RDMA_PS_IB:
      if (ai.ai_socktype == SOCK_STREAM)
        ai.ai_protocol = IPPROTO_TCP;
      else if (ai.ai_socktype == SOCK_DGRAM)
        ai.ai_protocol = IPPROTO_UDP;
      break;
    default:
      break;
  }
  return ai;
}

int copy_addr(sockaddr** dst, socklen_t* dst_len, const sockaddr* src, socklen_t src_len) {
  *dst = static_cast<sockaddr*>(std::malloc(src_len));
  if (*dst == nullptr) {
    errno = ENOMEM;
    return -1;
  }
  std::memcpy(*dst, src, src_len);
  *dst_len = src_len;
  return 0;
}

// The port of an IP or IB address, network order (rdma-core's ucma_get_port).
__be16 port_of(const sockaddr* addr) {
  switch (addr->sa_family) {
    case AF_INET:
      return reinterpret_cast<const sockaddr_in*>(addr)->sin_port;
    case AF_INET6:
      return reinterpret_cast<const sockaddr_in6*>(addr)->sin6_port;
    case AF_IB:
      return htobe16(static_cast<std::uint16_t>(be64toh(reinterpret_cast<const sockaddr_ib*>(addr)->sib_sid)));
    default:
      return 0;
  }
}

// rdma-core's ucma_convert_in6: the GID NODE was read as an IPv6 address, as AF_IB's address
// with the service id of the port space and port.
int to_ib_address(int port_space, sockaddr** dst, socklen_t* dst_len, const sockaddr* src) {
  auto* sib = static_cast<sockaddr_ib*>(std::calloc(1, sizeof(sockaddr_ib)));
  if (sib == nullptr) {
    errno = ENOMEM;
    return -1;
  }
  const auto* sin6 = reinterpret_cast<const sockaddr_in6*>(src);
  sib->sib_family = AF_IB;
  sib->sib_pkey = htobe16(0xFFFF);
  sib->sib_flowinfo = sin6->sin6_flowinfo;
  std::memcpy(&sib->sib_addr, &sin6->sin6_addr, sizeof sin6->sin6_addr);
  const std::uint16_t port = be16toh(port_of(src));
  sib->sib_sid = htobe64((static_cast<std::uint64_t>(port_space) << 16) + port);
  if (port_space != 0) sib->sib_sid_mask = htobe64(RDMA_IB_IP_PS_MASK);
  if (port != 0) sib->sib_sid_mask |= htobe64(RDMA_IB_IP_PORT_MASK);
  sib->sib_scope_id = sin6->sin6_scope_id;
  *dst = reinterpret_cast<sockaddr*>(sib);
  *dst_len = sizeof(sockaddr_ib);
  return 0;
}

// rdma-core's ucma_convert_to_rai: one getaddrinfo result into RAI.
int from_socket_result(rdma_addrinfo& rai, const rdma_addrinfo& hints, const addrinfo& ai) {
  if (hints.ai_qp_type != 0) {
    rai.ai_qp_type = hints.ai_qp_type;
  } else if (ai.ai_socktype == SOCK_STREAM) {
    rai.ai_qp_type = IBV_QPT_RC;
  } else if (ai.ai_socktype == SOCK_DGRAM) {
    rai.ai_qp_type = IBV_QPT_UD;
  }
  if (hints.ai_port_space != 0) {
    rai.ai_port_space = hints.ai_port_space;
  } else if (ai.ai_protocol == IPPROTO_TCP) {
    rai.ai_port_space = RDMA_PS_TCP;
  } else if (ai.ai_protocol == IPPROTO_UDP) {
    rai.ai_port_space = RDMA_PS_UDP;
  }

  const bool passive = (ai.ai_flags & AI_PASSIVE) != 0;
  if (passive) rai.ai_flags = RAI_PASSIVE;
  char*& canonname = passive ? rai.ai_src_canonname : rai.ai_dst_canonname;
  if (ai.ai_canonname != nullptr) {
    canonname = ::strdup(ai.ai_canonname);
    if (canonname == nullptr) {
      errno = ENOMEM;
      return -1;
    }
  }
  sockaddr*& addr = passive ? rai.ai_src_addr : rai.ai_dst_addr;
  socklen_t& len = passive ? rai.ai_src_len : rai.ai_dst_len;
  if ((hints.ai_flags & RAI_FAMILY) && hints.ai_family == AF_IB && (hints.ai_flags & RAI_NUMERICHOST)) {
    rai.ai_family = AF_IB;
    return to_ib_address(rai.ai_port_space, &addr, &len, ai.ai_addr);
  }
  rai.ai_family = ai.ai_family;
  return copy_addr(&addr, &len, ai.ai_addr, ai.ai_addrlen);
}

// rdma-core's ucma_getaddrinfo: 0, -1 with errno, or getaddrinfo's EAI_* code.
int resolve(const char* node, const char* service, const rdma_addrinfo& hints, rdma_addrinfo& rai) {
  addrinfo* results = nullptr;
  int ret;
  if (&hints != &kNoHints) {
    const addrinfo socket_hints = to_socket_hints(hints);
    ret = ::getaddrinfo(node, service, &socket_hints, &results);
  } else {
    ret = ::getaddrinfo(node, service, nullptr, &results);
  }
  if (ret != 0) return ret;
  ret = from_socket_result(rai, hints, *results);
  ::freeaddrinfo(results);
  return ret;
}

}  // namespace

SRDMA_RDMACM_VERSION(rdma_freeaddrinfo, "RDMACM_1.0")
void srdma_rdmacm_rdma_freeaddrinfo(rdma_addrinfo* res) {
  while (res != nullptr) {
    rdma_addrinfo* rai = res;
    res = res->ai_next;
    std::free(rai->ai_connect);
    std::free(rai->ai_route);
    std::free(rai->ai_src_canonname);
    std::free(rai->ai_dst_canonname);
    std::free(rai->ai_src_addr);
    std::free(rai->ai_dst_addr);
    std::free(rai);
  }
}

SRDMA_RDMACM_VERSION(rdma_getaddrinfo, "RDMACM_1.0")
int srdma_rdmacm_rdma_getaddrinfo(const char* node, const char* service, const rdma_addrinfo* hints,
                                  rdma_addrinfo** res) {
  if (node == nullptr && service == nullptr && hints == nullptr) {
    errno = EINVAL;
    return -1;
  }
  auto* rai = static_cast<rdma_addrinfo*>(std::calloc(1, sizeof(rdma_addrinfo)));
  if (rai == nullptr) {
    errno = ENOMEM;
    return -1;
  }
  const rdma_addrinfo& h = hints != nullptr ? *hints : kNoHints;

  int ret = 0;
  if (node != nullptr || service != nullptr) {
    ret = resolve(node, service, h, *rai);
  } else {
    rai->ai_flags = h.ai_flags;
    rai->ai_family = h.ai_family;
    rai->ai_qp_type = h.ai_qp_type;
    rai->ai_port_space = h.ai_port_space;
    if (h.ai_dst_len != 0) ret = copy_addr(&rai->ai_dst_addr, &rai->ai_dst_len, h.ai_dst_addr, h.ai_dst_len);
  }
  if (ret == 0 && rai->ai_src_len == 0 && h.ai_src_len != 0) {
    ret = copy_addr(&rai->ai_src_addr, &rai->ai_src_len, h.ai_src_addr, h.ai_src_len);
  }
  if (ret != 0) {
    const int saved = errno;
    srdma_rdmacm_rdma_freeaddrinfo(rai);
    errno = saved;
    return ret;  // -1 with errno, or the EAI_* code
  }
  *res = rai;
  return 0;
}
