// Protection domains, parent domains, memory regions and memory windows: each verb is one
// engine call (emulator/core/device.hpp), whose errno values already follow rdma-core.
#include <new>

#include "verbs-shim/context.hpp"
#include "verbs-shim/host_link.hpp"
#include "verbs-shim/objects.hpp"
#include "verbs-shim/ops.hpp"
#include "verbs-shim/system_rdma_core.hpp"

namespace softrdma::shim {

namespace {

// Access bits ibv_reg_mr may carry. IBV_ACCESS_OPTIONAL_RANGE bits (relaxed ordering) are
// hints a device may ignore (verbs.h); the rest of the range is unknown, hence EINVAL.
constexpr unsigned kMrAccess = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
                               IBV_ACCESS_REMOTE_ATOMIC | IBV_ACCESS_MW_BIND | IBV_ACCESS_ZERO_BASED |
                               IBV_ACCESS_ON_DEMAND;
static_assert(IBV_ACCESS_ZERO_BASED == core::access::zero_based && IBV_ACCESS_ON_DEMAND == core::access::on_demand,
              "the engine takes rdma-core's access bits as they are");

// An implicit on-demand MR (ibv_reg_mr(pd, NULL, SIZE_MAX, ...ON_DEMAND)) covers the whole
// address space: for the engine, every user address, which fits in 48 bits.
constexpr std::uint64_t kUserAddressSpace = std::uint64_t{1} << 48;

bool implicit_odp(const void* addr, std::size_t length, unsigned access) {
  return addr == nullptr && length == SIZE_MAX && (access & IBV_ACCESS_ON_DEMAND);
}

int set_errno(int err) {
  errno = err;
  return err;
}

ibv_mr* register_mr(ibv_pd* pd, void* addr, std::size_t length, std::uint64_t iova, unsigned access) {
  const bool implicit = implicit_odp(addr, length, access);
  if (pd == nullptr || (length != 0 && addr == nullptr && !implicit)) {
    errno = EINVAL;
    return nullptr;
  }
  access &= ~static_cast<unsigned>(IBV_ACCESS_OPTIONAL_RANGE);
  if (access & ~kMrAccess) {
    errno = EINVAL;
    return nullptr;
  }
  auto* mr = new (std::nothrow) ibv_mr{};
  if (mr == nullptr) {
    errno = ENOMEM;
    return nullptr;
  }
  const auto keys = link(pd->context)
                        .reg_mr(pd_handle(pd), reinterpret_cast<std::uint64_t>(addr),
                                implicit ? kUserAddressSpace : length, implicit ? 0 : iova, access);
  if (!keys) {
    delete mr;
    errno = keys.error();
    return nullptr;
  }
  mr->context = pd->context;
  mr->pd = pd;
  mr->addr = addr;
  mr->length = length;
  mr->handle = keys->lkey;
  mr->lkey = keys->lkey;
  mr->rkey = keys->rkey;
  if (access & IBV_ACCESS_ON_DEMAND) note_odp_mr(*mr, (access & IBV_ACCESS_ZERO_BASED) ? 0 : iova);
  return mr;
}

}  // namespace

}  // namespace softrdma::shim

using namespace softrdma::shim;
namespace core = softrdma::core;

#define SRDMA_LATEST_1_1(name) SRDMA_DEFAULT_VERSION(name, "IBVERBS_1.1")

SRDMA_LATEST_1_1(ibv_alloc_pd)
ibv_pd* srdma_default_ibv_alloc_pd(ibv_context* context) {
  SRDMA_FORWARD_IF_SYSTEM(context, ibv_alloc_pd, context);
  if (context == nullptr) {
    errno = EINVAL;
    return nullptr;
  }
  auto* pd = new (std::nothrow) Pd{};
  if (pd == nullptr) {
    errno = ENOMEM;
    return nullptr;
  }
  const auto handle = link(context).alloc_pd();
  if (!handle) {
    delete pd;
    errno = handle.error();
    return nullptr;
  }
  pd->pd.context = context;
  pd->pd.handle = *handle;
  return &pd->pd;
}

