#include "verbs-shim/attributes.hpp"

#include <cstring>

#include "emulator/core/device.hpp"
#include "verbs-shim/completion_clock.hpp"

namespace softrdma::shim {

namespace {

// The engine's defaults are the device's limits: a verb the shim accepts must be one the
// engine will accept.
const core::DeviceConfig kEngine{};
static_assert(kGidTableLength == core::DeviceLimits{}.gid_table_len);

int as_int(std::uint32_t v) { return static_cast<int>(v); }

std::uint64_t guid_be(const Guid& guid) {
  std::uint64_t v;  // the bytes are already in wire (big-endian) order
  std::memcpy(&v, guid.data(), sizeof v);
  return v;
}

}  // namespace

ibv_mtu mtu_enum(unsigned bytes) {
  switch (bytes) {
    case 256:
      return IBV_MTU_256;
    case 512:
      return IBV_MTU_512;
    case 2048:
      return IBV_MTU_2048;
    case 4096:
      return IBV_MTU_4096;
    default:
      return IBV_MTU_1024;
  }
}

ibv_device_attr device_attr(const DeviceIdentity& id, const LinkOffers& link) {
  const auto& lim = kEngine.limits;
  const core::MulticastLimits& mcast = link.mcast;
  ibv_device_attr a{};
  std::strncpy(a.fw_ver, kFirmwareVersion, sizeof a.fw_ver - 1);
  a.node_guid = guid_be(id.guid);
  a.sys_image_guid = a.node_guid;  // one device per "system", as a single-port NIC reports
  a.max_mr_size = ~0ull;
  a.page_size_cap = ~0xfffull;  // any power-of-two page from 4 KiB: the engine does not pin pages
  a.vendor_id = kVendorId;
  a.vendor_part_id = kVendorPartId;
  a.hw_ver = 0;
  a.max_qp = as_int(kEngine.max_qp);
  a.max_qp_wr = as_int(lim.max_qp_wr);
  // Advertise only what the engine does and the shim exposes: RNR NAKs, and memory windows of
  // type 1 and 2B (s10.6.7; a type 2 window is bound to one QP, as rxe's). SRQ resize and the
  // rest are added when the shim exposes them (a zero capability makes the rdma-core tests skip
  // rather than fail).
  a.device_cap_flags =
      IBV_DEVICE_SYS_IMAGE_GUID | IBV_DEVICE_RC_RNR_NAK_GEN | IBV_DEVICE_MEM_WINDOW | IBV_DEVICE_MEM_WINDOW_TYPE_2B;
  if (link.xrc) a.device_cap_flags |= IBV_DEVICE_XRC;  // annex A14, where the link carries its verbs
  a.max_sge = as_int(lim.max_sge);
  a.max_sge_rd = as_int(lim.max_sge);
  a.max_cq = as_int(kEngine.max_cq);
  a.max_cqe = as_int(kEngine.max_cqe);
  a.max_mr = as_int(kEngine.max_mr);
  a.max_mw = a.max_mr;  // windows and regions share the engine's one table of keys
  a.max_pd = as_int(kEngine.max_pd);
  a.max_qp_rd_atom = lim.max_qp_rd_atom;
  a.max_res_rd_atom = a.max_qp * a.max_qp_rd_atom;
  a.max_qp_init_rd_atom = lim.max_qp_init_rd_atom;
  a.atomic_cap = IBV_ATOMIC_HCA;
  a.max_ah = as_int(kEngine.max_ah);
  a.max_srq = as_int(kEngine.max_srq);
  a.max_srq_wr = as_int(lim.max_qp_wr);
  a.max_srq_sge = as_int(lim.max_sge);
  a.max_mcast_grp = as_int(mcast.max_groups);
  a.max_mcast_qp_attach = as_int(mcast.max_qps_per_group);
  a.max_total_mcast_qp_attach = as_int(mcast.max_attachments);
  a.max_pkeys = lim.pkey_table_len;
  a.local_ca_ack_delay = 15;  // 4.096 us * 2^15 ~ 134 ms: a host stack, not silicon
  a.phys_port_cnt = lim.phys_port_cnt;
  if (id.transport == Transport::iwarp) {
    // RC only, over its TCP connection: no atomics (RFC 5040 has none), no address handles
    // (UD), no multicast, and no P_Keys, as Linux siw reports.
    a.atomic_cap = IBV_ATOMIC_NONE;
    a.max_ah = 0;
    a.max_mcast_grp = a.max_mcast_qp_attach = a.max_total_mcast_qp_attach = 0;
    a.max_pkeys = 0;
    a.max_mw = 0;  // siw has no memory windows
    a.device_cap_flags &= ~(IBV_DEVICE_MEM_WINDOW | IBV_DEVICE_MEM_WINDOW_TYPE_2B | IBV_DEVICE_XRC);
  }
  return a;
}

// IB_UVERBS_DEVICE_ATOMIC_WRITE of Linux's uapi (ib_user_verbs.h, since 6.2), which
// rdma-core 44's headers predate: RC QPs take ibv_wr_atomic_write.
constexpr std::uint64_t kDeviceAtomicWrite = 1ULL << 40;

ibv_device_attr_ex device_attr_ex(const DeviceIdentity& id, const LinkOffers& link) {
  ibv_device_attr_ex a{};
  a.orig_attr = device_attr(id, link);
  a.device_cap_flags_ex = a.orig_attr.device_cap_flags;  // the low 32 bits mirror orig_attr
  a.phys_port_cnt_ex = a.orig_attr.phys_port_cnt;        // pyverbs' test_phys_port_cnt_ex compares them
  if (id.transport != Transport::iwarp) {
    a.device_cap_flags_ex |= kDeviceAtomicWrite;
    a.hca_core_clock = kCoreClockKhz;  // completion timestamps (completion_clock.hpp)
    a.completion_timestamp_mask = ~std::uint64_t{0};
    // On-demand paging, explicit and implicit MRs, for what rdma-core's ODP tests and
    // unmapped_memory_test.py run (as siw, srdmaiw0 has none).
    a.odp_caps.general_caps = IBV_ODP_SUPPORT | IBV_ODP_SUPPORT_IMPLICIT;
    a.odp_caps.per_transport_caps.rc_odp_caps = IBV_ODP_SUPPORT_SEND | IBV_ODP_SUPPORT_RECV | IBV_ODP_SUPPORT_WRITE |
                                                IBV_ODP_SUPPORT_READ | IBV_ODP_SUPPORT_ATOMIC |
                                                IBV_ODP_SUPPORT_SRQ_RECV;
    a.odp_caps.per_transport_caps.ud_odp_caps = IBV_ODP_SUPPORT_SEND | IBV_ODP_SUPPORT_RECV;
    if (link.xrc) a.xrc_odp_caps = IBV_ODP_SUPPORT_SEND | IBV_ODP_SUPPORT_SRQ_RECV;
  }
  if (link.tm.max_num_tags != 0) {  // tag matching on RC (core/tag_matching.hpp)
    a.tm_caps.max_rndv_hdr_size = link.tm.max_rndv_hdr_size;
    a.tm_caps.max_num_tags = link.tm.max_num_tags;
    a.tm_caps.flags = IBV_TM_CAP_RC;
    a.tm_caps.max_ops = link.tm.max_ops;
    a.tm_caps.max_sge = link.tm.max_sge;
  }
  return a;
}

ibv_port_attr port_attr(const DeviceIdentity& id) {
  const auto& lim = kEngine.limits;
  ibv_port_attr p{};
  p.state = IBV_PORT_ACTIVE;
  p.max_mtu = mtu_enum(core::mtu_bytes(kEngine.max_mtu));
  p.active_mtu = mtu_enum(id.active_mtu_bytes);
  p.gid_tbl_len = lim.gid_table_len;
  // A RoCE port: connection manager supported, GIDs derived from IP addresses.
  p.port_cap_flags = IBV_PORT_CM_SUP | IBV_PORT_IP_BASED_GIDS;
  p.max_msg_sz = 1u << 31;  // IBTA's limit on one message
  p.pkey_tbl_len = lim.pkey_table_len;
  p.max_vl_num = 1;     // VL0 only
  p.active_width = 1;   // 1X
  p.active_speed = 32;  // EDR: 1X EDR reads as 25 Gb/s
  p.phys_state = 5;     // LinkUp
  p.link_layer = IBV_LINK_LAYER_ETHERNET;
  p.flags = IBV_QPF_GRH_REQUIRED;  // RoCE: every address handle needs a GRH
  if (id.transport == Transport::iwarp) {
    // An iWARP port, as siw's: connections through the CM, by IP address; one GID (its MAC).
    p.port_cap_flags = IBV_PORT_CM_SUP;
    p.gid_tbl_len = 1;
    p.pkey_tbl_len = 1;
    p.flags = 0;
  }
  return p;
}

}  // namespace softrdma::shim
