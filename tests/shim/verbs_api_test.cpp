// The shim's C API, called the way a program compiled against rdma-core 44's verbs.h calls
// it: this executable links softrdma's libibverbs.so.1 (ctest runs it with SOFTRDMA_IP
// unset, so the device takes the first free 127.0.0.N), and the inline wrappers of verbs.h
// run for real.
#include "verbs-shim/verbs_api.hpp"

#include <arpa/inet.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <poll.h>
#include <time.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <catch2/catch.hpp>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <utility>

#include "verbs-shim/identity.hpp"

namespace {

// The device must take the first free 127.0.0.N and sysfs be the real /sys, whatever the
// environment says: cleared before main(), and so before the library reads it (at the first
// ibv_get_device_list).
[[maybe_unused]] const bool environment_cleared = [] {
  for (const char* name : {"SOFTRDMA_IP", "SOFTRDMA_NETDEV", "SYSFS_PATH"}) ::unsetenv(name);
  return true;
}();

// Restores verbs.h's wrapper for this file's callers: the shim header #undefs it.
int query_port_inline(ibv_context* ctx, std::uint8_t port, ibv_port_attr* attr) {
  return ___ibv_query_port(ctx, port, attr);
}

struct Device {
  ibv_device** list = nullptr;
  ibv_context* ctx = nullptr;
  Device() {
    int n = 0;
    list = ibv_get_device_list(&n);
    REQUIRE(list != nullptr);
    REQUIRE(n == 1);
    ctx = ibv_open_device(list[0]);
    REQUIRE(ctx != nullptr);
  }
  ~Device() {
    if (ctx != nullptr) ibv_close_device(ctx);
    ibv_free_device_list(list);
  }
};

// A device with a PD and a 4-entry CQ, freed in order (the test destroys its QPs first).
struct DeviceWithPdCq : Device {
  ibv_pd* pd = ibv_alloc_pd(ctx);
  ibv_cq* cq = ibv_create_cq(ctx, 4, nullptr, nullptr, 0);
  DeviceWithPdCq() { REQUIRE((pd != nullptr && cq != nullptr)); }
  ~DeviceWithPdCq() {
    CHECK(ibv_destroy_cq(cq) == 0);
    CHECK(ibv_dealloc_pd(pd) == 0);
  }
};

bool readable(int fd) {
  pollfd p{fd, POLLIN, 0};
  return ::poll(&p, 1, 0) == 1;
}

void set_nonblocking(int fd) { ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK); }

// The N of the 127.0.0.N this process's device bound: 1 unless another test's device holds
// .1 (ctest runs tests in parallel). GID 0 says which.
std::uint8_t bound_n() {
  static const std::uint8_t n = [] {
    int count = 0;
    ibv_device** list = ibv_get_device_list(&count);
    REQUIRE(list != nullptr);
    ibv_context* ctx = ibv_open_device(list[0]);
    REQUIRE(ctx != nullptr);
    ibv_gid gid{};
    REQUIRE(ibv_query_gid(ctx, 1, 0, &gid) == 0);
    ibv_close_device(ctx);
    ibv_free_device_list(list);
    const std::uint8_t prefix[15] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 127, 0, 0};
    REQUIRE(std::memcmp(gid.raw, prefix, sizeof prefix) == 0);
    return gid.raw[15];
  }();
  return n;
}

// GID 0: ::ffff:127.0.0.N; the node GUID: the EUI-64 of 02:00:7f:00:00:NN.
std::array<std::uint8_t, 16> loopback_gid() { return {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 127, 0, 0, bound_n()}; }
std::uint64_t loopback_guid() { return 0x02007ffffe000000ull | bound_n(); }

}  // namespace

TEST_CASE("one device, srdma0, with a GUID from its address", "[shim]") {
  int n = -1;
  ibv_device** list = ibv_get_device_list(&n);
  REQUIRE(list != nullptr);
  REQUIRE(n == 1);
  CHECK(list[1] == nullptr);
  CHECK(std::string(ibv_get_device_name(list[0])) == "srdma0");
  CHECK(list[0]->node_type == IBV_NODE_CA);
  CHECK(list[0]->transport_type == IBV_TRANSPORT_IB);
  CHECK(be64toh(ibv_get_device_guid(list[0])) == loopback_guid());
  CHECK(ibv_get_device_index(list[0]) == 0);
  ibv_free_device_list(list);
}

TEST_CASE("a context is a real verbs_context with pollable descriptors", "[shim]") {
  Device d;
  ibv_context* ctx = d.ctx;
  CHECK(ctx->device == d.list[0]);
  CHECK(ctx->abi_compat == __VERBS_ABI_IS_EXTENDED);
  verbs_context* vctx = verbs_get_ctx(ctx);
  REQUIRE(vctx != nullptr);
  CHECK(vctx->sz == sizeof(verbs_context));
  CHECK(vctx->query_port != nullptr);
  CHECK(vctx->query_device_ex != nullptr);
  CHECK(vctx->close_xrcd != nullptr);  // called without a NULL check by ibv_close_xrcd
  CHECK(ctx->num_comp_vectors == 1);
  CHECK(ctx->cmd_fd >= 0);
  CHECK(ctx->async_fd >= 0);
  CHECK(ctx->cmd_fd != ctx->async_fd);
  // The data-path slots verbs.h calls with no NULL check.
  CHECK(ctx->ops.poll_cq != nullptr);
  CHECK(ctx->ops.req_notify_cq != nullptr);
  CHECK(ctx->ops.post_send != nullptr);
  CHECK(ctx->ops.post_recv != nullptr);
  CHECK(ctx->ops.post_srq_recv != nullptr);
  CHECK(ctx->ops.bind_mw != nullptr);
  CHECK(ctx->ops.dealloc_mw != nullptr);

  // No async event is pending; a non-blocking read says so instead of blocking.
  CHECK_FALSE(readable(ctx->async_fd));
  set_nonblocking(ctx->async_fd);
  ibv_async_event ev{};
  errno = 0;
  CHECK(ibv_get_async_event(ctx, &ev) == -1);
  CHECK(errno == EAGAIN);
}

