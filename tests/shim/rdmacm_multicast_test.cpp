// rdma_join_multicast, rdma_join_multicast_ex and rdma_leave_multicast through softrdma's
// librdmacm.so.1, as a program compiled against rdma_cma.h calls them: the rules rdma-core and
// the kernel apply, the join's event, and a UD QP of this process's device hearing its own
// datagrams to the group (the kernel loops them back to the group's socket) until it leaves.
// The device takes the first free 127.0.0.N; the groups are 239.77.40.5x.
#include <arpa/inet.h>
#include <rdma/rdma_cma.h>

#include <catch2/catch.hpp>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

namespace {

[[maybe_unused]] const bool environment_cleared = [] {
  for (const char* name : {"SOFTRDMA_IP", "SOFTRDMA_NETDEV", "SYSFS_PATH"}) ::unsetenv(name);
  return true;
}();

constexpr std::uint32_t kMulticastQpn = 0xFFFFFF;
constexpr std::uint32_t kUdpQkey = 0x01234567;  // RDMA_UDP_QKEY

sockaddr_in ipv4(const char* text) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  REQUIRE(::inet_pton(AF_INET, text, &a.sin_addr) == 1);
  return a;
}

sockaddr* sa(sockaddr_in& a) { return reinterpret_cast<sockaddr*>(&a); }

// An ID of port space `ps` bound to the device's address (a wildcard means it).
struct BoundId {
  explicit BoundId(rdma_port_space ps) {
    channel = rdma_create_event_channel();
    REQUIRE(channel != nullptr);
    REQUIRE(rdma_create_id(channel, &id, nullptr, ps) == 0);
    sockaddr_in any = ipv4("0.0.0.0");
    REQUIRE(rdma_bind_addr(id, sa(any)) == 0);
  }
  ~BoundId() {
    if (id->qp != nullptr) rdma_destroy_qp(id);
    if (cq_ != nullptr) ibv_destroy_cq(cq_);
    rdma_destroy_id(id);
    rdma_destroy_event_channel(channel);
  }
  // A UD QP (rdma_create_qp moves it to RTS with RDMA_UDP_QKEY) completing into one CQ.
  void create_qp() {
    cq_ = ibv_create_cq(id->verbs, 32, nullptr, nullptr, 0);
    REQUIRE(cq_ != nullptr);
    ibv_qp_init_attr a{};
    a.qp_type = IBV_QPT_UD;
    a.send_cq = a.recv_cq = cq_;
    a.cap = {8, 8, 1, 1, 0};
    REQUIRE(rdma_create_qp(id, nullptr, &a) == 0);
  }
  rdma_cm_event* next_event() {
    rdma_cm_event* e = nullptr;
    REQUIRE(rdma_get_cm_event(channel, &e) == 0);
    return e;
  }
  // The next completion within `limit`, or none.
  bool poll(ibv_wc& wc, std::chrono::milliseconds limit = std::chrono::seconds(5)) {
    const auto end = std::chrono::steady_clock::now() + limit;
    while (std::chrono::steady_clock::now() < end) {
      const int n = ibv_poll_cq(cq_, 1, &wc);
      if (n < 0) FAIL("ibv_poll_cq returned " << n);
      if (n == 1) return true;
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    return false;
  }

  rdma_event_channel* channel = nullptr;
  rdma_cm_id* id = nullptr;
  ibv_cq* cq_ = nullptr;
};

int join_ex(rdma_cm_id* id, sockaddr* group, std::uint32_t comp_mask, std::uint32_t flags) {
  rdma_cm_join_mc_attr_ex attr{};
  attr.comp_mask = comp_mask;
  attr.join_flags = flags;
  attr.addr = group;
  return rdma_join_multicast_ex(id, &attr, nullptr);
}

// The call's result and errno, as one value to compare: -errno on failure.
template <class F>
int outcome(F f) {
  errno = 0;
  const int r = f();
  return r == 0 ? 0 : -errno;
}

}  // namespace

