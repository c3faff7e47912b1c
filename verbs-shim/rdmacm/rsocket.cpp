// The rsocket API (rsocket(7): sockets over RDMA, 27 names in RDMACM_1.0) is not implemented
// yet. Every function fails the way an rsocket call fails, -1 with errno set, here ENOSYS, and
// names itself once on stderr (not_implemented.hpp). Programs reach these only by calling
// them: rdma-core's librspreload.so, which redirects the socket calls of unmodified programs
// here, is not loaded unless a program preloads it.
#include <sys/types.h>

#include "verbs-shim/rdmacm/not_implemented.hpp"
#include "verbs-shim/rdmacm/rdmacm_api.hpp"

using softrdma::rdmacm::not_implemented_minus1;

SRDMA_RDMACM_VERSION(rsocket, "RDMACM_1.0")
int srdma_rdmacm_rsocket(int, int, int) { return not_implemented_minus1("rsocket"); }

SRDMA_RDMACM_VERSION(rbind, "RDMACM_1.0")
int srdma_rdmacm_rbind(int, const sockaddr*, socklen_t) { return not_implemented_minus1("rbind"); }

SRDMA_RDMACM_VERSION(rlisten, "RDMACM_1.0")
int srdma_rdmacm_rlisten(int, int) { return not_implemented_minus1("rlisten"); }

SRDMA_RDMACM_VERSION(raccept, "RDMACM_1.0")
int srdma_rdmacm_raccept(int, sockaddr*, socklen_t*) { return not_implemented_minus1("raccept"); }

SRDMA_RDMACM_VERSION(rconnect, "RDMACM_1.0")
int srdma_rdmacm_rconnect(int, const sockaddr*, socklen_t) { return not_implemented_minus1("rconnect"); }

SRDMA_RDMACM_VERSION(rshutdown, "RDMACM_1.0")
int srdma_rdmacm_rshutdown(int, int) { return not_implemented_minus1("rshutdown"); }

SRDMA_RDMACM_VERSION(rclose, "RDMACM_1.0")
int srdma_rdmacm_rclose(int) { return not_implemented_minus1("rclose"); }

SRDMA_RDMACM_VERSION(rrecv, "RDMACM_1.0")
ssize_t srdma_rdmacm_rrecv(int, void*, size_t, int) { return not_implemented_minus1("rrecv"); }

SRDMA_RDMACM_VERSION(rrecvfrom, "RDMACM_1.0")
ssize_t srdma_rdmacm_rrecvfrom(int, void*, size_t, int, sockaddr*, socklen_t*) {
  return not_implemented_minus1("rrecvfrom");
}

SRDMA_RDMACM_VERSION(rrecvmsg, "RDMACM_1.0")
ssize_t srdma_rdmacm_rrecvmsg(int, msghdr*, int) { return not_implemented_minus1("rrecvmsg"); }

SRDMA_RDMACM_VERSION(rsend, "RDMACM_1.0")
ssize_t srdma_rdmacm_rsend(int, const void*, size_t, int) { return not_implemented_minus1("rsend"); }

SRDMA_RDMACM_VERSION(rsendto, "RDMACM_1.0")
ssize_t srdma_rdmacm_rsendto(int, const void*, size_t, int, const sockaddr*, socklen_t) {
  return not_implemented_minus1("rsendto");
}

SRDMA_RDMACM_VERSION(rsendmsg, "RDMACM_1.0")
ssize_t srdma_rdmacm_rsendmsg(int, const msghdr*, int) { return not_implemented_minus1("rsendmsg"); }

SRDMA_RDMACM_VERSION(rread, "RDMACM_1.0")
ssize_t srdma_rdmacm_rread(int, void*, size_t) { return not_implemented_minus1("rread"); }

SRDMA_RDMACM_VERSION(rreadv, "RDMACM_1.0")
ssize_t srdma_rdmacm_rreadv(int, const iovec*, int) { return not_implemented_minus1("rreadv"); }

SRDMA_RDMACM_VERSION(rwrite, "RDMACM_1.0")
ssize_t srdma_rdmacm_rwrite(int, const void*, size_t) { return not_implemented_minus1("rwrite"); }

SRDMA_RDMACM_VERSION(rwritev, "RDMACM_1.0")
ssize_t srdma_rdmacm_rwritev(int, const iovec*, int) { return not_implemented_minus1("rwritev"); }

SRDMA_RDMACM_VERSION(rpoll, "RDMACM_1.0")
int srdma_rdmacm_rpoll(pollfd*, nfds_t, int) { return not_implemented_minus1("rpoll"); }

SRDMA_RDMACM_VERSION(rselect, "RDMACM_1.0")
int srdma_rdmacm_rselect(int, fd_set*, fd_set*, fd_set*, timeval*) { return not_implemented_minus1("rselect"); }

SRDMA_RDMACM_VERSION(rgetpeername, "RDMACM_1.0")
int srdma_rdmacm_rgetpeername(int, sockaddr*, socklen_t*) { return not_implemented_minus1("rgetpeername"); }

SRDMA_RDMACM_VERSION(rgetsockname, "RDMACM_1.0")
int srdma_rdmacm_rgetsockname(int, sockaddr*, socklen_t*) { return not_implemented_minus1("rgetsockname"); }

SRDMA_RDMACM_VERSION(rsetsockopt, "RDMACM_1.0")
int srdma_rdmacm_rsetsockopt(int, int, int, const void*, socklen_t) { return not_implemented_minus1("rsetsockopt"); }

SRDMA_RDMACM_VERSION(rgetsockopt, "RDMACM_1.0")
int srdma_rdmacm_rgetsockopt(int, int, int, void*, socklen_t*) { return not_implemented_minus1("rgetsockopt"); }

SRDMA_RDMACM_VERSION(rfcntl, "RDMACM_1.0")
int srdma_rdmacm_rfcntl(int, int, ...) { return not_implemented_minus1("rfcntl"); }

SRDMA_RDMACM_VERSION(riomap, "RDMACM_1.0")
off_t srdma_rdmacm_riomap(int, void*, size_t, int, int, off_t) { return not_implemented_minus1("riomap"); }

SRDMA_RDMACM_VERSION(riounmap, "RDMACM_1.0")
int srdma_rdmacm_riounmap(int, void*, size_t) { return not_implemented_minus1("riounmap"); }

// rdma-core's riowrite returns the byte count as size_t, and its failure as (size_t) -1.
SRDMA_RDMACM_VERSION(riowrite, "RDMACM_1.0")
size_t srdma_rdmacm_riowrite(int, const void*, size_t, off_t, int) {
  return static_cast<size_t>(not_implemented_minus1("riowrite"));
}
