// The verbs that verbs.h's inline code calls through a context's tables go straight into the
// provider, inside the namespace, whose errno the program never reads. On a machine's context
// the entries that report a failure through errno alone (those returning an object) are
// replaced by wrappers that call the provider's and copy errno back. The data path (posts,
// polls) returns its errors and keeps the provider's own entries.
#include <map>
#include <mutex>

#include "verbs-shim/system_rdma_core.hpp"

namespace softrdma::shim::system {
namespace {

struct Kept {
  std::mutex mutex;
  std::map<const ibv_context*, verbs_context> originals;  // the tables as the provider made them
};

Kept& kept() {
  static auto* k = new Kept;  // wrappers may run during static destruction
  return *k;
}

verbs_context original(const ibv_context* context) {
  Kept& k = kept();
  std::lock_guard lock(k.mutex);
  return k.originals.at(context);
}

ibv_context* context_of_argument(ibv_context* context) { return context; }
template <class T>
ibv_context* context_of_argument(T* object) {
  return object->context;
}

template <auto Member, class R, class First, class... Rest>
R with_errno(First first, Rest... rest) {
  const auto provider = original(context_of_argument(first)).*Member;
  Call bracket;
  return provider(first, rest...);
}

template <auto Member, class R, class... A>
constexpr auto wrapper_of(R (*verbs_context::*)(A...)) {
  return &with_errno<Member, R, A...>;
}

ibv_mw* alloc_mw_with_errno(ibv_pd* pd, ibv_mw_type type) {
  const auto provider = original(pd->context).context.ops.alloc_mw;
  Call bracket;
  return provider(pd, type);
}

// Replaces NAME when the provider's table is long enough to have it and has it.
#define SRDMA_KEEP_ERRNO(vctx, name)                                      \
  if (verbs_get_ctx_op(&(vctx).context, name) != nullptr) {               \
    (vctx).name = wrapper_of<&verbs_context::name>(&verbs_context::name); \
  }

}  // namespace

void keep_errno(ibv_context* context) {
  verbs_context* v = verbs_get_ctx(context);
  if (v == nullptr) return;
  {
    Kept& k = kept();
    std::lock_guard lock(k.mutex);
    k.originals[context] = *v;
  }
  SRDMA_KEEP_ERRNO(*v, alloc_null_mr);
  SRDMA_KEEP_ERRNO(*v, create_counters);
  SRDMA_KEEP_ERRNO(*v, reg_dm_mr);
  SRDMA_KEEP_ERRNO(*v, alloc_dm);
  SRDMA_KEEP_ERRNO(*v, create_flow_action_esp);
  SRDMA_KEEP_ERRNO(*v, alloc_parent_domain);
  SRDMA_KEEP_ERRNO(*v, alloc_td);
  SRDMA_KEEP_ERRNO(*v, create_rwq_ind_table);
  SRDMA_KEEP_ERRNO(*v, create_wq);
  SRDMA_KEEP_ERRNO(*v, create_cq_ex);
  SRDMA_KEEP_ERRNO(*v, ibv_create_flow);
  SRDMA_KEEP_ERRNO(*v, open_qp);
  SRDMA_KEEP_ERRNO(*v, create_qp_ex);
  SRDMA_KEEP_ERRNO(*v, create_srq_ex);
  SRDMA_KEEP_ERRNO(*v, open_xrcd);
  if (context->ops.alloc_mw != nullptr) context->ops.alloc_mw = alloc_mw_with_errno;
}

void forget_errno(const ibv_context* context) {
  Kept& k = kept();
  std::lock_guard lock(k.mutex);
  k.originals.erase(context);
}

}  // namespace softrdma::shim::system