TEST_CASE("opening something that is not our device fails", "[shim]") {
  ibv_device other{};
  errno = 0;
  CHECK(ibv_open_device(&other) == nullptr);
  CHECK(errno == ENODEV);
}

TEST_CASE("query_device and query_device_ex report the engine's limits", "[shim]") {
  Device d;
  ibv_device_attr a{};
  REQUIRE(ibv_query_device(d.ctx, &a) == 0);
  CHECK(std::string(a.fw_ver) == "softrdma 0.1.0");
  CHECK(be64toh(a.node_guid) == loopback_guid());
  CHECK(a.sys_image_guid == a.node_guid);
  CHECK(a.vendor_id != 0);       // rdma-core's test_query_device insists
  CHECK(a.vendor_id != 0x02c9);  // Mellanox
  CHECK(a.vendor_id != 0x1d0f);  // Amazon
  CHECK(a.max_qp == 4096);
  CHECK(a.max_qp_wr == 16384);
  CHECK(a.max_sge == 32);
  CHECK(a.max_cq == 4096);
  CHECK(a.max_cqe == (1 << 20));
  CHECK(a.max_mr == 65536);
  CHECK(a.max_mw == 65536);  // the same table of keys as the MRs
  CHECK((a.device_cap_flags & IBV_DEVICE_MEM_WINDOW) != 0);
  CHECK((a.device_cap_flags & IBV_DEVICE_MEM_WINDOW_TYPE_2B) != 0);
  CHECK(a.max_pd == 4096);
  CHECK(a.max_qp_rd_atom == 128);  // as rxe and siw
  CHECK(a.max_qp_init_rd_atom == 128);
  CHECK(a.atomic_cap == IBV_ATOMIC_HCA);
  CHECK(a.max_srq == 1024);
  CHECK(a.max_srq_wr == 16384);
  CHECK(a.max_pkeys == 1);
  CHECK(a.phys_port_cnt == 1);
  CHECK(a.max_mcast_grp == 64);  // the engine's MulticastLimits: the udp backend joins groups
  CHECK(a.max_mcast_qp_attach == 64);
  CHECK(a.max_total_mcast_qp_attach == 64 * 64);

  ibv_device_attr_ex ax{};
  REQUIRE(ibv_query_device_ex(d.ctx, nullptr, &ax) == 0);  // the inline path, through vctx
  CHECK(ax.orig_attr.max_qp == a.max_qp);
  CHECK(ax.phys_port_cnt_ex == 1);

  ibv_query_device_ex_input input{};
  input.comp_mask = 1;
  CHECK(ibv_query_device_ex(d.ctx, &input, &ax) == EINVAL);

  // A caller with an older, shorter struct gets exactly the bytes it asked for.
  unsigned char buf[sizeof(ibv_device_attr_ex) + 8];
  std::memset(buf, 0xab, sizeof buf);
  const std::size_t shorter = offsetof(ibv_device_attr_ex, phys_port_cnt_ex);
  REQUIRE(verbs_get_ctx(d.ctx)->query_device_ex(d.ctx, nullptr, reinterpret_cast<ibv_device_attr_ex*>(buf), shorter) ==
          0);
  CHECK(buf[shorter] == 0xab);
  CHECK(verbs_get_ctx(d.ctx)->query_device_ex(d.ctx, nullptr, reinterpret_cast<ibv_device_attr_ex*>(buf), 8) == EINVAL);
}

TEST_CASE("query_port: an active RoCE port, at both entry points and sizes", "[shim]") {
  Device d;
  ibv_port_attr p{};
  REQUIRE(query_port_inline(d.ctx, 1, &p) == 0);  // vctx->query_port(..., 52)
  CHECK(p.state == IBV_PORT_ACTIVE);
  CHECK(p.link_layer == IBV_LINK_LAYER_ETHERNET);
  CHECK(p.max_mtu == IBV_MTU_4096);
  CHECK((p.active_mtu == IBV_MTU_1024 || p.active_mtu == IBV_MTU_4096));
  CHECK(p.gid_tbl_len == 16);
  CHECK(p.pkey_tbl_len == 1);
  CHECK((p.port_cap_flags & IBV_PORT_IP_BASED_GIDS) != 0);
  CHECK(p.phys_state == 5);
  CHECK(p.max_msg_sz > 0x1000);

  // The exported function takes the 48-byte compat struct and must not write past it.
  unsigned char buf[sizeof(ibv_port_attr)];
  std::memset(buf, 0xab, sizeof buf);
  REQUIRE((ibv_query_port)(d.ctx, 1, reinterpret_cast<_compat_ibv_port_attr*>(buf)) == 0);
  for (std::size_t i = offsetof(ibv_port_attr, port_cap_flags2); i < sizeof buf; ++i) CHECK(buf[i] == 0xab);
  ibv_port_attr compat;
  std::memcpy(&compat, buf, sizeof compat);
  CHECK(compat.state == IBV_PORT_ACTIVE);
  CHECK(compat.gid_tbl_len == 16);

  // A port that does not exist: EINVAL (rdma-core's test_query_port_bad_flow).
  CHECK(query_port_inline(d.ctx, 2, &p) == EINVAL);
  CHECK((ibv_query_port)(d.ctx, 0, reinterpret_cast<_compat_ibv_port_attr*>(buf)) == EINVAL);
}

