// IPv6 outside any namespace: a machine has one IPv6 loopback address, ::1, so one host
// binds it and two of its QPs talk to each other through the socket (two hosts on two IPv6
// addresses run in netns_test.cpp, inside a namespace that has them).
#include <cstring>

#include "tests/host/host_fixture.hpp"

namespace test {
namespace {

TEST_CASE("RC between two QPs of a host on ::1", "[host][ipv6]") {
  host::HostConfig c;
  c.ip = "::1";
  host::HostStart probe = host::EmbeddedHost::start(c);
  if (!probe.host) {
    WARN("SKIPPED: cannot bind [::1]:4791 (" << probe.error << ")");
    return;
  }
  probe.host.reset();
  Node a("::1");
  CHECK(a.host->address() == "::1");
  CHECK(a.host->gid() == core::Gid{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1});
  RcPair p(a, a);
  fill_pattern(a.buffer, 0, 5000, 21);
  a.post_recv(p.qb, 1, 100000, 8192);
  a.post_send(p.qa, make_wr(core::WrOpcode::send, 1, {a.sge(0, 5000)}));
  CHECK(a.wait(a.recv_cq, 1).at(0).byte_len == 5000);
  CHECK(std::memcmp(a.buffer.data(), a.buffer.data() + 100000, 5000) == 0);
  fill_pattern(a.buffer, 200000, 3000, 22);
  a.post_send(p.qa, remote_wr(core::WrOpcode::rdma_read, 2, {a.sge(300000, 3000)}, a.addr(200000), a.mr.rkey));
  // Both the SEND's and the READ's completions.
  for (const core::Wc& wc : a.wait(a.send_cq, 2)) CHECK(wc.status == core::WcStatus::success);
  CHECK(std::memcmp(a.buffer.data() + 200000, a.buffer.data() + 300000, 3000) == 0);
  const host::HostStats s = a.host->stats();
  CHECK(s.device.icrc_err == 0);
  CHECK(s.udp.tx_errors == 0);
}

}  // namespace
}  // namespace test
