// A forked child does not inherit rdma_cm state: libibverbs gives it a device of its own on
// first use (verbs-shim/fork.cpp), so the child forgets the parent's device, IDs' ports and
// event routes, as a child of rdma-core's librdmacm opens its own /dev/infiniband/rdma_cm.
#include <pthread.h>

#include "verbs-shim/rdmacm/cm_objects.hpp"
#include "verbs-shim/rdmacm/devices.hpp"

namespace softrdma::rdmacm {
namespace {

void forget_after_fork() {
  forget_devices_after_fork();
  forget_binding_after_fork();
  forget_routes_after_fork();
}

[[gnu::constructor]] void register_fork_handler() { ::pthread_atfork(nullptr, nullptr, forget_after_fork); }

}  // namespace
}  // namespace softrdma::rdmacm
