// Enhanced Connection Establishment is a vendor extension of the CM's private data (mlx5's);
// softrdma's devices have none, so both calls fail with EOPNOTSUPP, as rdma-core's do on a
// device without it; on the machine's own devices rdma-core answers. rdma_reject_ece is a
// plain reject (connection.cpp).
#include <cerrno>

#include "verbs-shim/rdmacm/rdmacm_api.hpp"
#include "verbs-shim/rdmacm/system_cm.hpp"

SRDMA_RDMACM_VERSION(rdma_set_local_ece, "RDMACM_1.3")
int srdma_rdmacm_rdma_set_local_ece(rdma_cm_id* cm_id, ibv_ece* ece) {
  SRDMA_CM_FORWARD_IF_SYSTEM(cm_id, rdma_set_local_ece, ece);
  errno = EOPNOTSUPP;
  return -1;
}

SRDMA_RDMACM_VERSION(rdma_get_remote_ece, "RDMACM_1.3")
int srdma_rdmacm_rdma_get_remote_ece(rdma_cm_id* cm_id, ibv_ece* ece) {
  SRDMA_CM_FORWARD_IF_SYSTEM(cm_id, rdma_get_remote_ece, ece);
  errno = EOPNOTSUPP;
  return -1;
}
