// UD multicast through the RDMA CM, as Linux's rdma_cm serves it on a RoCE port.
//
// A group is named by its IP address, and its MGID is that address as a GID: an IPv6 group's
// address itself, an IPv4 group's in IPv4-mapped form (::ffff:a.b.c.d), as RoCEv2 maps IPv4
// groups. There is no subnet administrator to ask and no IGMP to send from here: the device
// joins the group on the network when its first QP attaches (emulator/host/embedded_host.hpp).
// So a join completes at once with RDMA_CM_EVENT_MULTICAST_JOIN, whose param.ud is what a
// sender needs (qp_num 0xFFFFFF, qkey RDMA_UDP_QKEY, an AH to the MGID) and carries the join's
// context as private_data. As rdma-core's librdmacm does, the ID's QP is attached to the MGID
// when that event is taken (a failed attach makes it RDMA_CM_EVENT_MULTICAST_ERROR), and
// rdma_leave_multicast detaches it.
//
// The rules are rdma-core's over the kernel's: the ID must be a UD port space and bound or
// resolved to an address (mckey resolves the group's address itself), and the address a
// multicast one (EINVAL otherwise); a group of the other family than the device's address is
// one its socket cannot hear (EAFNOSUPPORT); RDMA_PS_IPOIB, whose groups are IPoIB's, is not
// served (ENOSYS). rdma_join_multicast_ex takes FULLMEMBER and SENDONLY_FULLMEMBER (which
// joins to send only: no attach); an unknown comp_mask bit is EOPNOTSUPP, a missing address
// or join flags or an unknown flag EINVAL. Leaving a group the ID has not joined is
// EADDRNOTAVAIL.
#include <algorithm>
#include <atomic>
#include <cstring>

#include "emulator/core/roce_headers.hpp"
#include "verbs-shim/rdmacm/cm_objects.hpp"
#include "verbs-shim/rdmacm/not_implemented.hpp"
#include "verbs-shim/rdmacm/rdmacm_api.hpp"
#include "verbs-shim/rdmacm/system_cm.hpp"
#include "wire/ib_headers.hpp"

namespace softrdma::rdmacm {
namespace {

constexpr std::uint8_t kGroupHopLimit = 64;  // what the kernel puts in a RoCEv2 group's AH

std::atomic<std::uint64_t> next_serial{1};

ibv_ah_attr group_ah(const Id& id, const core::Gid& mgid) {
  ibv_ah_attr ah{};
  ah.is_global = 1;
  std::memcpy(ah.grh.dgid.raw, mgid.data(), mgid.size());
  ah.grh.sgid_index = 0;
  ah.grh.hop_limit = kGroupHopLimit;
  ah.grh.traffic_class = id.tos;
  ah.port_num = 1;
  return ah;
}

bool is_ip(const sockaddr* a) { return a->sa_family == AF_INET || a->sa_family == AF_INET6; }

int join(Id& id, const sockaddr* address, bool send_only, void* context) {
  if (address == nullptr) return fail(EINVAL);
  if (!is_ip(address)) return fail(EAFNOSUPPORT);
  if (id.id.ps == RDMA_PS_IPOIB) return not_implemented_minus1("rdma_join_multicast in RDMA_PS_IPOIB");
  if (id.id.qp_type != IBV_QPT_UD || (id.state != IdState::bound && id.state != IdState::addr_resolved))
    return fail(EINVAL);
  const core::Gid mgid = gid_of(address);
  if (!core::is_multicast_gid(mgid)) return fail(EINVAL);
  if (core::is_ipv4_mapped(mgid) != core::is_ipv4_mapped(dev().gid)) return fail(EAFNOSUPPORT);
  const std::uint64_t serial = next_serial.fetch_add(1);
  {
    std::lock_guard lock(id.mutex);
    id.groups.push_back({serial, mgid, context, send_only});
  }
  queue_joined(id, serial);
  return id.own_channel ? wait_for(id, RDMA_CM_EVENT_MULTICAST_JOIN) : 0;
}

}  // namespace

bool translate_join(Id& id, const Joined& j, Event& out) {
  std::lock_guard lock(id.mutex);  // against a leave on another thread
  const auto m =
      std::find_if(id.groups.begin(), id.groups.end(), [&](const Membership& g) { return g.serial == j.serial; });
  if (m == id.groups.end()) return false;
  out.event.id = &id.id;
  out.event.event = RDMA_CM_EVENT_MULTICAST_JOIN;
  rdma_ud_param& ud = out.event.param.ud;
  ud.private_data = m->context;
  ud.ah_attr = group_ah(id, m->mgid);
  ud.qp_num = wire::kMulticastQpn;
  ud.qkey = kUdpQkey;
  if (id.id.qp != nullptr && !m->send_only) {
    if (const int err = ibv_attach_mcast(id.id.qp, &ud.ah_attr.grh.dgid, 0)) {
      out.event.event = RDMA_CM_EVENT_MULTICAST_ERROR;
      out.event.status = -err;
    }
  }
  return true;
}

}  // namespace softrdma::rdmacm

