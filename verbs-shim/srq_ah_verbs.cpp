// Shared receive queues and address handles.
#include <cstring>
#include <new>
#include <optional>

#include "verbs-shim/context.hpp"
#include "verbs-shim/convert.hpp"
#include "verbs-shim/host_link.hpp"
#include "verbs-shim/objects.hpp"
#include "verbs-shim/ops.hpp"
#include "verbs-shim/system_rdma_core.hpp"

namespace softrdma::shim {

int post_srq_recv_op(ibv_srq* srq, ibv_recv_wr* wr, ibv_recv_wr** bad_wr) {
  return post_recv_chain(wr, bad_wr, [&](std::span<const core::RecvWr> wrs, std::size_t& posted) {
    return link(srq->context).post_srq_recv(srq->handle, wrs, posted);
  });
}

namespace {

// The GIDs a received packet's "GRH" names (IBTA vol. 1 annex A17.4.5.1): for RoCEv2 over IPv4
// the 40 bytes hold 20 zero bytes and then the IPv4 header, whose addresses map to GIDs
// ::ffff:a.b.c.d; over IPv6 they are the IPv6 header, a GRH in all but name. The version
// nibble of byte 0 tells them apart, as rdma-core decides: the IPv4 layout has 0 there. (Byte
// 20 cannot: over IPv6 it is inside the source address.)
struct GrhGids {
  Gid source{};
  Gid destination{};
  std::uint32_t flow_label = 0;
  std::uint8_t traffic_class = 0;
};

std::optional<GrhGids> gids_of(const ibv_grh& grh) {
  const auto* bytes = reinterpret_cast<const std::uint8_t*>(&grh);
  GrhGids out;
  if ((bytes[0] >> 4) == 6) {
    std::memcpy(out.source.data(), grh.sgid.raw, 16);
    std::memcpy(out.destination.data(), grh.dgid.raw, 16);
    const std::uint32_t word = be32toh(grh.version_tclass_flow);
    out.traffic_class = static_cast<std::uint8_t>(word >> 20);
    out.flow_label = word & 0xfffff;
  } else if ((bytes[20] >> 4) == 4) {
    out.source[10] = out.source[11] = out.destination[10] = out.destination[11] = 0xff;
    std::memcpy(out.source.data() + 12, bytes + 20 + 12, 4);
    std::memcpy(out.destination.data() + 12, bytes + 20 + 16, 4);
    out.traffic_class = bytes[21];
  } else {
    return std::nullopt;
  }
  return out;
}

}  // namespace

// What an SRQ is besides a queue of receive WQEs on a PD: neither (a basic SRQ), an XRC SRQ or a
// tag-matching one.
struct SrqKind {
  std::optional<core::Device::XrcSrq> xrc;
  std::optional<core::Device::TmSrq> tm;
};

// An SRQ on `pd`: a basic one, an XRC SRQ of a domain or a tag-matching one, each of the last
// two completing into a CQ of its own.
ibv_srq* make_srq(ibv_pd* pd, void* srq_context, const ibv_srq_attr& attr, const SrqKind& kind) {
  auto* srq = new (std::nothrow) ibv_srq{};
  if (srq == nullptr) {
    errno = ENOMEM;
    return nullptr;
  }
  host::DeviceLink& device = link(pd->context);
  const std::uint32_t on = pd_handle(pd);
  const auto handle = kind.xrc  ? device.create_xrc_srq(on, attr.max_wr, attr.max_sge, attr.srq_limit, *kind.xrc)
                      : kind.tm ? device.create_tm_srq(on, attr.max_wr, attr.max_sge, attr.srq_limit, *kind.tm)
                                : device.create_srq(on, attr.max_wr, attr.max_sge, attr.srq_limit);
  if (!handle) {
    delete srq;
    errno = handle.error();
    return nullptr;
  }
  srq->context = pd->context;
  srq->srq_context = srq_context;
  srq->pd = pd;
  srq->handle = *handle;
  pthread_mutex_init(&srq->mutex, nullptr);
  pthread_cond_init(&srq->cond, nullptr);
  track(srq);
  return srq;
}

namespace {

// Whether the device has SRQs of this type: XRC and tag matching only where the link carries
// them (EOPNOTSUPP otherwise, as a provider without them answers).
bool offered(ibv_context* context, ibv_srq_type type) {
  switch (type) {
    case IBV_SRQT_BASIC:
      return true;
    case IBV_SRQT_XRC:
      return offers_xrc(context);
    case IBV_SRQT_TM:
      return link(context).tm_caps().max_num_tags != 0;
  }
  return false;
}

// What an XRC or tag-matching SRQ needs besides the PD: its CQ, and an XRC domain or the
// tag list's size (the engine checks that against its caps).
std::optional<SrqKind> kind_of(const ibv_srq_init_attr_ex& attr, ibv_srq_type type) {
  if (type == IBV_SRQT_BASIC) return SrqKind{};
  const std::uint32_t needed =
      IBV_SRQ_INIT_ATTR_CQ | (type == IBV_SRQT_XRC ? IBV_SRQ_INIT_ATTR_XRCD : IBV_SRQ_INIT_ATTR_TM);
  if ((attr.comp_mask & needed) != needed || attr.cq == nullptr || (type == IBV_SRQT_XRC && attr.xrcd == nullptr))
    return std::nullopt;
  if (type == IBV_SRQT_XRC) return SrqKind{core::Device::XrcSrq{xrcd_handle(attr.xrcd), attr.cq->handle}, {}};
  return SrqKind{{}, core::Device::TmSrq{attr.cq->handle, attr.tm_cap.max_num_tags, attr.tm_cap.max_ops}};
}

}  // namespace

// verbs_context.create_srq_ex: what verbs.h does not send to ibv_create_srq, a basic SRQ with
// more comp_mask bits, an XRC SRQ (a PD, an XRC domain and a CQ, annex A14) or a tag-matching
// SRQ (a PD, a CQ and its tag list, rdma-core's Documentation/tag_matching.md).
ibv_srq* create_srq_ex_op(ibv_context* context, ibv_srq_init_attr_ex* attr) {
  constexpr std::uint32_t kKnown = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD | IBV_SRQ_INIT_ATTR_XRCD |
                                   IBV_SRQ_INIT_ATTR_CQ | IBV_SRQ_INIT_ATTR_TM;
  if (attr == nullptr || attr->comp_mask >= IBV_SRQ_INIT_ATTR_RESERVED || !(attr->comp_mask & IBV_SRQ_INIT_ATTR_PD) ||
      attr->pd == nullptr) {
    errno = EINVAL;
    return nullptr;
  }
  const ibv_srq_type type = (attr->comp_mask & IBV_SRQ_INIT_ATTR_TYPE) ? attr->srq_type : IBV_SRQT_BASIC;
  if ((attr->comp_mask & ~kKnown) || !offered(context, type)) {
    errno = EOPNOTSUPP;
    return nullptr;
  }
  const std::optional<SrqKind> kind = kind_of(*attr, type);
  if (!kind) {
    errno = EINVAL;
    return nullptr;
  }
  return make_srq(attr->pd, attr->srq_context, attr->attr, *kind);
}

// verbs_context.post_srq_ops: the tag list operations of a tag-matching SRQ, in order until one
// fails; an ADD hands back the new entry's handle in wr->tm.handle.
int post_srq_ops_op(ibv_srq* srq, ibv_ops_wr* wr, ibv_ops_wr** bad_wr) {
  thread_local core::SrqOp op;  // reused: its SGE vector keeps its capacity
  for (; wr != nullptr; wr = wr->next) {
    int err = to_core(*wr, op);
    if (err == 0) err = link(srq->context).post_srq_ops(srq->handle, op);
    if (err != 0) {
      *bad_wr = wr;
      return err;
    }
    if (op.opcode == core::SrqOpcode::tag_add) wr->tm.handle = op.handle;
  }
  return 0;
}

// An SRQ's number is its engine handle: what XRC initiators name in their XRCETH.
int get_srq_num_op(ibv_srq* srq, std::uint32_t* srq_num) {
  if (srq == nullptr || srq_num == nullptr) return EINVAL;
  *srq_num = srq->handle;
  return 0;
}

}  // namespace softrdma::shim

