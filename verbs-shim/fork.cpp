// Fork support. rdma-core needs ibv_fork_init because the kernel pins registered pages and a
// child's copy-on-write would detach them from the NIC. softrdma pins nothing: the engine
// reaches registered memory through ordinary loads and stores (or process_vm_readv from a
// daemon), resolved per access, so fork is always safe and needs no set-up.
//
// A forked child has none of the parent's threads, so it cannot use the parent's embedded
// device, and the parent's daemon connection is the parent's: a child that uses verbs gets a
// device of its own (its own address in embedded mode, its own connection to the daemon), as
// a child process opens its own contexts on a NIC.
#include <pthread.h>
#include <sys/types.h>

#include "verbs-shim/host_link.hpp"
#include "verbs-shim/system_rdma_core.hpp"
#include "verbs-shim/verbs_api.hpp"

namespace {

[[gnu::constructor]] void register_fork_handler() {
  ::pthread_atfork(nullptr, nullptr, softrdma::shim::forget_device_after_fork);
}

}  // namespace

// The machine's own devices do pin pages: rdma-core must protect their MRs.
SRDMA_EXPORT int ibv_fork_init(void) {
  if (softrdma::shim::system::devices().empty()) return 0;
  return SRDMA_SYSTEM_CALL(ibv_fork_init);
}

SRDMA_EXPORT ibv_fork_status ibv_is_fork_initialized(void) {
  if (softrdma::shim::system::devices().empty()) return IBV_FORK_UNNEEDED;
  return SRDMA_SYSTEM_CALL(ibv_is_fork_initialized);
}

// madvise(MADV_DONTFORK) bookkeeping in rdma-core, which providers call; nothing to protect
// here. No longer declared in the installed headers.
extern "C" {
int ibv_dontfork_range(void* base, std::size_t size);
int ibv_dofork_range(void* base, std::size_t size);
}

SRDMA_EXPORT int ibv_dontfork_range(void*, std::size_t) { return 0; }
SRDMA_EXPORT int ibv_dofork_range(void*, std::size_t) { return 0; }
