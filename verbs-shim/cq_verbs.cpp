// Completion queues: ibv_create_cq and ibv_create_cq_ex, polling through ibv_poll_cq and the
// extended start/next/end_poll API, notification, resize and destroy.
#include <array>
#include <new>
#include <span>

#include "verbs-shim/completion_clock.hpp"
#include "verbs-shim/context.hpp"
#include "verbs-shim/convert.hpp"
#include "verbs-shim/host_link.hpp"
#include "verbs-shim/objects.hpp"
#include "verbs-shim/ops.hpp"
#include "verbs-shim/system_rdma_core.hpp"

namespace softrdma::shim {

namespace {

// The completion fields an extended CQ can report: the standard set and, where the device
// stamps completions, their timestamps, and where it matches tags, the tag and app context.
// CVLAN and flow tags are features of hardware this device does not emulate.
constexpr std::uint64_t kTimestampWcFlags =
    IBV_WC_EX_WITH_COMPLETION_TIMESTAMP | IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK;

std::uint64_t supported_wc_flags(ibv_context* context) {
  return IBV_WC_STANDARD_FLAGS | (offers_timestamps(context) ? kTimestampWcFlags : 0) |
         (link(context).tm_caps().max_num_tags != 0 ? IBV_WC_EX_WITH_TM_INFO : 0);
}

// Extended-CQ readers: each returns a field of the completion start_poll/next_poll moved to.
const core::Wc& current(ibv_cq_ex* cq) { return cq_of(cq).current; }
ibv_wc_opcode read_opcode(ibv_cq_ex* cq) { return static_cast<ibv_wc_opcode>(current(cq).opcode); }
std::uint32_t read_vendor_err(ibv_cq_ex* cq) { return current(cq).vendor_err; }
std::uint32_t read_byte_len(ibv_cq_ex* cq) { return current(cq).byte_len; }
__be32 read_imm_data(ibv_cq_ex* cq) { return current(cq).imm_data; }
std::uint32_t read_qp_num(ibv_cq_ex* cq) { return current(cq).qp_num; }
std::uint32_t read_src_qp(ibv_cq_ex* cq) { return current(cq).src_qp; }
unsigned int read_wc_flags(ibv_cq_ex* cq) { return current(cq).wc_flags; }
std::uint32_t read_slid(ibv_cq_ex*) { return 0; }  // RoCE has no LIDs
std::uint8_t read_sl(ibv_cq_ex* cq) { return current(cq).sl; }
std::uint8_t read_dlid_path_bits(ibv_cq_ex*) { return 0; }
std::uint64_t read_completion_ts(ibv_cq_ex* cq) { return current(cq).timestamp; }
std::uint64_t read_completion_wallclock_ns(ibv_cq_ex* cq) { return wallclock_ns(current(cq).timestamp); }
void read_tm_info(ibv_cq_ex* cq, ibv_wc_tm_info* info) {
  info->tag = current(cq).tm_tag;
  info->priv = current(cq).tm_priv;
}

// Moves to the next completion: 0, ENOENT when the CQ is empty, or an errno value.
int advance(ibv_cq_ex* cq) {
  Cq& c = cq_of(cq);
  const int n = link(cq->context).poll_cq(cq->handle, std::span<core::Wc>(&c.current, 1));
  if (n < 0) return -n;
  if (n == 0) return ENOENT;
  cq->wr_id = c.current.wr_id;
  cq->status = static_cast<ibv_wc_status>(c.current.status);
  return 0;
}

int start_poll(ibv_cq_ex* cq, ibv_poll_cq_attr* attr) {
  if (attr != nullptr && attr->comp_mask != 0) return EINVAL;
  return advance(cq);
}
int next_poll(ibv_cq_ex* cq) { return advance(cq); }
void end_poll(ibv_cq_ex*) {}  // nothing is held between start_poll and end_poll

void install_readers(Cq& c) {
  ibv_cq_ex& ex = c.ex;
  ex.start_poll = start_poll;
  ex.next_poll = next_poll;
  ex.end_poll = end_poll;
  ex.read_opcode = read_opcode;
  ex.read_vendor_err = read_vendor_err;
  // As rdma-core's providers do, a reader is installed only for a field that was asked for,
  // so a program that reads one it did not ask for crashes in testing rather than reading
  // garbage in production.
  if (c.wc_flags & IBV_WC_EX_WITH_BYTE_LEN) ex.read_byte_len = read_byte_len;
  if (c.wc_flags & IBV_WC_EX_WITH_IMM) ex.read_imm_data = read_imm_data;
  if (c.wc_flags & IBV_WC_EX_WITH_QP_NUM) ex.read_qp_num = read_qp_num;
  if (c.wc_flags & IBV_WC_EX_WITH_SRC_QP) ex.read_src_qp = read_src_qp;
  ex.read_wc_flags = read_wc_flags;
  if (c.wc_flags & IBV_WC_EX_WITH_SLID) ex.read_slid = read_slid;
  if (c.wc_flags & IBV_WC_EX_WITH_SL) ex.read_sl = read_sl;
  if (c.wc_flags & IBV_WC_EX_WITH_DLID_PATH_BITS) ex.read_dlid_path_bits = read_dlid_path_bits;
  if (c.wc_flags & IBV_WC_EX_WITH_COMPLETION_TIMESTAMP) ex.read_completion_ts = read_completion_ts;
  if (c.wc_flags & IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK)
    ex.read_completion_wallclock_ns = read_completion_wallclock_ns;
  if (c.wc_flags & IBV_WC_EX_WITH_TM_INFO) ex.read_tm_info = read_tm_info;
}

Cq* create(ibv_context* context, int cqe, void* cq_context, ibv_comp_channel* channel, int comp_vector,
           std::uint64_t wc_flags) {
  if (context == nullptr || cqe <= 0 || comp_vector < 0 || comp_vector >= context->num_comp_vectors) {
    errno = EINVAL;
    return nullptr;
  }
  auto* c = new (std::nothrow) Cq{};
  if (c == nullptr) {
    errno = ENOMEM;
    return nullptr;
  }
  const auto handle = link(context).create_cq(static_cast<std::uint32_t>(cqe));
  if (!handle) {
    delete c;
    errno = handle.error();  // EINVAL beyond max_cqe
    return nullptr;
  }
  ibv_cq_ex& ex = c->ex;
  ex.context = context;
  ex.channel = channel;
  ex.cq_context = cq_context;
  ex.handle = *handle;
  ex.cqe = cqe;
  pthread_mutex_init(&ex.mutex, nullptr);
  pthread_cond_init(&ex.cond, nullptr);
  c->wc_flags = wc_flags;
  install_readers(*c);
  if (channel != nullptr) hold_channel(channel, +1);
  track(base_of(*c));
  return c;
}

}  // namespace

// verbs_context.create_cq_ex (ibv_create_cq_ex).
ibv_cq_ex* create_cq_ex_op(ibv_context* context, ibv_cq_init_attr_ex* attr) {
  constexpr std::uint32_t kKnownMask = IBV_CQ_INIT_ATTR_MASK_FLAGS | IBV_CQ_INIT_ATTR_MASK_PD;
  constexpr std::uint32_t kKnownFlags = IBV_CREATE_CQ_ATTR_SINGLE_THREADED | IBV_CREATE_CQ_ATTR_IGNORE_OVERRUN;
  if (attr == nullptr || (attr->comp_mask & ~kKnownMask)) {
    errno = EINVAL;
    return nullptr;
  }
  if ((attr->wc_flags & ~supported_wc_flags(context)) ||
      ((attr->comp_mask & IBV_CQ_INIT_ATTR_MASK_FLAGS) && (attr->flags & ~kKnownFlags))) {
    errno = EOPNOTSUPP;
    return nullptr;
  }
  if ((attr->comp_mask & IBV_CQ_INIT_ATTR_MASK_PD) &&
      (attr->parent_domain == nullptr || pd_of(attr->parent_domain).parent_of == nullptr)) {
    errno = EINVAL;  // the PD given must be a parent domain (ibv_create_cq_ex(3))
    return nullptr;
  }
  if (attr->cqe > static_cast<std::uint32_t>(INT32_MAX)) {
    errno = EINVAL;
    return nullptr;
  }
  Cq* c = create(context, static_cast<int>(attr->cqe), attr->cq_context, attr->channel,
                 static_cast<int>(attr->comp_vector), attr->wc_flags);
  return c != nullptr ? &c->ex : nullptr;
}

// ibv_context.ops.poll_cq and req_notify_cq, which verbs.h calls inline.
int poll_cq_op(ibv_cq* cq, int num_entries, ibv_wc* wc) {
  // Kept between calls: a spinning application's every empty poll would otherwise initialise it.
  thread_local std::array<core::Wc, 32> batch;
  int total = 0;
  while (total < num_entries) {
    const std::size_t want = std::min<std::size_t>(batch.size(), static_cast<std::size_t>(num_entries - total));
    const int n = link(cq->context).poll_cq(cq->handle, std::span<core::Wc>(batch.data(), want));
    if (n < 0) return total > 0 ? total : n;
    for (int i = 0; i < n; ++i) wc[total + i] = to_ibv(batch[static_cast<std::size_t>(i)]);
    total += n;
    if (static_cast<std::size_t>(n) < want) break;
  }
  return total;
}

int req_notify_cq_op(ibv_cq* cq, int solicited_only) {
  return link(cq->context).req_notify_cq(cq->handle, solicited_only != 0);
}

}  // namespace softrdma::shim