using namespace softrdma::rdmacm;

SRDMA_RDMACM_VERSION(rdma_join_multicast, "RDMACM_1.0")
int srdma_rdmacm_rdma_join_multicast(rdma_cm_id* cm_id, sockaddr* address, void* context) {
  SRDMA_CM_FORWARD_IF_SYSTEM(cm_id, rdma_join_multicast, address, context);
  if (cm_id == nullptr) return fail(EINVAL);
  return join(id_of(cm_id), address, false, context);
}

SRDMA_RDMACM_VERSION(rdma_join_multicast_ex, "RDMACM_1.1")
int srdma_rdmacm_rdma_join_multicast_ex(rdma_cm_id* cm_id, rdma_cm_join_mc_attr_ex* attr, void* context) {
  SRDMA_CM_FORWARD_IF_SYSTEM(cm_id, rdma_join_multicast_ex, attr, context);
  if (cm_id == nullptr || attr == nullptr) return fail(EINVAL);
  constexpr std::uint32_t kNeeded = RDMA_CM_JOIN_MC_ATTR_ADDRESS | RDMA_CM_JOIN_MC_ATTR_JOIN_FLAGS;
  if (attr->comp_mask & ~kNeeded) return fail(EOPNOTSUPP);
  if ((attr->comp_mask & kNeeded) != kNeeded ||
      attr->join_flags >= static_cast<std::uint32_t>(RDMA_MC_JOIN_FLAG_RESERVED))
    return fail(EINVAL);
  return join(id_of(cm_id), attr->addr, attr->join_flags == RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER, context);
}

SRDMA_RDMACM_VERSION(rdma_leave_multicast, "RDMACM_1.0")
int srdma_rdmacm_rdma_leave_multicast(rdma_cm_id* cm_id, sockaddr* address) {
  SRDMA_CM_FORWARD_IF_SYSTEM(cm_id, rdma_leave_multicast, address);
  if (cm_id == nullptr || address == nullptr || !is_ip(address)) return fail(EINVAL);
  Id& id = id_of(cm_id);
  const core::Gid mgid = gid_of(address);
  std::lock_guard lock(id.mutex);
  const auto m = std::find_if(id.groups.begin(), id.groups.end(), [&](const Membership& g) { return g.mgid == mgid; });
  if (m == id.groups.end()) return fail(EADDRNOTAVAIL);
  if (id.id.qp != nullptr && !m->send_only) {
    ibv_gid gid;
    std::memcpy(gid.raw, mgid.data(), mgid.size());
    ibv_detach_mcast(id.id.qp, &gid, 0);  // not attached when the join's event was never taken
  }
  id.groups.erase(m);
  return 0;
}