TEST_CASE("GID table: index 0 is the RoCEv2 GID of the bound 127.0.0.N", "[shim]") {
  Device d;
  ibv_gid gid;
  REQUIRE(ibv_query_gid(d.ctx, 1, 0, &gid) == 0);
  CHECK(std::memcmp(gid.raw, loopback_gid().data(), 16) == 0);
  REQUIRE(ibv_query_gid(d.ctx, 1, 5, &gid) == 0);  // an empty slot reads as zeros
  CHECK(gid.global.subnet_prefix == 0);
  CHECK(gid.global.interface_id == 0);
  CHECK(ibv_query_gid(d.ctx, 1, 16, &gid) == -1);
  CHECK(ibv_query_gid(d.ctx, 2, 0, &gid) == -1);

  ibv_gid_entry e{};
  REQUIRE(ibv_query_gid_ex(d.ctx, 1, 0, &e, 0) == 0);
  CHECK(std::memcmp(e.gid.raw, loopback_gid().data(), 16) == 0);
  CHECK(e.gid_type == IBV_GID_TYPE_ROCE_V2);
  CHECK(e.port_num == 1);
  auto lo = softrdma::shim::find_interface(softrdma::shim::kDefaultAddress);
  CHECK(e.ndev_ifindex == static_cast<std::uint32_t>(lo ? lo->index : 0));  // lo, normally
  CHECK(ibv_query_gid_ex(d.ctx, 1, 1, &e, 0) == ENODATA);                   // test_query_gid_ex_bad_flow
  CHECK(ibv_query_gid_ex(d.ctx, 1, 0, &e, 1) == EINVAL);
  CHECK(ibv_query_gid_ex(d.ctx, 1, 16, &e, 0) == EINVAL);

  ibv_gid_entry table[16];
  CHECK(ibv_query_gid_table(d.ctx, table, 16, 0) == 1);
  CHECK(table[0].gid_index == 0);
  CHECK(ibv_query_gid_table(d.ctx, table, 0, 0) == -EINVAL);  // test_query_gid_table_bad_flow

  ibv_gid_type_sysfs type = IBV_GID_TYPE_SYSFS_IB_ROCE_V1;
  CHECK(ibv_query_gid_type(d.ctx, 1, 0, &type) == 0);
  CHECK(type == IBV_GID_TYPE_SYSFS_ROCE_V2);
  CHECK(ibv_query_gid_type(d.ctx, 1, 1, &type) == -1);
}

TEST_CASE("P_Key table: the single default key", "[shim]") {
  Device d;
  __be16 pkey = 0;
  REQUIRE(ibv_query_pkey(d.ctx, 1, 0, &pkey) == 0);
  CHECK(be16toh(pkey) == 0xffff);
  CHECK(ibv_query_pkey(d.ctx, 1, 1, &pkey) == -1);
  CHECK(ibv_get_pkey_index(d.ctx, 1, htobe16(0xffff)) == 0);
  CHECK(ibv_get_pkey_index(d.ctx, 1, htobe16(0x8001)) == -1);
}

TEST_CASE("completion channels are pollable and honour O_NONBLOCK", "[shim]") {
  Device d;
  ibv_comp_channel* ch = ibv_create_comp_channel(d.ctx);
  REQUIRE(ch != nullptr);
  CHECK(ch->context == d.ctx);
  CHECK(ch->fd >= 0);
  CHECK_FALSE(readable(ch->fd));
  set_nonblocking(ch->fd);
  ibv_cq* cq = nullptr;
  void* cq_context = nullptr;
  errno = 0;
  CHECK(ibv_get_cq_event(ch, &cq, &cq_context) == -1);
  CHECK(errno == EAGAIN);
  ch->refcnt = 1;  // as if a CQ used it
  CHECK(ibv_destroy_comp_channel(ch) == EBUSY);
  ch->refcnt = 0;
  CHECK(ibv_destroy_comp_channel(ch) == 0);
}

TEST_CASE("features the device lacks fail with EOPNOTSUPP, through every path", "[shim]") {
  Device d;
  ibv_pd* pd = ibv_alloc_pd(d.ctx);
  REQUIRE(pd != nullptr);
  ibv_cq* cq = ibv_create_cq(d.ctx, 16, nullptr, nullptr, 0);
  REQUIRE(cq != nullptr);

  // Exported verbs.
  errno = 0;
  CHECK(ibv_reg_dmabuf_mr(pd, 0, 4096, 0, 3, IBV_ACCESS_LOCAL_WRITE) == nullptr);
  CHECK(errno == EOPNOTSUPP);
  errno = 0;
  CHECK(ibv_import_pd(d.ctx, 1) == nullptr);
  CHECK(errno == EOPNOTSUPP);
  ibv_qp_init_attr raw{};
  raw.send_cq = raw.recv_cq = cq;
  raw.qp_type = IBV_QPT_RAW_PACKET;
  raw.cap.max_send_wr = 1;
  errno = 0;
  CHECK(ibv_create_qp(pd, &raw) == nullptr);
  CHECK(errno == EOPNOTSUPP);

  // Inline verbs whose verbs_context op is NULL: verbs.h itself answers EOPNOTSUPP.
  ibv_alloc_dm_attr dm_attr{};
  dm_attr.length = 64;
  errno = 0;
  CHECK(ibv_alloc_dm(d.ctx, &dm_attr) == nullptr);
  CHECK(errno == EOPNOTSUPP);
  ibv_td_init_attr td_attr{};
  errno = 0;
  CHECK(ibv_alloc_td(d.ctx, &td_attr) == nullptr);
  CHECK(errno == EOPNOTSUPP);

  // Extended verbs the shim has, asked for what the device lacks.
  ibv_cq_init_attr_ex cq_attr{};
  cq_attr.cqe = 16;
  cq_attr.wc_flags = IBV_WC_EX_WITH_CVLAN;
  errno = 0;
  CHECK(ibv_create_cq_ex(d.ctx, &cq_attr) == nullptr);
  CHECK(errno == EOPNOTSUPP);
  ibv_qp_init_attr_ex qp_attr{};
  qp_attr.send_cq = qp_attr.recv_cq = cq;
  qp_attr.qp_type = IBV_QPT_RC;
  qp_attr.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
  qp_attr.pd = pd;
  qp_attr.send_ops_flags = IBV_QP_EX_WITH_TSO;
  errno = 0;
  CHECK(ibv_create_qp_ex(d.ctx, &qp_attr) == nullptr);
  CHECK(errno == EOPNOTSUPP);

  CHECK(ibv_destroy_cq(cq) == 0);
  CHECK(ibv_dealloc_pd(pd) == 0);
}