SRDMA_LATEST_1_1(ibv_dealloc_pd)
int srdma_default_ibv_dealloc_pd(ibv_pd* pd) {
  SRDMA_FORWARD_IF_SYSTEM(pd, ibv_dealloc_pd, pd);
  if (pd == nullptr) return set_errno(EINVAL);
  Pd& p = pd_of(pd);
  if (p.parent_of == nullptr) {
    // EBUSY while an MR, MW, AH, SRQ or QP still uses it, as the kernel refuses.
    const int err = link(pd->context).dealloc_pd(pd->handle);
    if (err != 0) return set_errno(err);
  }
  delete &p;
  return 0;
}

namespace softrdma::shim {

// verbs_context.alloc_parent_domain (ibv_alloc_parent_domain): a domain standing for `pd`.
ibv_pd* alloc_parent_domain_op(ibv_context* context, ibv_parent_domain_init_attr* attr) {
  constexpr std::uint32_t kKnown = IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS | IBV_PARENT_DOMAIN_INIT_ATTR_PD_CONTEXT;
  if (context == nullptr || attr == nullptr || attr->pd == nullptr || (attr->comp_mask & ~kKnown) ||
      pd_of(attr->pd).parent_of != nullptr) {
    errno = EINVAL;
    return nullptr;
  }
  if (attr->td != nullptr) {  // thread domains are not offered (ibv_alloc_td fails)
    errno = EOPNOTSUPP;
    return nullptr;
  }
  auto* pd = new (std::nothrow) Pd{};
  if (pd == nullptr) {
    errno = ENOMEM;
    return nullptr;
  }
  pd->pd.context = context;
  pd->pd.handle = attr->pd->handle;
  pd->parent_of = attr->pd;
  return &pd->pd;
}

}  // namespace softrdma::shim

SRDMA_LATEST_1_1(ibv_reg_mr)
ibv_mr* srdma_default_ibv_reg_mr(ibv_pd* pd, void* addr, std::size_t length, int access) {
  SRDMA_FORWARD_IF_SYSTEM(pd, ibv_reg_mr, pd, addr, length, access);
  return register_mr(pd, addr, length, reinterpret_cast<std::uint64_t>(addr), static_cast<unsigned>(access));
}

SRDMA_EXPORT ibv_mr* ibv_reg_mr_iova(ibv_pd* pd, void* addr, std::size_t length, std::uint64_t iova, int access) {
  SRDMA_FORWARD_IF_SYSTEM(pd, ibv_reg_mr_iova, pd, addr, length, iova, access);
  return register_mr(pd, addr, length, iova, static_cast<unsigned>(access));
}

SRDMA_EXPORT ibv_mr* ibv_reg_mr_iova2(ibv_pd* pd, void* addr, std::size_t length, std::uint64_t iova,
                                      unsigned int access) {
  SRDMA_FORWARD_IF_SYSTEM(pd, ibv_reg_mr_iova2, pd, addr, length, iova, access);
  return register_mr(pd, addr, length, iova, access);
}

