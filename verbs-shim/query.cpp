// The query verbs: device, port, GID table, P_Key table. Each has up to three entry points
// (an exported function, a verbs_context op the inline wrappers call, a compat layout), and
// each honours the size the caller passes (verbs-abi.md §4.4).
#include <endian.h>

#include <algorithm>
#include <cstring>

#include "verbs-shim/attributes.hpp"
#include "verbs-shim/context.hpp"
#include "verbs-shim/host_link.hpp"
#include "verbs-shim/ops.hpp"
#include "verbs-shim/system_rdma_core.hpp"

namespace softrdma::shim {

namespace {

bool valid_port(std::uint32_t port_num) { return port_num == kPortNum; }

// The table entry, or null for an index outside the table; an all-zero GID is an empty slot.
const Gid* gid_at(const DeviceIdentity& id, std::uint64_t index) {
  return index < static_cast<std::uint64_t>(port_attr(id).gid_tbl_len) ? &id.gids[index] : nullptr;
}

bool is_iwarp(const DeviceIdentity& id) { return id.transport == Transport::iwarp; }

LinkOffers offers_of(ibv_context* ctx) { return {link(ctx).multicast_limits(), offers_xrc(ctx), link(ctx).tm_caps()}; }

bool is_empty(const Gid& gid) {
  return std::all_of(gid.begin(), gid.end(), [](std::uint8_t b) { return b == 0; });
}

// An entry of the port's table that holds a GID.
bool in_use(const DeviceIdentity& id, std::uint32_t index) {
  const Gid* g = gid_at(id, index);
  return g != nullptr && !is_empty(*g);
}

ibv_gid_entry gid_entry(const DeviceIdentity& id, std::uint32_t index) {
  ibv_gid_entry e{};
  std::memcpy(e.gid.raw, id.gids[index].data(), sizeof e.gid.raw);
  e.gid_index = index;
  e.port_num = kPortNum;
  // Every RoCE GID is an IP address: RoCEv2. The kernel types an iWARP device's GID as IB's.
  e.gid_type = is_iwarp(id) ? IBV_GID_TYPE_IB : IBV_GID_TYPE_ROCE_V2;
  e.ndev_ifindex = static_cast<std::uint32_t>(id.ifindex);
  return e;
}

// Copies `src` into a caller buffer of `size` bytes: the common prefix, zeros beyond it (an
// application built against newer headers passes a larger struct than ours).
template <class T>
void copy_out(void* dst, std::size_t size, const T& src) {
  std::memset(dst, 0, size);
  std::memcpy(dst, &src, std::min(size, sizeof src));
}

}  // namespace

int query_port_op(ibv_context* ctx, std::uint8_t port_num, ibv_port_attr* attr, std::size_t attr_len) {
  if (ctx == nullptr || attr == nullptr || !valid_port(port_num)) return EINVAL;
  copy_out(attr, attr_len, port_attr(identity_of(ctx)));
  return 0;
}

int query_device_ex_op(ibv_context* ctx, const ibv_query_device_ex_input* input, ibv_device_attr_ex* attr,
                       std::size_t attr_size) {
  if (ctx == nullptr || attr == nullptr) return EINVAL;
  if (input != nullptr && input->comp_mask != 0) return EINVAL;  // no input fields defined yet
  if (attr_size < sizeof(ibv_device_attr)) return EINVAL;        // orig_attr must fit
  copy_out(attr, attr_size, device_attr_ex(identity_of(ctx), offers_of(ctx)));
  return 0;
}

}  // namespace softrdma::shim

using namespace softrdma::shim;

SRDMA_DEFAULT_VERSION(ibv_query_device, "IBVERBS_1.1")
int srdma_default_ibv_query_device(ibv_context* context, ibv_device_attr* out) {
  SRDMA_FORWARD_IF_SYSTEM(context, ibv_query_device, context, out);
  if (context == nullptr || out == nullptr) return EINVAL;
  *out = device_attr(identity_of(context), offers_of(context));
  return 0;
}

// The exported ibv_query_port takes rdma-core's 48-byte compat layout: ibv_port_attr without
// its last field, port_cap_flags2. Writing 52 bytes would overrun an old caller's struct
// (verbs-abi.md §8.8). Current programs reach query_port_op through verbs.h's inline wrapper.
SRDMA_DEFAULT_VERSION(ibv_query_port, "IBVERBS_1.1")
int srdma_default_ibv_query_port(ibv_context* context, std::uint8_t port_num, _compat_ibv_port_attr* out) {
  SRDMA_FORWARD_IF_SYSTEM(context, ibv_query_port, context, port_num, out);
  if (context == nullptr || out == nullptr || !valid_port(port_num)) return EINVAL;
  const ibv_port_attr full = port_attr(identity_of(context));
  std::memcpy(static_cast<void*>(out), &full, offsetof(ibv_port_attr, port_cap_flags2));
  return 0;
}

