// Converters between the kernel's uverbs/SA structs and the verbs structs. rdma-core exports
// them for librdmacm and providers; real librdmacm runs over this shim (verbs-abi.md §6), so
// they are real field-by-field copies rather than stubs that would leave garbage behind.
#include <infiniband/sa.h>
#include <rdma/ib_user_sa.h>
#include <rdma/ib_user_verbs.h>

#include <cstring>
#include <type_traits>

#include "verbs-shim/verbs_api.hpp"

extern "C" {
void ibv_copy_ah_attr_from_kern(ibv_ah_attr* dst, ib_uverbs_ah_attr* src);
void ibv_copy_qp_attr_from_kern(ibv_qp_attr* dst, ib_uverbs_qp_attr* src);
void ibv_copy_path_rec_from_kern(ibv_sa_path_rec* dst, ib_user_path_rec* src);
void ibv_copy_path_rec_to_kern(ib_user_path_rec* dst, ibv_sa_path_rec* src);
}

SRDMA_EXPORT void ibv_copy_ah_attr_from_kern(ibv_ah_attr* dst, ib_uverbs_ah_attr* src) {
  std::memcpy(dst->grh.dgid.raw, src->grh.dgid, sizeof dst->grh.dgid.raw);
  dst->grh.flow_label = src->grh.flow_label;
  dst->grh.sgid_index = src->grh.sgid_index;
  dst->grh.hop_limit = src->grh.hop_limit;
  dst->grh.traffic_class = src->grh.traffic_class;
  dst->dlid = src->dlid;
  dst->sl = src->sl;
  dst->src_path_bits = src->src_path_bits;
  dst->static_rate = src->static_rate;
  dst->is_global = src->is_global;
  dst->port_num = src->port_num;
}

SRDMA_EXPORT void ibv_copy_qp_attr_from_kern(ibv_qp_attr* dst, ib_uverbs_qp_attr* src) {
  dst->cur_qp_state = static_cast<ibv_qp_state>(src->cur_qp_state);
  dst->path_mtu = static_cast<ibv_mtu>(src->path_mtu);
  dst->path_mig_state = static_cast<ibv_mig_state>(src->path_mig_state);
  dst->qkey = src->qkey;
  dst->rq_psn = src->rq_psn;
  dst->sq_psn = src->sq_psn;
  dst->dest_qp_num = src->dest_qp_num;
  dst->qp_access_flags = static_cast<unsigned>(src->qp_access_flags);
  dst->cap.max_send_wr = src->max_send_wr;
  dst->cap.max_recv_wr = src->max_recv_wr;
  dst->cap.max_send_sge = src->max_send_sge;
  dst->cap.max_recv_sge = src->max_recv_sge;
  dst->cap.max_inline_data = src->max_inline_data;
  ibv_copy_ah_attr_from_kern(&dst->ah_attr, &src->ah_attr);
  ibv_copy_ah_attr_from_kern(&dst->alt_ah_attr, &src->alt_ah_attr);
  dst->pkey_index = src->pkey_index;
  dst->alt_pkey_index = src->alt_pkey_index;
  dst->en_sqd_async_notify = src->en_sqd_async_notify;
  dst->sq_draining = src->sq_draining;
  dst->max_rd_atomic = src->max_rd_atomic;
  dst->max_dest_rd_atomic = src->max_dest_rd_atomic;
  dst->min_rnr_timer = src->min_rnr_timer;
  dst->port_num = src->port_num;
  dst->timeout = src->timeout;
  dst->retry_cnt = src->retry_cnt;
  dst->rnr_retry = src->rnr_retry;
  dst->alt_port_num = src->alt_port_num;
  dst->alt_timeout = src->alt_timeout;
  // qp_state is not copied: the kernel reports it through cur_qp_state.
}

namespace {

// The path record fields both layouts name alike; only their integer types differ.
template <class Dst, class Src>
void copy_path_fields(Dst& d, const Src& s) {
  const auto set = [](auto& to, auto from) { to = static_cast<std::remove_reference_t<decltype(to)>>(from); };
  set(d.dlid, s.dlid);
  set(d.slid, s.slid);
  set(d.raw_traffic, s.raw_traffic);
  set(d.flow_label, s.flow_label);
  set(d.reversible, s.reversible);
  set(d.mtu, s.mtu);
  set(d.pkey, s.pkey);
  set(d.hop_limit, s.hop_limit);
  set(d.traffic_class, s.traffic_class);
  set(d.numb_path, s.numb_path);
  set(d.sl, s.sl);
  set(d.mtu_selector, s.mtu_selector);
  set(d.rate_selector, s.rate_selector);
  set(d.rate, s.rate);
  set(d.packet_life_time_selector, s.packet_life_time_selector);
  set(d.packet_life_time, s.packet_life_time);
  set(d.preference, s.preference);
}

}  // namespace

SRDMA_EXPORT void ibv_copy_path_rec_from_kern(ibv_sa_path_rec* dst, ib_user_path_rec* src) {
  std::memcpy(dst->dgid.raw, src->dgid, sizeof dst->dgid.raw);
  std::memcpy(dst->sgid.raw, src->sgid, sizeof dst->sgid.raw);
  copy_path_fields(*dst, *src);
}

SRDMA_EXPORT void ibv_copy_path_rec_to_kern(ib_user_path_rec* dst, ibv_sa_path_rec* src) {
  std::memcpy(dst->dgid, src->dgid.raw, sizeof dst->dgid);
  std::memcpy(dst->sgid, src->sgid.raw, sizeof dst->sgid);
  copy_path_fields(*dst, *src);
}
