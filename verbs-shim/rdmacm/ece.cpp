// Enhanced Connection Establishment is a vendor extension of the CM's private data (mlx5's);
// the device has none, so both calls fail with EOPNOTSUPP, as rdma-core's do on a device
// without it. rdma_reject_ece is a plain reject (connection.cpp).
#include <cerrno>

#include "verbs-shim/rdmacm/rdmacm_api.hpp"

SRDMA_RDMACM_VERSION(rdma_set_local_ece, "RDMACM_1.3")
int srdma_rdmacm_rdma_set_local_ece(rdma_cm_id*, ibv_ece*) {
  errno = EOPNOTSUPP;
  return -1;
}

SRDMA_RDMACM_VERSION(rdma_get_remote_ece, "RDMACM_1.3")
int srdma_rdmacm_rdma_get_remote_ece(rdma_cm_id*, ibv_ece*) {
  errno = EOPNOTSUPP;
  return -1;
}
