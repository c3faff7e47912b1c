// UD multicast through rdma_cm (rdma_join_multicast) is not implemented yet: the device
// reports max_mcast_grp 0 and ibv_attach_mcast fails, so joining fails as a call the library
// cannot serve, -1 with ENOSYS and one line on stderr naming it (not_implemented.hpp).
#include "verbs-shim/rdmacm/not_implemented.hpp"
#include "verbs-shim/rdmacm/rdmacm_api.hpp"

using softrdma::rdmacm::not_implemented_minus1;

SRDMA_RDMACM_VERSION(rdma_join_multicast, "RDMACM_1.0")
int srdma_rdmacm_rdma_join_multicast(rdma_cm_id*, sockaddr*, void*) { return not_implemented_minus1("rdma_join_multicast"); }

SRDMA_RDMACM_VERSION(rdma_join_multicast_ex, "RDMACM_1.1")
int srdma_rdmacm_rdma_join_multicast_ex(rdma_cm_id*, rdma_cm_join_mc_attr_ex*, void*) {
  return not_implemented_minus1("rdma_join_multicast_ex");
}

SRDMA_RDMACM_VERSION(rdma_leave_multicast, "RDMACM_1.0")
int srdma_rdmacm_rdma_leave_multicast(rdma_cm_id*, sockaddr*) { return not_implemented_minus1("rdma_leave_multicast"); }