using namespace softrdma::shim;
namespace core = softrdma::core;

#define SRDMA_LATEST_1_1(name) SRDMA_DEFAULT_VERSION(name, "IBVERBS_1.1")

SRDMA_LATEST_1_1(ibv_create_srq)
ibv_srq* srdma_default_ibv_create_srq(ibv_pd* pd, ibv_srq_init_attr* attr) {
  SRDMA_FORWARD_IF_SYSTEM(pd, ibv_create_srq, pd, attr);
  if (pd == nullptr || attr == nullptr) {
    errno = EINVAL;
    return nullptr;
  }
  return make_srq(pd, attr->srq_context, attr->attr, SrqKind{});
}

SRDMA_LATEST_1_1(ibv_modify_srq)
int srdma_default_ibv_modify_srq(ibv_srq* srq, ibv_srq_attr* attr, int mask) {
  SRDMA_FORWARD_IF_SYSTEM(srq, ibv_modify_srq, srq, attr, mask);
  if (srq == nullptr || attr == nullptr || (mask & ~(IBV_SRQ_MAX_WR | IBV_SRQ_LIMIT))) return EINVAL;
  return link(srq->context)
      .modify_srq(srq->handle, attr->max_wr, attr->srq_limit, mask & IBV_SRQ_MAX_WR, mask & IBV_SRQ_LIMIT);
}