// XRC domains through verbs.h's inline wrappers, with uverbs' errno values: one per file inode
// (O_EXCL refuses an open one, a new one needs O_CREAT), busy while an XRC SRQ or target is in
// it; an XRC target opened again outlives its creator.
TEST_CASE("XRC: domains shared by file, XRC SRQs with numbers, targets opened again", "[shim][xrc]") {
  DeviceWithPdCq d;
  ibv_device_attr attr{};
  REQUIRE(ibv_query_device(d.ctx, &attr) == 0);
  CHECK((attr.device_cap_flags & IBV_DEVICE_XRC) != 0);
  char path[] = "/tmp/softrdma_xrcd_XXXXXX";
  const int fd = ::mkstemp(path);
  REQUIRE(fd >= 0);
  ::unlink(path);
  ibv_xrcd_init_attr xa{};
  xa.comp_mask = IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS;
  xa.fd = fd;
  xa.oflags = 0;
  errno = 0;
  CHECK(ibv_open_xrcd(d.ctx, &xa) == nullptr);
  CHECK(errno == EAGAIN);  // no domain for the file yet, and no O_CREAT
  xa.oflags = O_CREAT;
  ibv_xrcd* first = ibv_open_xrcd(d.ctx, &xa);
  REQUIRE(first != nullptr);
  ibv_xrcd* second = ibv_open_xrcd(d.ctx, &xa);
  REQUIRE(second != nullptr);
  xa.oflags = O_CREAT | O_EXCL;
  errno = 0;
  CHECK(ibv_open_xrcd(d.ctx, &xa) == nullptr);
  CHECK(errno == EINVAL);

  ibv_srq_init_attr_ex sa{};
  sa.comp_mask = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD | IBV_SRQ_INIT_ATTR_XRCD | IBV_SRQ_INIT_ATTR_CQ;
  sa.srq_type = IBV_SRQT_XRC;
  sa.pd = d.pd;
  sa.xrcd = second;  // the same domain as `first`
  sa.cq = d.cq;
  sa.attr.max_wr = 4;
  sa.attr.max_sge = 1;
  ibv_srq* srq = ibv_create_srq_ex(d.ctx, &sa);
  REQUIRE(srq != nullptr);
  std::uint32_t srqn = 0;
  CHECK(ibv_get_srq_num(srq, &srqn) == 0);
  CHECK(srqn != 0);

  ibv_qp_init_attr_ex qa{};
  qa.qp_type = IBV_QPT_XRC_RECV;
  qa.comp_mask = IBV_QP_INIT_ATTR_XRCD;
  qa.xrcd = first;
  ibv_qp* target = ibv_create_qp_ex(d.ctx, &qa);
  REQUIRE(target != nullptr);
  ibv_qp_open_attr oa{};
  oa.comp_mask = IBV_QP_OPEN_ATTR_NUM | IBV_QP_OPEN_ATTR_XRCD | IBV_QP_OPEN_ATTR_TYPE;
  oa.qp_num = target->qp_num;
  oa.xrcd = second;
  oa.qp_type = IBV_QPT_XRC_RECV;
  ibv_qp* opened = ibv_open_qp(d.ctx, &oa);
  REQUIRE(opened != nullptr);
  CHECK(opened->qp_num == target->qp_num);
  ibv_recv_wr rw{};
  ibv_recv_wr* bad = nullptr;
  CHECK(ibv_post_recv(target, &rw, &bad) == EINVAL);  // a target has no receive queue

  qa = {};
  qa.qp_type = IBV_QPT_XRC_SEND;
  qa.comp_mask = IBV_QP_INIT_ATTR_PD;
  qa.pd = d.pd;
  qa.send_cq = d.cq;
  qa.cap.max_send_wr = 1;
  ibv_qp* initiator = ibv_create_qp_ex(d.ctx, &qa);
  REQUIRE(initiator != nullptr);
  CHECK(qa.cap.max_recv_wr == 0);

  CHECK(ibv_close_xrcd(first) == 0);  // one of two opens: the domain stays
  CHECK(ibv_destroy_qp(target) == 0);
  CHECK(ibv_close_xrcd(second) == EBUSY);  // the opened target and the XRC SRQ are in it
  CHECK(ibv_destroy_qp(opened) == 0);
  CHECK(ibv_destroy_srq(srq) == 0);
  CHECK(ibv_close_xrcd(second) == 0);
  CHECK(ibv_destroy_qp(initiator) == 0);
  ::close(fd);
}