using namespace softrdma::shim;
namespace core = softrdma::core;

#define SRDMA_LATEST_1_1(name) SRDMA_DEFAULT_VERSION(name, "IBVERBS_1.1")

SRDMA_LATEST_1_1(ibv_create_cq)
ibv_cq* srdma_default_ibv_create_cq(ibv_context* context, int cqe, void* cq_context, ibv_comp_channel* channel,
                                    int comp_vector) {
  SRDMA_FORWARD_IF_SYSTEM(context, ibv_create_cq, context, cqe, cq_context, channel, comp_vector);
  Cq* c = create(context, cqe, cq_context, channel, comp_vector, 0);
  return c != nullptr ? base_of(*c) : nullptr;
}

SRDMA_LATEST_1_1(ibv_resize_cq)
int srdma_default_ibv_resize_cq(ibv_cq* cq, int cqe) {
  SRDMA_FORWARD_IF_SYSTEM(cq, ibv_resize_cq, cq, cqe);
  if (cq == nullptr || cqe <= 0) return EINVAL;
  // EINVAL when more completions wait than the new size holds (ibv_resize_cq(3)).
  const int err = link(cq->context).resize_cq(cq->handle, static_cast<std::uint32_t>(cqe));
  if (err == 0) cq->cqe = cqe;
  return err;
}

SRDMA_LATEST_1_1(ibv_destroy_cq)
int srdma_default_ibv_destroy_cq(ibv_cq* cq) {
  SRDMA_FORWARD_IF_SYSTEM(cq, ibv_destroy_cq, cq);
  if (cq == nullptr) return EINVAL;
  const int err = link(cq->context).destroy_cq(cq->handle);
  if (err != 0) return err;  // EBUSY while a QP or SRQ uses it
  // After untrack no event delivery can be using the pointer.
  wait_acknowledged(cq->mutex, cq->cond, cq->async_events_completed, untrack(cq));
  if (cq->channel != nullptr) hold_channel(cq->channel, -1);
  delete &cq_of(cq);
  return 0;
}