TEST_CASE("rdma_join_multicast: the rules of rdma-core's library and the kernel's rdma_cm", "[rdmacm][multicast]") {
  sockaddr_in group = ipv4("239.77.40.51");
  rdma_event_channel* channel = rdma_create_event_channel();
  rdma_cm_id* idle = nullptr;
  REQUIRE(rdma_create_id(channel, &idle, nullptr, RDMA_PS_UDP) == 0);
  CHECK(outcome([&] { return rdma_join_multicast(idle, sa(group), nullptr); }) == -EINVAL);  // no address yet
  rdma_destroy_id(idle);
  rdma_destroy_event_channel(channel);

  BoundId udp(RDMA_PS_UDP);
  sockaddr_in unicast = ipv4("127.0.0.1");
  CHECK(outcome([&] { return rdma_join_multicast(udp.id, sa(unicast), nullptr); }) == -EINVAL);
  CHECK(outcome([&] { return rdma_join_multicast(udp.id, nullptr, nullptr); }) == -EINVAL);
  sockaddr_in6 group6{};
  group6.sin6_family = AF_INET6;
  REQUIRE(::inet_pton(AF_INET6, "ff0e::77:40:51", &group6.sin6_addr) == 1);
  CHECK(outcome([&] { return rdma_join_multicast(udp.id, reinterpret_cast<sockaddr*>(&group6), nullptr); }) ==
        -EAFNOSUPPORT);  // an IPv4 device's socket hears no IPv6 group
  constexpr std::uint32_t both = RDMA_CM_JOIN_MC_ATTR_ADDRESS | RDMA_CM_JOIN_MC_ATTR_JOIN_FLAGS;
  CHECK(outcome([&] { return join_ex(udp.id, sa(group), both | RDMA_CM_JOIN_MC_ATTR_RESERVED, 0); }) == -EOPNOTSUPP);
  CHECK(outcome([&] { return join_ex(udp.id, sa(group), RDMA_CM_JOIN_MC_ATTR_ADDRESS, 0); }) == -EINVAL);
  CHECK(outcome([&] { return join_ex(udp.id, sa(group), both, RDMA_MC_JOIN_FLAG_RESERVED); }) == -EINVAL);
  CHECK(outcome([&] { return rdma_leave_multicast(udp.id, sa(group)); }) == -EADDRNOTAVAIL);

  BoundId tcp(RDMA_PS_TCP);
  CHECK(outcome([&] { return rdma_join_multicast(tcp.id, sa(group), nullptr); }) == -EINVAL);  // RC: no multicast
  BoundId ipoib(RDMA_PS_IPOIB);
  CHECK(outcome([&] { return rdma_join_multicast(ipoib.id, sa(group), nullptr); }) == -ENOSYS);
}