// Tag matching (rdma-core's Documentation/tag_matching.md) through verbs.h's inline wrappers:
// the caps, a TM-SRQ's creation rules, list operations and their completions on the SRQ's CQ.
TEST_CASE("tag matching: caps, TM-SRQs and list operations completing on the SRQ's extended CQ", "[shim][tm]") {
  Device d;
  ibv_device_attr_ex ax{};
  REQUIRE(ibv_query_device_ex(d.ctx, nullptr, &ax) == 0);
  CHECK(ax.tm_caps.flags == IBV_TM_CAP_RC);
  CHECK(ax.tm_caps.max_num_tags == 1023);
  CHECK(ax.tm_caps.max_ops == 1024);
  CHECK(ax.tm_caps.max_sge == 32);
  CHECK(ax.tm_caps.max_rndv_hdr_size == 64);
  ibv_pd* pd = ibv_alloc_pd(d.ctx);
  REQUIRE(pd != nullptr);
  ibv_cq_init_attr_ex ca{};
  ca.cqe = 16;
  ca.wc_flags = std::uint64_t{IBV_WC_STANDARD_FLAGS} | IBV_WC_EX_WITH_TM_INFO;
  ibv_cq_ex* cq = ibv_create_cq_ex(d.ctx, &ca);
  REQUIRE(cq != nullptr);
  CHECK(cq->read_tm_info != nullptr);
  std::array<std::uint8_t, 256> buffer{};
  ibv_mr* mr = ibv_reg_mr(pd, buffer.data(), buffer.size(), IBV_ACCESS_LOCAL_WRITE);
  REQUIRE(mr != nullptr);

  ibv_srq_init_attr_ex sa{};
  sa.comp_mask = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD | IBV_SRQ_INIT_ATTR_TM;  // no CQ
  sa.srq_type = IBV_SRQT_TM;
  sa.pd = pd;
  sa.attr.max_wr = 4;
  sa.attr.max_sge = 1;
  sa.tm_cap.max_num_tags = 4;
  sa.tm_cap.max_ops = 4;
  auto refused = [&](std::uint32_t tags, std::uint32_t ops) {
    sa.tm_cap.max_num_tags = tags;
    sa.tm_cap.max_ops = ops;
    errno = 0;
    return ibv_create_srq_ex(d.ctx, &sa) == nullptr && errno == EINVAL;
  };
  CHECK(refused(4, 4));
  sa.comp_mask |= IBV_SRQ_INIT_ATTR_CQ;
  sa.cq = ibv_cq_ex_to_cq(cq);
  CHECK(refused(0, 4));
  CHECK(refused(ax.tm_caps.max_num_tags + 1, 4));
  CHECK(refused(4, ax.tm_caps.max_ops + 1));
  sa.tm_cap.max_num_tags = 4;
  sa.tm_cap.max_ops = 4;
  ibv_srq* srq = ibv_create_srq_ex(d.ctx, &sa);
  REQUIRE(srq != nullptr);

  // An ADD gives back its entry's handle; an opcode that is not one stops the chain there.
  ibv_sge sge{reinterpret_cast<std::uintptr_t>(buffer.data()), 64, mr->lkey};
  ibv_ops_wr add{};
  add.wr_id = 1;
  add.opcode = IBV_WR_TAG_ADD;
  add.flags = IBV_OPS_SIGNALED;
  add.tm.add.recv_wr_id = 100;
  add.tm.add.sg_list = &sge;
  add.tm.add.num_sge = 1;
  add.tm.add.tag = 0x1234;
  add.tm.add.mask = 0xffff;
  add.tm.handle = 0xdead;
  ibv_ops_wr bogus{};
  bogus.opcode = static_cast<ibv_ops_wr_opcode>(3);  // within the enum's range, but no operation
  add.next = &bogus;
  ibv_ops_wr* bad = nullptr;
  CHECK(ibv_post_srq_ops(srq, &add, &bad) == EINVAL);
  CHECK(bad == &bogus);
  CHECK(add.tm.handle != 0xdead);

  // Deleting the entry twice: the second finds it gone (IBV_WC_TM_ERR, ibv_post_srq_ops(3)).
  ibv_ops_wr del{};
  del.wr_id = 2;
  del.opcode = IBV_WR_TAG_DEL;
  del.flags = IBV_OPS_SIGNALED;
  del.tm.handle = add.tm.handle;
  ibv_ops_wr del_again = del;
  del_again.wr_id = 3;
  del.next = &del_again;
  REQUIRE(ibv_post_srq_ops(srq, &del, &bad) == 0);
  ibv_poll_cq_attr pa{};
  REQUIRE(ibv_start_poll(cq, &pa) == 0);
  const std::array<std::pair<std::uint64_t, ibv_wc_opcode>, 3> expected{
      {{1, IBV_WC_TM_ADD}, {2, IBV_WC_TM_DEL}, {3, IBV_WC_TM_DEL}}};
  for (std::size_t i = 0; i < expected.size(); ++i) {
    if (i > 0) REQUIRE(ibv_next_poll(cq) == 0);
    CHECK(cq->wr_id == expected[i].first);
    CHECK(ibv_wc_read_opcode(cq) == expected[i].second);
    CHECK(cq->status == (i == 2 ? IBV_WC_TM_ERR : IBV_WC_SUCCESS));
    ibv_wc_tm_info info{};
    ibv_wc_read_tm_info(cq, &info);
    CHECK(info.tag == 0);  // only a matched receive carries a tag
  }
  CHECK(ibv_next_poll(cq) == ENOENT);
  ibv_end_poll(cq);
  CHECK(std::string(ibv_wc_status_str(IBV_WC_TM_ERR)) == "TM error");

  // List operations belong to TM-SRQs only.
  ibv_srq_init_attr basic{};
  basic.attr.max_wr = 4;
  basic.attr.max_sge = 1;
  ibv_srq* plain = ibv_create_srq(pd, &basic);
  REQUIRE(plain != nullptr);
  ibv_ops_wr sync{};
  sync.opcode = IBV_WR_TAG_SYNC;
  CHECK(ibv_post_srq_ops(plain, &sync, &bad) == EINVAL);
  CHECK(bad == &sync);

  CHECK(ibv_destroy_srq(plain) == 0);
  CHECK(ibv_destroy_srq(srq) == 0);
  CHECK(ibv_dereg_mr(mr) == 0);
  CHECK(ibv_destroy_cq(ibv_cq_ex_to_cq(cq)) == 0);
  CHECK(ibv_dealloc_pd(pd) == 0);
}