SRDMA_LATEST_1_1(ibv_query_srq)
int srdma_default_ibv_query_srq(ibv_srq* srq, ibv_srq_attr* attr) {
  SRDMA_FORWARD_IF_SYSTEM(srq, ibv_query_srq, srq, attr);
  if (srq == nullptr || attr == nullptr) return EINVAL;
  return link(srq->context).query_srq(srq->handle, attr->max_wr, attr->max_sge, attr->srq_limit);
}

SRDMA_LATEST_1_1(ibv_destroy_srq)
int srdma_default_ibv_destroy_srq(ibv_srq* srq) {
  SRDMA_FORWARD_IF_SYSTEM(srq, ibv_destroy_srq, srq);
  if (srq == nullptr) return EINVAL;
  const int err = link(srq->context).destroy_srq(srq->handle);
  if (err != 0) return err;  // EBUSY while a QP uses it
  wait_acknowledged(srq->mutex, srq->cond, srq->events_completed, untrack(srq));
  delete srq;
  return 0;
}

SRDMA_LATEST_1_1(ibv_create_ah)
ibv_ah* srdma_default_ibv_create_ah(ibv_pd* pd, ibv_ah_attr* attr) {
  SRDMA_FORWARD_IF_SYSTEM(pd, ibv_create_ah, pd, attr);
  // RoCE addresses are GIDs: an AH without a GRH names no one (the kernel refuses it too).
  if (pd == nullptr || attr == nullptr || !attr->is_global) {
    errno = EINVAL;
    return nullptr;
  }
  auto* ah = new (std::nothrow) ibv_ah{};
  if (ah == nullptr) {
    errno = ENOMEM;
    return nullptr;
  }
  const core::AddressVector av = to_core(*attr);
  const auto handle = link(pd->context).create_ah(pd_handle(pd), av);
  if (!handle) {
    delete ah;
    errno = handle.error();
    return nullptr;
  }
  ah->context = pd->context;
  ah->pd = pd;
  ah->handle = *handle;
  return ah;
}

SRDMA_LATEST_1_1(ibv_destroy_ah)
int srdma_default_ibv_destroy_ah(ibv_ah* ah) {
  SRDMA_FORWARD_IF_SYSTEM(ah, ibv_destroy_ah, ah);
  if (ah == nullptr) return EINVAL;
  const int err = link(ah->context).destroy_ah(ah->handle);
  if (err != 0) return err;
  delete ah;
  return 0;
}

// The address that answers a received UD message: back to its source GID, from the local GID
// it was sent to (ibv_init_ah_from_wc(3)).
SRDMA_EXPORT int ibv_init_ah_from_wc(ibv_context* context, std::uint8_t port_num, ibv_wc* wc, ibv_grh* grh,
                                     ibv_ah_attr* ah_attr) {
  SRDMA_FORWARD_IF_SYSTEM(context, ibv_init_ah_from_wc, context, port_num, wc, grh, ah_attr);
  if (context == nullptr || wc == nullptr || ah_attr == nullptr || port_num != 1 || grh == nullptr ||
      !(wc->wc_flags & IBV_WC_GRH)) {
    errno = EINVAL;
    return -1;
  }
  const std::optional<GrhGids> gids = gids_of(*grh);
  if (!gids) {
    errno = EPROTONOSUPPORT;  // neither header: rdma-core's answer too
    return -1;
  }
  const DeviceIdentity& id = identity_of(context);
  int index = -1;
  for (int i = 0; i < kGidTableLength; ++i) {
    if (id.gids[static_cast<std::size_t>(i)] == gids->destination) index = i;
  }
  if (index < 0) {
    errno = ENOENT;  // the packet was not sent to one of this port's GIDs
    return -1;
  }
  *ah_attr = ibv_ah_attr{};
  std::memcpy(ah_attr->grh.dgid.raw, gids->source.data(), 16);
  ah_attr->grh.sgid_index = static_cast<std::uint8_t>(index);
  ah_attr->grh.flow_label = gids->flow_label;
  ah_attr->grh.hop_limit = 0xff;  // one answer crosses as many routers as it must
  ah_attr->grh.traffic_class = gids->traffic_class;
  ah_attr->is_global = 1;
  ah_attr->sl = wc->sl;
  ah_attr->port_num = port_num;
  return 0;
}

SRDMA_EXPORT ibv_ah* ibv_create_ah_from_wc(ibv_pd* pd, ibv_wc* wc, ibv_grh* grh, std::uint8_t port_num) {
  SRDMA_FORWARD_IF_SYSTEM(pd, ibv_create_ah_from_wc, pd, wc, grh, port_num);
  ibv_ah_attr attr;
  if (pd == nullptr || ibv_init_ah_from_wc(pd->context, port_num, wc, grh, &attr) != 0) return nullptr;
  return srdma_default_ibv_create_ah(pd, &attr);
}