// rdma-core's contract: an empty slot reads as the zero GID and succeeds; -1 otherwise.
SRDMA_DEFAULT_VERSION(ibv_query_gid, "IBVERBS_1.1")
int srdma_default_ibv_query_gid(ibv_context* context, std::uint8_t port_num, int index, ibv_gid* gid) {
  SRDMA_FORWARD_IF_SYSTEM(context, ibv_query_gid, context, port_num, index, gid);
  const Gid* g = context != nullptr && gid != nullptr && valid_port(port_num) && index >= 0
                     ? gid_at(identity_of(context), static_cast<std::uint64_t>(index))
                     : nullptr;
  if (g == nullptr) {
    errno = EINVAL;
    return -1;
  }
  std::memcpy(gid->raw, g->data(), sizeof gid->raw);
  return 0;
}

// ibv_query_gid_ex: errno values; an empty slot is ENODATA (test_query_gid_ex_bad_flow).
SRDMA_EXPORT int _ibv_query_gid_ex(ibv_context* context, std::uint32_t port_num, std::uint32_t gid_index,
                                   ibv_gid_entry* entry, std::uint32_t flags, std::size_t entry_size) {
  SRDMA_FORWARD_IF_SYSTEM(context, _ibv_query_gid_ex, context, port_num, gid_index, entry, flags, entry_size);
  if (context == nullptr || entry == nullptr || flags != 0 || entry_size < sizeof(ibv_gid_entry) ||
      !valid_port(port_num))
    return EINVAL;
  const DeviceIdentity& id = identity_of(context);
  const Gid* g = gid_at(id, gid_index);
  if (g == nullptr) return EINVAL;
  if (is_empty(*g)) return ENODATA;
  copy_out(entry, entry_size, gid_entry(id, gid_index));
  return 0;
}

// Every populated entry, `entry_size` bytes apart; -EINVAL when they do not all fit
// (test_query_gid_table_bad_flow passes 0).
SRDMA_EXPORT ssize_t _ibv_query_gid_table(ibv_context* context, ibv_gid_entry* entries, std::size_t max_entries,
                                          std::uint32_t flags, std::size_t entry_size) {
  SRDMA_FORWARD_IF_SYSTEM(context, _ibv_query_gid_table, context, entries, max_entries, flags, entry_size);
  if (context == nullptr || flags != 0 || entry_size < sizeof(ibv_gid_entry)) return -EINVAL;
  const DeviceIdentity& id = identity_of(context);
  std::size_t populated = 0;
  for (std::uint32_t i = 0; i < id.gids.size(); ++i) populated += in_use(id, i) ? 1 : 0;
  if (max_entries < populated || (populated != 0 && entries == nullptr)) return -EINVAL;
  auto* out = reinterpret_cast<unsigned char*>(entries);
  std::size_t written = 0;
  for (std::uint32_t i = 0; i < id.gids.size(); ++i) {
    if (!in_use(id, i)) continue;
    copy_out(out + written * entry_size, entry_size, gid_entry(id, i));
    ++written;
  }
  return static_cast<ssize_t>(written);
}

// PRIVATE_34, but ibv_devinfo and pyverbs import it to print "RoCE v2" (verbs-abi.md §8.12).
SRDMA_EXPORT int ibv_query_gid_type(ibv_context* context, std::uint8_t port_num, unsigned int index,
                                    ibv_gid_type_sysfs* type) {
  SRDMA_FORWARD_IF_SYSTEM(context, ibv_query_gid_type, context, port_num, index, type);
  const Gid* g =
      context != nullptr && type != nullptr && valid_port(port_num) ? gid_at(identity_of(context), index) : nullptr;
  if (g == nullptr || is_empty(*g)) {
    errno = EINVAL;
    return -1;
  }
  *type = is_iwarp(identity_of(context)) ? IBV_GID_TYPE_SYSFS_IB_ROCE_V1 : IBV_GID_TYPE_SYSFS_ROCE_V2;
  return 0;
}

// One P_Key, the default full-membership 0xffff: RoCE has no partitions to manage.
SRDMA_DEFAULT_VERSION(ibv_query_pkey, "IBVERBS_1.1")
int srdma_default_ibv_query_pkey(ibv_context* context, std::uint8_t port_num, int index, __be16* pkey) {
  SRDMA_FORWARD_IF_SYSTEM(context, ibv_query_pkey, context, port_num, index, pkey);
  if (context == nullptr || pkey == nullptr || !valid_port(port_num) || index != 0) {
    errno = EINVAL;
    return -1;
  }
  *pkey = htobe16(kDefaultPkey);
  return 0;
}

SRDMA_EXPORT int ibv_get_pkey_index(ibv_context* context, std::uint8_t port_num, __be16 pkey) {
  SRDMA_FORWARD_IF_SYSTEM(context, ibv_get_pkey_index, context, port_num, pkey);
  if (context == nullptr || !valid_port(port_num) || pkey != htobe16(kDefaultPkey)) {
    errno = EINVAL;
    return -1;
  }
  return 0;
}
