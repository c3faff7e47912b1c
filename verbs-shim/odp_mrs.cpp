// On-demand paging MRs (IBV_ACCESS_ON_DEMAND) as ibv_advise_mr sees them. The engine reaches an
// on-demand MR's memory only when an operation touches it (emulator/host/local_memory.hpp), so
// a prefetch has nothing to do; advise_mr checks its arguments against the on-demand MRs
// registered here, as a device that prefetches would, and returns.
#include <map>
#include <mutex>
#include <utility>

#include "verbs-shim/ops.hpp"

namespace softrdma::shim {

namespace {

struct OdpMr {
  ibv_pd* pd;
  std::uint64_t start;   // the address SGEs use for its first byte
  std::uint64_t length;  // SIZE_MAX: implicit, the whole address space
};

std::mutex odp_mutex;
std::map<std::pair<ibv_context*, std::uint32_t>, OdpMr> odp_mrs;  // by context and lkey

bool covers(const OdpMr& m, const ibv_sge& s) {
  if (m.length == SIZE_MAX) return true;
  return s.addr >= m.start && s.addr - m.start <= m.length && s.length <= m.length - (s.addr - m.start);
}

}  // namespace

void note_odp_mr(const ibv_mr& mr, std::uint64_t start) {
  std::lock_guard lock(odp_mutex);
  odp_mrs[{mr.context, mr.lkey}] = OdpMr{mr.pd, start, mr.length};
}

void forget_odp_mr(const ibv_mr& mr) {
  std::lock_guard lock(odp_mutex);
  odp_mrs.erase({mr.context, mr.lkey});
}

// verbs_context.advise_mr (ibv_advise_mr): EOPNOTSUPP for an advice it does not know, EINVAL
// for unknown flags, no SGEs, or an SGE outside the PD's on-demand MRs.
int advise_mr_op(ibv_pd* pd, ibv_advise_mr_advice advice, std::uint32_t flags, ibv_sge* sg_list,
                 std::uint32_t num_sge) {
  if (advice != IBV_ADVISE_MR_ADVICE_PREFETCH && advice != IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE &&
      advice != IBV_ADVISE_MR_ADVICE_PREFETCH_NO_FAULT)
    return EOPNOTSUPP;
  if (pd == nullptr || (flags & ~static_cast<std::uint32_t>(IBV_ADVISE_MR_FLAG_FLUSH)) || sg_list == nullptr ||
      num_sge == 0)
    return EINVAL;
  std::lock_guard lock(odp_mutex);
  for (std::uint32_t i = 0; i < num_sge; ++i) {
    const auto it = odp_mrs.find({pd->context, sg_list[i].lkey});
    if (it == odp_mrs.end() || it->second.pd != pd || !covers(it->second, sg_list[i])) return EINVAL;
  }
  return 0;
}

}  // namespace softrdma::shim
