// Connections on the machine's own RDMA devices (rxe0, an RNIC): rdma-core's librdmacm, loaded
// into the namespace where rdma-core's libibverbs serves those devices (../system_rdma_core.hpp),
// so that the kernel's rdma_cm connects them. An ID is softrdma's until an address says
// otherwise: when the kernel's rdma_cm binds the address rdma_bind_addr names, or the source of
// the route rdma_resolve_addr takes (one of its devices holds it), the ID becomes a shell
// around a kernel ID. Its calls are forwarded, the kernel ID's fields are mirrored into it, and
// the kernel ID's events come through a twin of its channel into the channel the application
// holds (docs/rdmacm.md, "The machine's own devices").
#pragma once

#include <cerrno>
#include <type_traits>

#include "verbs-shim/rdmacm/cm_objects.hpp"

namespace softrdma::rdmacm::system {

// rdma-core's function NAME, or null when the machine's devices are not listed or rdma-core's
// librdmacm could not load (said once on stderr).
void* symbol(const char* name);

// Around every call into the namespace: its environ in, its errno out.
void enter();
void leave();

// Makes `id` a shell of a kernel ID bound to `address` when the kernel's rdma_cm takes that
// address (0). ENODEV: no device of the machine's holds it, and the ID stays softrdma's; any
// other errno value: the kernel's address, refused (a port in use).
int adopt(Id& id, const sockaddr* address);
// The source address the kernel's routing picks towards `dst`; false when it has none.
bool route_source(const sockaddr* dst, sockaddr_storage& source);

// Copies the kernel ID's public fields into the shell, but its channel, context and event.
void mirror(Id& id);

// A kernel event as the application's rdma_cm_event, for `id` (mirrored); the kernel's event is
// acknowledged, its private data copied.
void translate(Id& id, rdma_cm_event* kernel_event, Event& out);
// Acknowledges a kernel event the application will never see (its ID is being destroyed).
void drop(rdma_cm_event* kernel_event);

// Ends a shell's kernel ID (rdma_destroy_id), once its events are acknowledged.
void destroy_kernel_id(Id& id);
// Stops a channel's twin and its pump thread (rdma_destroy_event_channel).
void close_twin(Channel& channel);

// Calls F inside the namespace; a function rdma-core lacks fails with EOPNOTSUPP.
template <class F, class... A>
auto call(F* f, A... args) {
  using R = std::invoke_result_t<F*, A...>;
  if (f == nullptr) {
    errno = EOPNOTSUPP;
    if constexpr (std::is_integral_v<R>) return R{-1};
    if constexpr (!std::is_void_v<R> && !std::is_integral_v<R>) return R{};
    if constexpr (std::is_void_v<R>) return;
  }
  enter();
  if constexpr (std::is_void_v<R>) {
    f(args...);
    leave();
  } else {
    const R r = f(args...);
    leave();
    return r;
  }
}

// A shell's call: the kernel ID in the shell's place, its fields mirrored afterwards.
template <class F, class... A>
auto forward(Id& id, F* f, A... args) {
  if constexpr (std::is_void_v<std::invoke_result_t<F*, rdma_cm_id*, A...>>) {
    call(f, id.sys, args...);
    mirror(id);
  } else {
    const auto r = call(f, id.sys, args...);
    mirror(id);
    return r;
  }
}

}  // namespace softrdma::rdmacm::system

// rdma-core's NAME, looked up once.
#define SRDMA_KERNEL_FUNCTION(name)                                                                        \
  [] {                                                                                                     \
    static auto* const f = reinterpret_cast<decltype(&::name)>(::softrdma::rdmacm::system::symbol(#name)); \
    return f;                                                                                              \
  }()

// Calls rdma-core's NAME inside the namespace.
#define SRDMA_KERNEL_CM(name, ...) \
  ::softrdma::rdmacm::system::call(SRDMA_KERNEL_FUNCTION(name) __VA_OPT__(, ) __VA_ARGS__)

// The first line of each rdma_cm call on an ID: a shell's goes to rdma-core's NAME with the
// kernel ID in its place.
#define SRDMA_CM_FORWARD_IF_SYSTEM(cm_id, name, ...)                                                    \
  if (cm_id != nullptr && ::softrdma::rdmacm::id_of(cm_id).sys != nullptr) {                            \
    return ::softrdma::rdmacm::system::forward(::softrdma::rdmacm::id_of(cm_id),                        \
                                               SRDMA_KERNEL_FUNCTION(name) __VA_OPT__(, ) __VA_ARGS__); \
  }

// The same for a call whose synchronous form (an ID without a channel, rdma_create_ep's) waits
// for EXPECTED.
#define SRDMA_CM_FORWARD_SETTLE(cm_id, expected, name, ...)                                                           \
  if (cm_id != nullptr && ::softrdma::rdmacm::id_of(cm_id).sys != nullptr) {                                          \
    ::softrdma::rdmacm::Id& shell = ::softrdma::rdmacm::id_of(cm_id);                                                 \
    const int r = ::softrdma::rdmacm::system::forward(shell, SRDMA_KERNEL_FUNCTION(name) __VA_OPT__(, ) __VA_ARGS__); \
    return r == 0 && shell.own_channel ? ::softrdma::rdmacm::wait_for(shell, expected) : r;                           \
  }