// ibv_rereg_mr reports failures as enum ibv_rereg_mr_err_code (negative), errno the reason.
// The MR keeps its keys (IBTA vol. 1 s11.2.8.10), so a peer holding the rkey keeps using it.
SRDMA_EXPORT int ibv_rereg_mr(ibv_mr* mr, int flags, ibv_pd* pd, void* addr, std::size_t length, int access) {
  SRDMA_FORWARD_IF_SYSTEM(mr, ibv_rereg_mr, mr, flags, pd, addr, length, access);
  constexpr int kKnown = IBV_REREG_MR_CHANGE_TRANSLATION | IBV_REREG_MR_CHANGE_PD | IBV_REREG_MR_CHANGE_ACCESS;
  if (mr == nullptr || flags == 0 || (flags & ~kKnown) || ((flags & IBV_REREG_MR_CHANGE_PD) && pd == nullptr) ||
      ((flags & IBV_REREG_MR_CHANGE_TRANSLATION) && length != 0 && addr == nullptr)) {
    errno = EINVAL;
    return IBV_REREG_MR_ERR_INPUT;
  }
  core::MrChange change;
  if (flags & IBV_REREG_MR_CHANGE_PD) change.pd = pd_handle(pd);
  if (flags & IBV_REREG_MR_CHANGE_TRANSLATION) {
    const auto host = reinterpret_cast<std::uint64_t>(addr);
    change.translation = core::MrTranslation{host, length, host};
  }
  if (flags & IBV_REREG_MR_CHANGE_ACCESS) {
    const unsigned acc = static_cast<unsigned>(access) & ~static_cast<unsigned>(IBV_ACCESS_OPTIONAL_RANGE);
    if (acc & ~kMrAccess) {
      errno = EINVAL;
      return IBV_REREG_MR_ERR_INPUT;
    }
    change.access = acc;
  }
  const int err = link(mr->context).rereg_mr(mr->lkey, change);
  if (err != 0) {
    errno = err;
    return IBV_REREG_MR_ERR_INPUT;
  }
  if (flags & IBV_REREG_MR_CHANGE_PD) mr->pd = pd;
  if (flags & IBV_REREG_MR_CHANGE_TRANSLATION) {
    mr->addr = addr;
    mr->length = length;
  }
  return 0;
}

SRDMA_LATEST_1_1(ibv_dereg_mr)
int srdma_default_ibv_dereg_mr(ibv_mr* mr) {
  SRDMA_FORWARD_IF_SYSTEM(mr, ibv_dereg_mr, mr);
  if (mr == nullptr) return set_errno(EINVAL);
  const int err = link(mr->context).dereg_mr(mr->lkey);
  if (err != 0) return set_errno(err);
  forget_odp_mr(*mr);
  delete mr;
  return 0;
}

namespace softrdma::shim {

// ibv_context.ops.alloc_mw / bind_mw / dealloc_mw (verbs.h calls them inline).
ibv_mw* alloc_mw_op(ibv_pd* pd, ibv_mw_type type) {
  if (type != IBV_MW_TYPE_1 && type != IBV_MW_TYPE_2) {
    errno = EINVAL;
    return nullptr;
  }
  auto* mw = new (std::nothrow) ibv_mw{};
  if (mw == nullptr) {
    errno = ENOMEM;
    return nullptr;
  }
  const auto rkey = link(pd->context).alloc_mw(pd_handle(pd), type);
  if (!rkey) {
    delete mw;
    errno = rkey.error();
    return nullptr;
  }
  mw->context = pd->context;
  mw->pd = pd;
  mw->rkey = mw->handle = *rkey;
  mw->type = type;
  return mw;
}

// Type 1 only: verbs.h's ibv_bind_mw has checked the type, and that the MR and QP share the
// window's PD, before it calls this.
int bind_mw_op(ibv_qp* qp, ibv_mw* mw, ibv_mw_bind* bind) {
  const ibv_mw_bind_info& info = bind->bind_info;
  const bool signaled = (bind->send_flags & IBV_SEND_SIGNALED) || qp_of(qp).sq_sig_all;
  const auto rkey =
      link(qp->context)
          .bind_mw(qp->qp_num, mw->rkey, info.mr != nullptr ? info.mr->lkey : 0, info.addr, info.length,
                   info.mw_access_flags, signaled ? std::optional<std::uint64_t>(bind->wr_id) : std::nullopt);
  if (!rkey) return set_errno(rkey.error());
  mw->rkey = *rkey;
  return 0;
}

int dealloc_mw_op(ibv_mw* mw) {
  const int err = link(mw->context).dealloc_mw(mw->rkey);
  if (err != 0) return set_errno(err);
  delete mw;
  return 0;
}

}  // namespace softrdma::shim
