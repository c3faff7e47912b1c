// The machine's own RDMA devices (an RNIC, kernel rxe or siw) beside softrdma's. rdma-core's
// libibverbs.so.1 is loaded by absolute path into a link-map namespace of its own (dlmopen), so
// that it, and the provider libraries it opens there, never bind to this library's exports.
// Every verb on one of its devices or objects is handed to it unchanged (docs/architecture.md,
// "Real devices beside softrdma's").
#pragma once

#include <sys/types.h>

#include <cerrno>
#include <optional>
#include <span>
#include <string_view>
#include <type_traits>

#include "verbs-shim/verbs_api.hpp"

namespace softrdma::shim::system {

// Where ibv_get_device_list puts the machine's devices (SOFTRDMA_REAL_DEVICES).
enum class Placement {
  first,  // before softrdma's: the default, so a program that takes the first device keeps its RNIC
  after,  // after softrdma's: what `softrdma run` asks for
  hidden,
};

inline constexpr const char* kPlacementVariable = "SOFTRDMA_REAL_DEVICES";

// A value of kPlacementVariable: unset or empty is `first`; none for a value of no placement.
// The library, `softrdma run`'s sysfs view and its --real-devices all read it so.
inline std::optional<Placement> placement_named(std::string_view value) {
  if (value.empty() || value == "first") return Placement::first;
  if (value == "after") return Placement::after;
  if (value == "hide") return Placement::hidden;
  return std::nullopt;
}

Placement placement();

// The devices rdma-core lists, loaded on first use. Empty when hidden, when the machine has
// none, or when loading failed (then one line on stderr says why, once).
std::span<ibv_device* const> devices();

bool owns(const ibv_device* device);
inline bool owns(const ibv_context* context) { return context != nullptr && owns(context->device); }
// Any verbs object: its context says whose it is.
template <class T>
requires requires(const T* object) { object->context; }
bool owns(const T* object) { return object != nullptr && owns(object->context); }

// A machine's context whose table entries that fail through errno alone copy it back
// (system_ops.cpp); and its end.
void keep_errno(ibv_context* context);
void forget_errno(const ibv_context* context);

// A function of the loaded libibverbs at its default version; null when it lacks the name.
void* symbol(const char* name);

// Loads another library of the system's rdma-core (librdmacm) from its folder into the same
// namespace; null, and `error` set, when it cannot.
void* open_beside(const char* soname, const char** error);

// Brackets a call into the namespace, whose C library is a copy of its own: the program's
// current environment goes in (a setenv may have freed the array the copy holds), and the
// copy's errno comes back out.
class Call {
 public:
  Call() { enter(); }
  ~Call() { leave(); }
  static void enter();
  static void leave();
  Call(const Call&) = delete;
  Call& operator=(const Call&) = delete;
};

// What a verb returns when the loaded library lacks it (an older rdma-core): EOPNOTSUPP, as an
// errno value, a negative count or a null object.
template <class R>
R missing() {
  errno = EOPNOTSUPP;
  if constexpr (std::is_same_v<R, int>) {
    return EOPNOTSUPP;
  } else if constexpr (std::is_same_v<R, ssize_t>) {
    return -EOPNOTSUPP;
  } else if constexpr (!std::is_void_v<R>) {
    return R{};
  }
}

template <class F, class... A>
auto call(F* f, A... args) {
  using R = std::invoke_result_t<F*, A...>;
  if (f == nullptr) return missing<R>();
  Call bracket;
  return f(args...);
}

}  // namespace softrdma::shim::system

// In SOFTRDMA_PRIVATE_1 beside softrdma_private_device, for the softrdma CLI and softrdma's
// librdmacm, which must tell the machine's devices from softrdma's and reach rdma-core's own
// librdmacm in the namespace that serves them.
struct SoftrdmaSystemNamespace {
  // Loads SONAME from rdma-core's folder into the namespace; null, and `error` set, if it cannot.
  void* (*open)(const char* soname, const char** error);
  void (*enter)();  // Call's constructor and destructor, around each call into the namespace
  void (*leave)();
  bool machines_first;  // Placement::first: the machine's devices lead the device list
};
extern "C" {
int softrdma_is_system_device(const ibv_device* device);
// Null when no machine's device is listed.
const SoftrdmaSystemNamespace* softrdma_system_namespace();
}

// Calls rdma-core's NAME with the arguments given.
#define SRDMA_SYSTEM_CALL(name, ...)                                                                     \
  ::softrdma::shim::system::call([] {                                                                    \
    static auto* const f = reinterpret_cast<decltype(&::name)>(::softrdma::shim::system::symbol(#name)); \
    return f;                                                                                            \
  }() __VA_OPT__(, ) __VA_ARGS__)

// The first line of every verb that takes a device or an object: one of the machine's is
// rdma-core's business.
#define SRDMA_FORWARD_IF_SYSTEM(owner, name, ...) \
  if (::softrdma::shim::system::owns(owner)) return SRDMA_SYSTEM_CALL(name, __VA_ARGS__)