TEST_CASE("rdma_join_multicast: the join's event, and the group's datagrams reach the QP until it leaves",
          "[rdmacm][multicast]") {
  BoundId m(RDMA_PS_UDP);
  m.create_qp();
  sockaddr_in group = ipv4("239.77.40.52");
  int context = 0;
  REQUIRE(rdma_join_multicast(m.id, sa(group), &context) == 0);
  rdma_cm_event* e = m.next_event();
  CHECK(e->event == RDMA_CM_EVENT_MULTICAST_JOIN);
  CHECK(e->status == 0);
  CHECK(e->id == m.id);
  rdma_ud_param ud = e->param.ud;
  CHECK(ud.private_data == &context);  // the join's context, as rdma-core hands it back
  CHECK(ud.qp_num == kMulticastQpn);
  CHECK(ud.qkey == kUdpQkey);
  CHECK(ud.ah_attr.is_global == 1);
  CHECK(ud.ah_attr.port_num == 1);
  CHECK(ud.ah_attr.grh.hop_limit == 64);
  char text[INET6_ADDRSTRLEN] = {};
  ::inet_ntop(AF_INET6, ud.ah_attr.grh.dgid.raw, text, sizeof text);
  CHECK(std::string(text) == "::ffff:239.77.40.52");  // an IPv4 group's MGID is its IPv4-mapped address
  REQUIRE(rdma_ack_cm_event(e) == 0);

  std::vector<std::uint8_t> buffer(4096);
  ibv_mr* mr = ibv_reg_mr(m.id->pd, buffer.data(), buffer.size(), IBV_ACCESS_LOCAL_WRITE);
  REQUIRE(mr != nullptr);
  ibv_ah* ah = ibv_create_ah(m.id->pd, &ud.ah_attr);
  REQUIRE(ah != nullptr);
  const auto recv = [&](std::uint64_t wr_id) {
    ibv_sge sge{reinterpret_cast<std::uintptr_t>(buffer.data() + 1024), 40 + 100, mr->lkey};
    ibv_recv_wr wr{};
    wr.wr_id = wr_id;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    ibv_recv_wr* bad = nullptr;
    REQUIRE(ibv_post_recv(m.id->qp, &wr, &bad) == 0);
  };
  const auto send = [&](std::uint64_t wr_id, std::uint8_t fill) {
    std::memset(buffer.data(), fill, 100);
    ibv_sge sge{reinterpret_cast<std::uintptr_t>(buffer.data()), 100, mr->lkey};
    ibv_send_wr wr{};
    wr.wr_id = wr_id;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = IBV_WR_SEND;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.wr.ud.ah = ah;
    wr.wr.ud.remote_qpn = ud.qp_num;
    wr.wr.ud.remote_qkey = ud.qkey;
    ibv_send_wr* bad = nullptr;
    REQUIRE(ibv_post_send(m.id->qp, &wr, &bad) == 0);
  };

  recv(1);
  send(2, 0x5A);
  int received = 0;
  for (ibv_wc wc{}; m.poll(wc);) {
    CHECK(wc.status == IBV_WC_SUCCESS);
    if (wc.opcode != IBV_WC_RECV) continue;
    ++received;
    CHECK(wc.byte_len == 40 + 100);
    CHECK(wc.src_qp == m.id->qp->qp_num);  // its own datagram, looped back by the group's socket
    CHECK(buffer[1024 + 40] == 0x5A);
    break;
  }
  CHECK(received == 1);

  REQUIRE(rdma_leave_multicast(m.id, sa(group)) == 0);
  CHECK(outcome([&] { return rdma_leave_multicast(m.id, sa(group)); }) == -EADDRNOTAVAIL);
  ibv_wc wc{};
  while (m.poll(wc, std::chrono::milliseconds(100))) {
  }  // the send's completion
  recv(3);
  send(4, 0x5B);
  REQUIRE(m.poll(wc));
  CHECK(wc.wr_id == 4);  // the send completes, and nothing is heard
  CHECK_FALSE(m.poll(wc, std::chrono::milliseconds(300)));

  // Joined to send only, the QP is not attached: its datagram is not heard either.
  REQUIRE(join_ex(m.id, sa(group), RDMA_CM_JOIN_MC_ATTR_ADDRESS | RDMA_CM_JOIN_MC_ATTR_JOIN_FLAGS,
                  RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER) == 0);
  e = m.next_event();
  CHECK(e->event == RDMA_CM_EVENT_MULTICAST_JOIN);
  REQUIRE(rdma_ack_cm_event(e) == 0);
  send(5, 0x5C);
  REQUIRE(m.poll(wc));
  CHECK(wc.wr_id == 5);
  CHECK_FALSE(m.poll(wc, std::chrono::milliseconds(300)));
  REQUIRE(rdma_leave_multicast(m.id, sa(group)) == 0);

  ibv_destroy_ah(ah);
  ibv_dereg_mr(mr);
}
