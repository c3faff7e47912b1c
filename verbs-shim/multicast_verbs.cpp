// Multicast: ibv_attach_mcast and ibv_detach_mcast put a UD QP into a group of the device's
// port and take it out (IBTA vol. 1 s10.5, s11.3). RoCE has no LIDs: the LID is ignored, as
// the kernel ignores it on an Ethernet port. A link without multicast (daemon mode) fails
// with EOPNOTSUPP, as rdma-core fails a verb its provider lacks.
#include <cstring>

#include "verbs-shim/host_link.hpp"
#include "verbs-shim/system_rdma_core.hpp"
#include "verbs-shim/unsupported.hpp"
#include "verbs-shim/verbs_api.hpp"

namespace {

namespace core = softrdma::core;
using softrdma::shim::link;
using softrdma::shim::note_unsupported;

core::Gid gid_of(const ibv_gid& gid) {
  core::Gid g;
  std::memcpy(g.data(), gid.raw, g.size());
  return g;
}

int reported(int err, const char* verb) {
  if (err == EOPNOTSUPP) note_unsupported(verb);
  return err;
}

}  // namespace

// Both names also have an @IBVERBS_1.0 compat version (compat_1_0.cpp).
SRDMA_DEFAULT_VERSION(ibv_attach_mcast, "IBVERBS_1.1")
int srdma_default_ibv_attach_mcast(ibv_qp* qp, const ibv_gid* gid, std::uint16_t lid) {
  SRDMA_FORWARD_IF_SYSTEM(qp, ibv_attach_mcast, qp, gid, lid);
  if (qp == nullptr || gid == nullptr) return EINVAL;
  return reported(link(qp->context).attach_mcast(qp->qp_num, gid_of(*gid)), "ibv_attach_mcast");
}

SRDMA_DEFAULT_VERSION(ibv_detach_mcast, "IBVERBS_1.1")
int srdma_default_ibv_detach_mcast(ibv_qp* qp, const ibv_gid* gid, std::uint16_t lid) {
  SRDMA_FORWARD_IF_SYSTEM(qp, ibv_detach_mcast, qp, gid, lid);
  if (qp == nullptr || gid == nullptr) return EINVAL;
  return reported(link(qp->context).detach_mcast(qp->qp_num, gid_of(*gid)), "ibv_detach_mcast");
}
