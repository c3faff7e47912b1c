// The objects the shim hands out, each an rdma-core struct that the application reads (and
// partly writes) at fixed offsets, followed by what the shim keeps beside it
// (verbs-abi.md §4.3). The engine names objects by integer handles; each struct's own
// handle field carries it: ibv_pd.handle, ibv_cq.handle, ibv_srq.handle and ibv_ah.handle are
// the engine's handles, ibv_qp.qp_num its QPN, ibv_mr.lkey and ibv_mw.rkey its keys.
#pragma once

#include <sys/types.h>

#include <compare>
#include <cstdint>
#include <optional>
#include <type_traits>
#include <vector>

#include "emulator/core/verbs_types.hpp"
#include "verbs-shim/verbs_api.hpp"

namespace softrdma::shim {

// A protection domain, or a parent domain (ibv_alloc_parent_domain) standing for one: objects
// created on a parent domain belong to its PD. The allocators a parent domain carries are for
// providers that place queues in application memory; the engine's queues are its own.
struct Pd {
  ibv_pd pd;                    // first: the application holds &pd
  ibv_pd* parent_of = nullptr;  // for a parent domain: the PD it stands for
};

// A CQ is always allocated with the extended layout, whose first 128 bytes are an ibv_cq
// (ibv_cq_ex_to_cq is a cast), so ibv_poll_cq works on both kinds (verbs-abi.md §3.3).
struct Cq {
  ibv_cq_ex ex;
  std::uint64_t wc_flags = 0;  // the ibv_create_cq_wc_flags asked for (extended CQs)
  core::Wc current;            // the completion start_poll/next_poll moved to
  std::uint64_t current_ts = 0;
};

// A QP is allocated with the ibv_qp_ex layout (its first 160 bytes are the ibv_qp);
// ibv_qp_to_qp_ex hands that view out only when the QP was created with send_ops_flags.
struct Qp {
  ibv_qp_ex ex;
  std::uint64_t send_ops_flags = 0;
  bool sq_sig_all = false;
  // The work requests built between ibv_wr_start and ibv_wr_complete, and the first error
  // one of them met (reported by ibv_wr_complete, which then posts none).
  std::vector<core::SendWr> batch;
  int batch_error = 0;
};

static_assert(std::is_standard_layout_v<Pd> && std::is_standard_layout_v<Cq> && std::is_standard_layout_v<Qp>,
              "the casts below rely on the rdma-core struct coming first");

inline Pd& pd_of(ibv_pd* pd) { return *reinterpret_cast<Pd*>(pd); }
inline Cq& cq_of(ibv_cq* cq) { return *reinterpret_cast<Cq*>(cq); }
inline Cq& cq_of(ibv_cq_ex* cq) { return *reinterpret_cast<Cq*>(cq); }
inline ibv_cq* base_of(Cq& cq) { return reinterpret_cast<ibv_cq*>(&cq.ex); }
inline Qp& qp_of(ibv_qp* qp) { return *reinterpret_cast<Qp*>(qp); }
inline Qp& qp_of(ibv_qp_ex* qp) { return *reinterpret_cast<Qp*>(qp); }

// An XRC domain: the engine's handle for it, and the file it was opened with, which every open
// of that file on the device shares (none for fd -1).
struct FileId {
  dev_t dev = 0;
  ino_t ino = 0;
  auto operator<=>(const FileId&) const = default;
};
struct Xrcd {
  ibv_xrcd xrcd;  // first: the application holds &xrcd
  std::uint32_t handle = 0;
  std::optional<FileId> file;
};
static_assert(std::is_standard_layout_v<Xrcd>, "the cast below relies on ibv_xrcd coming first");
inline std::uint32_t xrcd_handle(ibv_xrcd* xrcd) { return reinterpret_cast<Xrcd*>(xrcd)->handle; }

// The engine PD an application PD (or parent domain) names.
inline std::uint32_t pd_handle(ibv_pd* pd) { return pd->handle; }

}  // namespace softrdma::shim