TEST_CASE("completion timestamps: a 1 GHz core clock on CLOCK_MONOTONIC, readable in cycles and wall-clock ns",
          "[shim]") {
  Device d;
  ibv_device_attr_ex ax{};
  REQUIRE(ibv_query_device_ex(d.ctx, nullptr, &ax) == 0);
  CHECK(ax.hca_core_clock == 1'000'000);  // kHz
  CHECK(ax.completion_timestamp_mask == ~std::uint64_t{0});

  timespec before{}, after{};
  ibv_values_ex values{};
  values.comp_mask = IBV_VALUES_MASK_RAW_CLOCK;
  clock_gettime(CLOCK_MONOTONIC, &before);
  REQUIRE(ibv_query_rt_values_ex(d.ctx, &values) == 0);
  clock_gettime(CLOCK_MONOTONIC, &after);
  const auto ns = [](const timespec& t) { return std::uint64_t(t.tv_sec) * 1'000'000'000 + std::uint64_t(t.tv_nsec); };
  CHECK(values.comp_mask == IBV_VALUES_MASK_RAW_CLOCK);
  CHECK(values.raw_clock.tv_sec == 0);
  CHECK(std::uint64_t(values.raw_clock.tv_nsec) >= ns(before));
  CHECK(std::uint64_t(values.raw_clock.tv_nsec) <= ns(after));

  ibv_cq_init_attr_ex cq_attr{};
  cq_attr.cqe = 4;
  cq_attr.wc_flags = IBV_WC_EX_WITH_COMPLETION_TIMESTAMP | IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK;
  ibv_cq_ex* cq = ibv_create_cq_ex(d.ctx, &cq_attr);
  REQUIRE(cq != nullptr);
  CHECK(cq->read_completion_ts != nullptr);
  CHECK(cq->read_completion_wallclock_ns != nullptr);
  CHECK(ibv_destroy_cq(ibv_cq_ex_to_cq(cq)) == 0);
}

TEST_CASE("ATOMIC WRITE: an RC QP's extended send API offers it, the device says so, ibv_post_send refuses it",
          "[shim]") {
  DeviceWithPdCq d;
  ibv_device_attr_ex ax{};
  REQUIRE(ibv_query_device_ex(d.ctx, nullptr, &ax) == 0);
  CHECK((ax.device_cap_flags_ex & (1ULL << 40)) != 0);  // IB_UVERBS_DEVICE_ATOMIC_WRITE
  ibv_qp_init_attr_ex attr{};
  attr.send_cq = attr.recv_cq = d.cq;
  attr.cap = {1, 1, 1, 1, 0};
  attr.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
  attr.pd = d.pd;
  attr.send_ops_flags = IBV_QP_EX_WITH_ATOMIC_WRITE;
  attr.qp_type = IBV_QPT_UD;
  errno = 0;
  CHECK(ibv_create_qp_ex(d.ctx, &attr) == nullptr);
  CHECK(errno == EOPNOTSUPP);
  attr.qp_type = IBV_QPT_RC;
  ibv_qp* qp = ibv_create_qp_ex(d.ctx, &attr);
  REQUIRE(qp != nullptr);
  REQUIRE(ibv_qp_to_qp_ex(qp) != nullptr);

  // ibv_send_wr has no field for the 8 bytes: only ibv_wr_atomic_write carries them.
  ibv_send_wr wr{};
  wr.opcode = IBV_WR_ATOMIC_WRITE;
  ibv_send_wr* bad = nullptr;
  CHECK(ibv_post_send(qp, &wr, &bad) == EINVAL);
  CHECK(bad == &wr);
  CHECK(ibv_destroy_qp(qp) == 0);
}

TEST_CASE("ibv_attach_mcast and ibv_detach_mcast: UD QPs and multicast GIDs, errno values as the kernel's", "[shim]") {
  DeviceWithPdCq d;
  ibv_qp_init_attr init{};
  init.send_cq = init.recv_cq = d.cq;
  init.cap = {1, 1, 1, 1, 0};
  init.qp_type = IBV_QPT_UD;
  ibv_qp* ud = ibv_create_qp(d.pd, &init);
  init.qp_type = IBV_QPT_RC;
  ibv_qp* rc = ibv_create_qp(d.pd, &init);
  REQUIRE((ud != nullptr && rc != nullptr));
  ibv_gid group{}, unicast{};
  REQUIRE(::inet_pton(AF_INET6, "::ffff:239.77.40.61", group.raw) == 1);
  REQUIRE(::inet_pton(AF_INET6, "::ffff:127.0.0.1", unicast.raw) == 1);

  CHECK(ibv_attach_mcast(rc, &group, 0) == EINVAL);
  CHECK(ibv_attach_mcast(ud, &unicast, 0) == EINVAL);
  CHECK(ibv_attach_mcast(ud, &group, 0) == 0);
  CHECK(ibv_attach_mcast(ud, &group, 0) == 0);  // twice: one attachment (the LID is RoCE's 0, ignored)
  CHECK(ibv_detach_mcast(ud, &group, 0) == 0);
  CHECK(ibv_detach_mcast(ud, &group, 0) == EINVAL);
  CHECK(ibv_attach_mcast(ud, &group, 0) == 0);
  CHECK(ibv_destroy_qp(ud) == 0);  // leaves the group with the QP
  CHECK(ibv_destroy_qp(rc) == 0);
}

TEST_CASE("compat versions exist and fail cleanly", "[shim]") {
  // A binary linked against libibverbs 1.0 binds name@IBVERBS_1.0: a separate function.
  void* v10 = dlvsym(RTLD_DEFAULT, "ibv_get_device_list", "IBVERBS_1.0");
  void* v11 = dlvsym(RTLD_DEFAULT, "ibv_get_device_list", "IBVERBS_1.1");
  REQUIRE(v10 != nullptr);
  REQUIRE(v11 != nullptr);
  CHECK(v10 != v11);
  CHECK(v11 == reinterpret_cast<void*>(&ibv_get_device_list));  // new links get @@IBVERBS_1.1
  using Fn = void* (*)(int*);
  int n = 0;
  errno = 0;
  CHECK(reinterpret_cast<Fn>(v10)(&n) == nullptr);
  CHECK(errno == EOPNOTSUPP);
  // Provider registration at load time must be harmless.
  auto reg =
      reinterpret_cast<void (*)(const void*)>(dlvsym(RTLD_DEFAULT, "verbs_register_driver_34", "IBVERBS_PRIVATE_34"));
  REQUIRE(reg != nullptr);
  reg(nullptr);
  CHECK(dlvsym(RTLD_DEFAULT, "verbs_allow_disassociate_destroy", "IBVERBS_PRIVATE_34") != nullptr);
}

// Out-of-table values stay inside each enum's range of values (its bit width): converting a
// value beyond it is undefined in C++, though a C caller may pass one.
TEST_CASE("string helpers print rdma-core's texts", "[shim]") {
  CHECK(std::string(ibv_port_state_str(IBV_PORT_ACTIVE)) == "PORT_ACTIVE");
  CHECK(std::string(ibv_port_state_str(static_cast<ibv_port_state>(7))) == "unknown");
  CHECK(std::string(ibv_node_type_str(IBV_NODE_CA)) == "InfiniBand channel adapter");
  CHECK(std::string(ibv_node_type_str(IBV_NODE_UNKNOWN)) == "unknown");
  CHECK(std::string(ibv_wc_status_str(IBV_WC_SUCCESS)) == "success");
  CHECK(std::string(ibv_wc_status_str(IBV_WC_WR_FLUSH_ERR)) == "Work Request Flushed Error");
  CHECK(std::string(ibv_wc_status_str(IBV_WC_TM_RNDV_INCOMPLETE)) == "TM rendezvous error");
  CHECK(std::string(ibv_wc_status_str(static_cast<ibv_wc_status>(31))) == "unknown");
  CHECK(std::string(ibv_event_type_str(IBV_EVENT_PORT_ACTIVE)) == "port active");
  CHECK(std::string(ibv_event_type_str(IBV_EVENT_WQ_FATAL)) == "WQ fatal");
  CHECK(std::string(ibv_event_type_str(static_cast<ibv_event_type>(20))) == "unknown");
}

TEST_CASE("rate conversions", "[shim]") {
  CHECK(ibv_rate_to_mult(IBV_RATE_2_5_GBPS) == 1);
  CHECK(ibv_rate_to_mult(IBV_RATE_10_GBPS) == 4);
  CHECK(ibv_rate_to_mult(IBV_RATE_120_GBPS) == 48);
  CHECK(ibv_rate_to_mult(IBV_RATE_25_GBPS) == -1);  // 25.78125 Gb/s is no multiple of 2.5
  CHECK(mult_to_ibv_rate(4) == IBV_RATE_10_GBPS);
  CHECK(mult_to_ibv_rate(3) == IBV_RATE_MAX);
  CHECK(ibv_rate_to_mbps(IBV_RATE_100_GBPS) == 103125);
  CHECK(mbps_to_ibv_rate(103125) == IBV_RATE_100_GBPS);
  CHECK(mbps_to_ibv_rate(1) == IBV_RATE_MAX);
  CHECK(ibv_rate_to_mbps(IBV_RATE_MAX) == -1);
}

TEST_CASE("fork needs no preparation", "[shim]") {
  CHECK(ibv_fork_init() == 0);
  CHECK(ibv_is_fork_initialized() == IBV_FORK_UNNEEDED);
}

TEST_CASE("sysfs helpers: a virtual device folder, real files elsewhere", "[shim]") {
  CHECK(std::string(ibv_get_sysfs_path()) == "/sys");  // ctest runs this without SYSFS_PATH
  Device d;
  char buf[64];
  CHECK(ibv_read_sysfs_file(d.list[0]->ibdev_path, "board_id", buf, sizeof buf) == 8);
  CHECK(std::string(buf) == "SOFTRDMA");
  CHECK(ibv_read_sysfs_file(d.list[0]->ibdev_path, "board_id", buf, 8) == -1);  // no room for NUL
  CHECK(ibv_read_sysfs_file(d.list[0]->ibdev_path, "no_such_file", buf, sizeof buf) == -1);

  char dir[] = "/tmp/shim_sysfs_XXXXXX";
  REQUIRE(mkdtemp(dir) != nullptr);
  std::string file = std::string(dir) + "/abi_version";
  std::FILE* f = std::fopen(file.c_str(), "w");
  REQUIRE(f != nullptr);
  std::fputs("4\n", f);
  std::fclose(f);
  CHECK(ibv_read_sysfs_file(dir, "abi_version", buf, sizeof buf) == 1);
  CHECK(std::string(buf) == "4");
  CHECK(ibv_read_sysfs_file(dir, "missing", buf, sizeof buf) == -1);
  std::remove(file.c_str());
  ::rmdir(dir);
}

namespace {

// Waits up to a second for the context's next async event.
bool next_async_event(ibv_context* ctx, ibv_async_event& event) {
  pollfd p{ctx->async_fd, POLLIN, 0};
  if (::poll(&p, 1, 1000) != 1) return false;
  return ibv_get_async_event(ctx, &event) == 0;
}

void move_qp(ibv_qp* qp, ibv_qp_state state) {
  ibv_qp_attr attr{};
  attr.qp_state = state;
  int mask = IBV_QP_STATE;
  if (state == IBV_QPS_INIT) {
    attr.port_num = 1;
    mask |= IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS;
  }
  REQUIRE(ibv_modify_qp(qp, &attr, mask) == 0);
}

// A PD, a CQ and an SRQ, for RC QPs on the SRQ: one that enters ERR reports its last WQE
// (IBTA vol. 1 s11.6.3.2), an async event naming the QP.
struct SrqObjects {
  explicit SrqObjects(ibv_context* ctx) {
    pd = ibv_alloc_pd(ctx);
    REQUIRE(pd != nullptr);
    cq = ibv_create_cq(ctx, 1, nullptr, nullptr, 0);
    REQUIRE(cq != nullptr);
    ibv_srq_init_attr srq_attr{};
    srq_attr.attr.max_wr = 4;
    srq_attr.attr.max_sge = 1;
    srq = ibv_create_srq(pd, &srq_attr);
    REQUIRE(srq != nullptr);
  }
  ibv_qp* create_qp() {
    ibv_qp_init_attr init{};
    init.send_cq = init.recv_cq = cq;
    init.srq = srq;
    init.qp_type = IBV_QPT_RC;
    init.cap.max_send_wr = 1;
    init.cap.max_send_sge = 1;
    ibv_qp* qp = ibv_create_qp(pd, &init);
    REQUIRE(qp != nullptr);
    return qp;
  }
  void destroy() {
    CHECK(ibv_destroy_srq(srq) == 0);
    CHECK(ibv_destroy_cq(cq) == 0);
    CHECK(ibv_dealloc_pd(pd) == 0);
  }
  ibv_pd* pd = nullptr;
  ibv_cq* cq = nullptr;
  ibv_srq* srq = nullptr;
};

}  // namespace

TEST_CASE("the engine's async events reach async_fd naming the shim's objects", "[shim]") {
  Device d;
  SrqObjects o(d.ctx);
  ibv_qp* qp = o.create_qp();

  // A QP on an SRQ that enters ERR reports its last WQE (IBTA vol. 1 s11.6.3.2).
  move_qp(qp, IBV_QPS_INIT);
  move_qp(qp, IBV_QPS_ERR);
  ibv_async_event event{};
  REQUIRE(next_async_event(d.ctx, event));
  CHECK(event.event_type == IBV_EVENT_QP_LAST_WQE_REACHED);
  CHECK(event.element.qp == qp);
  ibv_ack_async_event(&event);
  CHECK(qp->events_completed == 1);

  CHECK(ibv_destroy_qp(qp) == 0);
  o.destroy();
}

TEST_CASE("a QP's destroy waits for its async events read to be acknowledged, unread ones are dropped", "[shim]") {
  Device d;
  SrqObjects o(d.ctx);
  const auto qp_in_err = [&] {
    ibv_qp* qp = o.create_qp();
    move_qp(qp, IBV_QPS_INIT);
    move_qp(qp, IBV_QPS_ERR);  // reports IBV_EVENT_QP_LAST_WQE_REACHED
    return qp;
  };

  // Read, not yet acknowledged: the destroy returns only after the acknowledgement, so that
  // ibv_ack_async_event (UCX's async thread) never touches a freed QP.
  ibv_qp* qp = qp_in_err();
  ibv_async_event event{};
  REQUIRE(next_async_event(d.ctx, event));
  REQUIRE(event.element.qp == qp);
  std::atomic<bool> destroyed{false};
  std::thread destroyer([&] {
    CHECK(ibv_destroy_qp(qp) == 0);
    destroyed = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  CHECK_FALSE(destroyed);
  ibv_ack_async_event(&event);
  destroyer.join();
  CHECK(destroyed);

  // Never read: the destroy does not wait, and the event is not handed out afterwards.
  ibv_qp* unread = qp_in_err();
  pollfd p{d.ctx->async_fd, POLLIN, 0};
  REQUIRE(::poll(&p, 1, 1000) == 1);  // its event waits in async_fd
  CHECK(ibv_destroy_qp(unread) == 0);
  const int flags = ::fcntl(d.ctx->async_fd, F_GETFL);
  ::fcntl(d.ctx->async_fd, F_SETFL, flags | O_NONBLOCK);
  CHECK(ibv_get_async_event(d.ctx, &event) == -1);  // the dropped event was the only one
  CHECK(errno == EAGAIN);
  ::fcntl(d.ctx->async_fd, F_SETFL, flags);
  o.destroy();
}
