// Opening and closing the device: the context the application holds.
#include "verbs-shim/context.hpp"

#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstddef>
#include <new>
#include <type_traits>

#include "verbs-shim/host_link.hpp"
#include "verbs-shim/system_rdma_core.hpp"

namespace softrdma::shim {

static_assert(std::is_standard_layout_v<Context>, "context_of() relies on offsetof");

Context& context_of(ibv_context* ctx) {
  auto* bytes = reinterpret_cast<char*>(ctx) - offsetof(verbs_context, context) - offsetof(Context, vctx);
  return *reinterpret_cast<Context*>(bytes);
}

const DeviceIdentity& identity_of(ibv_context* ctx) { return context_of(ctx).bound->identity; }

int post_async_event(ibv_context* ctx, const ibv_async_event& event) {
  // One datagram per event on a SOCK_SEQPACKET pair: ibv_get_async_event reads exactly one.
  // Never block the poster (a progress thread): a full queue is reported instead.
  ssize_t n = ::send(context_of(ctx).async_post_fd, &event, sizeof event, MSG_DONTWAIT | MSG_NOSIGNAL);
  return n == static_cast<ssize_t>(sizeof event) ? 0 : errno;
}

namespace {

void close_fd(int& fd) {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

void destroy(Context* c) {
  ibv_context& ctx = c->vctx.context;
  close_fd(ctx.cmd_fd);
  close_fd(ctx.async_fd);
  close_fd(c->async_post_fd);
  pthread_mutex_destroy(&ctx.mutex);
  delete c;
}

}  // namespace

}  // namespace softrdma::shim

using namespace softrdma::shim;

SRDMA_DEFAULT_VERSION(ibv_open_device, "IBVERBS_1.1")
ibv_context* srdma_default_ibv_open_device(ibv_device* device) {
  if (system::owns(device)) {
    ibv_context* machines = SRDMA_SYSTEM_CALL(ibv_open_device, device);
    if (machines != nullptr) system::keep_errno(machines);
    return machines;
  }
  const BoundDevice* bound = bound_of(device);
  if (bound == nullptr) {
    errno = ENODEV;
    return nullptr;
  }
  auto* c = new (std::nothrow) Context{};
  if (c == nullptr) {
    errno = ENOMEM;
    return nullptr;
  }
  ibv_context& ctx = c->vctx.context;
  ctx.device = device;
  ctx.cmd_fd = ctx.async_fd = -1;
  pthread_mutex_init(&ctx.mutex, nullptr);
  c->bound = bound;

  // Real, pollable descriptors (verbs-abi.md §4.2). Applications poll() async_fd and set
  // O_NONBLOCK on it (ibv_asyncwatch); nothing outside the shim uses cmd_fd, but programs
  // print and pass it around, so it is a real descriptor too (later: the daemon socket).
  int pair[2];
  if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) != 0) {
    int err = errno;
    destroy(c);
    errno = err;
    return nullptr;
  }
  ctx.async_fd = pair[0];
  c->async_post_fd = pair[1];
  ctx.cmd_fd = ::eventfd(0, EFD_CLOEXEC);
  if (ctx.cmd_fd < 0) {
    int err = errno;
    destroy(c);
    errno = err;
    return nullptr;
  }
  ctx.num_comp_vectors = 1;  // apps pass comp_vector < num_comp_vectors

  // The two magic values that make verbs.h's inline code use vctx's ops instead of quietly
  // falling back (verbs-abi.md §4.2, §8.7).
  ctx.abi_compat = __VERBS_ABI_IS_EXTENDED;
  c->vctx.sz = sizeof(verbs_context);
  install_ops(c->vctx);
  track(&ctx);
  return &ctx;
}

SRDMA_DEFAULT_VERSION(ibv_close_device, "IBVERBS_1.1")
int srdma_default_ibv_close_device(ibv_context* ctx) {
  if (system::owns(ctx)) {
    system::forget_errno(ctx);
    return SRDMA_SYSTEM_CALL(ibv_close_device, ctx);
  }
  if (ctx == nullptr) return EINVAL;
  untrack(ctx);  // after this no event delivery can be using it
  destroy(&context_of(ctx));
  return 0;
}
