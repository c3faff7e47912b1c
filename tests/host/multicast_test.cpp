// Multicast through kernel UDP sockets: embedded hosts whose UD QPs attach to a group, on
// loopback addresses 127.77.40.x and groups 239.77.40.x (each test case its own), and with IPv6
// over a veth pair in a namespace. The udp backend's group sockets alone (udp_groups.hpp):
// tests/net/udp_backend_test.cpp.
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "emulator/net/udp_backend.hpp"
#include "emulator/net/udp_gid.hpp"
#include "tests/host/host_fixture.hpp"
#include "wire/ib_headers.hpp"

namespace test {
namespace {

namespace net = softrdma::net;

constexpr std::uint32_t kQkey = 0x01234567;

core::Gid gid(const char* address) {
  const auto g = net::parse_gid(address);
  REQUIRE(g);
  return *g;
}

std::uint32_t ud_qp(Node& n) {
  core::QpInitAttr init;
  init.qp_type = core::QpType::ud;
  init.pd = n.pd;
  init.send_cq = n.send_cq;
  init.recv_cq = n.recv_cq;
  init.cap = {64, 64, 1, 1, 0};
  const auto created = n.host->call([&](core::Device& d, core::Time) { return d.create_qp(init); });
  REQUIRE(created.ok());
  ud_to_rts(kQkey, [&](const core::QpAttr& a, std::uint32_t mask) {
    return n.host->call([&](core::Device& d, core::Time now) { return d.modify_qp(now, created->qpn, a, mask); });
  });
  return created->qpn;
}

// A UD SEND of `length` bytes from `qpn`'s buffer start to `group`'s QPs.
void send_to_group(Node& n, std::uint32_t qpn, const core::Gid& group, std::uint32_t length, std::uint64_t id) {
  core::AddressVector av;
  av.dgid = group;
  const auto ah = n.host->call([&](core::Device& d, core::Time) { return d.create_ah(n.pd, av); });
  REQUIRE(ah.ok());
  core::SendWr w = make_wr(core::WrOpcode::send, id, {n.sge(0, length)});
  w.ah = *ah;
  w.remote_qpn = wire::kMulticastQpn;
  w.remote_qkey = kQkey;
  n.post_send(qpn, w);
  CHECK(n.wait(n.send_cq, 1).at(0).status == core::WcStatus::success);
}

// No completion arrives on `cq` for a while.
void expect_quiet(Node& n, std::uint32_t cq) {
  std::this_thread::sleep_for(200ms);
  std::vector<core::Wc> none(4);
  CHECK(n.host->poll_cq(cq, none) == 0);
}

void exchange(Node& sender, Node& m1, Node& m2, const core::Gid& group) {
  const std::uint32_t s = ud_qp(sender), q1 = ud_qp(m1), q2 = ud_qp(m2);
  REQUIRE(m1.host->attach_mcast(q1, group) == 0);
  REQUIRE(m2.host->attach_mcast(q2, group) == 0);
  for (Node* m : {&m1, &m2}) m->post_recv(m == &m1 ? q1 : q2, 1, 0, 40 + 1000);
  fill_pattern(sender.buffer, 0, 1000, 3);
  send_to_group(sender, s, group, 1000, 1);
  for (Node* m : {&m1, &m2}) {
    const core::Wc wc = m->wait(m->recv_cq, 1).at(0);
    CHECK(wc.status == core::WcStatus::success);
    CHECK(wc.byte_len == 40 + 1000);
    CHECK(wc.src_qp == s);
    CHECK(std::memcmp(m->buffer.data() + 40, sender.buffer.data(), 1000) == 0);
    const host::HostStats st = m->host->stats();
    CHECK(st.device.mcast_rcvd == 1);
    CHECK(st.device.icrc_err == 0);
  }

  // The last QP's detach makes m1's device leave: the group's packets no longer reach it.
  REQUIRE(m1.host->detach_mcast(q1, group) == 0);
  CHECK(m1.host->detach_mcast(q1, group) == EINVAL);
  m1.post_recv(q1, 2, 0, 40 + 1000);
  m2.post_recv(q2, 2, 0, 40 + 1000);
  send_to_group(sender, s, group, 100, 2);
  CHECK(m2.wait(m2.recv_cq, 1).at(0).byte_len == 40 + 100);
  expect_quiet(m1, m1.recv_cq);
  CHECK(m1.host->stats().device.mcast_dropped == 0);  // its socket left the group: nothing came

  // A destroyed QP leaves too.
  REQUIRE(m2.host->call([&](core::Device& d, core::Time) { return d.destroy_qp(q2); }) == 0);
  send_to_group(sender, s, group, 100, 3);
  std::this_thread::sleep_for(200ms);
  CHECK(m2.host->stats().device.mcast_rcvd == 2);
  CHECK(m2.host->stats().device.mcast_dropped == 0);
}

TEST_CASE("embedded hosts: a UD SEND to a group reaches the QPs attached on two devices until they leave",
          "[multicast]") {
  Node sender("127.77.40.21"), m1("127.77.40.22"), m2("127.77.40.23");
  const core::MulticastLimits& limits = m1.host->multicast_limits();
  CHECK(limits.max_groups > 0);
  CHECK(limits.max_qps_per_group > 0);
  exchange(sender, m1, m2, gid("239.77.40.21"));
}

TEST_CASE("embedded host: a sender attached to its own group hears itself, and a join refused undoes the attach",
          "[multicast]") {
  Node n("127.77.40.31");
  const core::Gid group = gid("239.77.40.31");
  const std::uint32_t q = ud_qp(n);
  REQUIRE(n.host->attach_mcast(q, group) == 0);
  n.post_recv(q, 1, 4096, 40 + 100);
  send_to_group(n, q, group, 100, 1);
  const core::Wc wc = n.wait(n.recv_cq, 1).at(0);
  CHECK(wc.src_qp == q);
  CHECK(wc.byte_len == 40 + 100);

  // The engine takes an IPv6 group; this device's IPv4 socket cannot join it.
  CHECK(n.host->attach_mcast(q, gid("ff0e::77:40:31")) == EAFNOSUPPORT);
  CHECK(n.host->detach_mcast(q, gid("ff0e::77:40:31")) == EINVAL);  // the attach was undone
  const std::uint32_t rc = create_rc_qp(n);
  CHECK(n.host->attach_mcast(rc, group) == EINVAL);  // IBTA s10.5: UD QPs only
}

// Whether this runs in a network namespace of its own, never the machine's: /proc/1's is
// another (or hidden from us), and in_netns.sh's address is on lo.
bool in_own_namespace() {
  char ours[64] = {}, init[64] = {};
  if (readlink("/proc/self/ns/net", ours, sizeof ours - 1) < 0) return false;
  if (readlink("/proc/1/ns/net", init, sizeof init - 1) >= 0 && std::strcmp(ours, init) == 0) return false;
  return net::UdpBackend::open("fd53:7264:6d61::1", 0).backend != nullptr;
}

// IPv6 multicast does not work on lo (a route through lo is refused), so the devices sit on
// the two ends of a veth pair inside the namespace in_netns.sh made.
TEST_CASE("embedded hosts: an IPv6 group across a veth pair", "[.netns][multicast][ipv6]") {
  REQUIRE(in_own_namespace());  // never make interfaces in the machine's namespace
  const int made =
      std::system("ip link add srdmc0 type veth peer name srdmc1 && "
                  "ip -6 addr add fd77:40::1/64 dev srdmc0 nodad && ip -6 addr add fd77:40::2/64 dev srdmc1 nodad && "
                  "ip -6 addr add fd77:40::3/64 dev srdmc1 nodad && ip link set srdmc0 up && ip link set srdmc1 up");
  REQUIRE(made == 0);
  REQUIRE(eventually([] { return std::system("ip link show srdmc1 | grep -q LOWER_UP") == 0; }));
  Node sender("fd77:40::1"), m1("fd77:40::2"), m2("fd77:40::3");
  exchange(sender, m1, m2, gid("ff0e::77:40:41"));
}

}  // namespace
}  // namespace test
