// softrdmad's server and client in one process: a daemon (EmbeddedHost over ProcessMemory,
// DaemonServer on a socket in a temporary directory) and DaemonClients speaking the real
// protocol to it over the Unix socket. ProcessMemory reaches this process's memory with
// process_vm_readv/writev, as it reaches another process's.
//
// Addresses: 127.83.70.0/24 and up (host_fixture.hpp's convention).
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <random>
#include <thread>

#include "emulator/host/daemon_client.hpp"
#include "emulator/host/daemon_protocol.hpp"
#include "emulator/host/daemon_server.hpp"
#include "emulator/host/daemon_socket.hpp"
#include "emulator/net/udp_gid.hpp"
#include "tests/host/daemon_fixture.hpp"
#include "tests/host/host_fixture.hpp"
#include "wire/ib_headers.hpp"

namespace {

using namespace test;
using host::DaemonClient;

constexpr std::uint32_t kAllAccess =
    core::access::local_write | core::access::remote_write | core::access::remote_read | core::access::remote_atomic;

// One client's objects: a buffer registered for everything, two CQs, an RC QP.
struct Client {
  explicit Client(Daemon& d, std::size_t bytes = 1 << 20) : link(d.connect()), buffer(bytes) {
    pd = *link->alloc_pd();
    cq = *link->create_cq(1024);
    const auto keys = link->reg_mr(pd, addr(), buffer.size(), addr(), kAllAccess);
    REQUIRE(keys.ok());
    mr = *keys;
    qpn = create_qp();
  }
  std::uint32_t create_qp(core::QpType type = core::QpType::rc) {
    core::QpInitAttr init;
    init.qp_type = type;
    init.pd = pd;
    init.send_cq = init.recv_cq = cq;
    init.cap = {256, 256, 4, 4, 64};
    const auto created = link->create_qp(init);
    REQUIRE(created.ok());
    return created->qpn;
  }
  std::uint64_t addr(std::size_t offset = 0) const { return reinterpret_cast<std::uint64_t>(buffer.data()) + offset; }
  core::Sge sge(std::size_t offset, std::uint32_t length) const { return {addr(offset), length, mr.lkey}; }

  // RESET -> INIT -> RTR -> RTS towards `remote_qpn` on the daemon's own GID; a UC QP (`rc`
  // false) with the attributes UC takes (IBTA vol. 1 table 91).
  void connect(std::uint32_t qp, std::uint32_t remote_qpn, const core::Gid& gid, bool rc = true) {
    using namespace core::qp_attr;
    to_init(*link, qp, kAllAccess);
    core::QpAttr a;
    a.qp_state = core::QpState::rtr;
    a.path_mtu = core::Mtu::mtu1024;
    a.dest_qp_num = remote_qpn;
    a.max_dest_rd_atomic = 16;
    a.min_rnr_timer = 12;
    a.ah_attr.dgid = gid;
    const std::uint32_t rtr = state | av | path_mtu | dest_qpn | rq_psn;
    REQUIRE(link->modify_qp(qp, a, rc ? rtr | max_dest_rd_atomic | min_rnr_timer : rtr) == 0);
    a.qp_state = core::QpState::rts;
    a.timeout = 14;
    a.retry_cnt = 7;
    a.rnr_retry = 7;
    a.max_rd_atomic = 16;
    const std::uint32_t rts = state | sq_psn;
    REQUIRE(link->modify_qp(qp, a, rc ? rts | timeout | retry_cnt | rnr_retry | max_qp_rd_atomic : rts) == 0);
  }
  void post(std::uint32_t qp, const core::SendWr& wr) {
    std::size_t posted = 0;
    REQUIRE(link->post_send(qp, std::span(&wr, 1), posted) == 0);
  }
  void post_recv(std::uint64_t id, std::size_t offset, std::uint32_t length) {
    core::RecvWr r;
    r.wr_id = id;
    r.sg_list = {sge(offset, length)};
    std::size_t posted = 0;
    REQUIRE(link->post_recv(qpn, std::span(&r, 1), posted) == 0);
  }
  std::vector<core::Wc> wait(std::size_t n) {
    std::vector<core::Wc> got, batch(16);
    const bool done = eventually([&] {
      const int k = link->poll_cq(cq, batch);
      REQUIRE(k >= 0);
      got.insert(got.end(), batch.begin(), batch.begin() + k);
      return got.size() >= n;
    });
    INFO("completions: " << got.size() << " of " << n);
    REQUIRE(done);
    return got;
  }

  // The client still works: its QP, connected to a second QP of its own, WRITEs 4 KiB from
  // offset 0 to offset 8192 of its buffer.
  void check_write_to_itself(const core::Gid& gid, std::uint32_t seed) {
    const std::uint32_t q2 = create_qp();
    connect(qpn, q2, gid);
    connect(q2, qpn, gid);
    fill_pattern(buffer, 0, 4096, seed);
    post(qpn, remote_wr(core::WrOpcode::rdma_write, 1, {sge(0, 4096)}, addr(8192), mr.rkey));
    CHECK(wait(1)[0].status == core::WcStatus::success);
    CHECK(std::equal(buffer.begin(), buffer.begin() + 4096, buffer.begin() + 8192));
  }

  std::unique_ptr<DaemonClient> link;
  std::vector<std::uint8_t> buffer;
  std::uint32_t pd = 0, cq = 0, qpn = 0;
  core::MrKeys mr;
};

core::Gid gid_of(Daemon& d) { return d.host->gid(); }

}  // namespace

TEST_CASE("daemon: two clients of one daemon move data byte-exactly with WRITE, SEND and READ", "[daemon]") {
  Daemon d("127.83.70.1");
  Client a(d), b(d);
  a.connect(a.qpn, b.qpn, gid_of(d));
  b.connect(b.qpn, a.qpn, gid_of(d));
  constexpr std::uint32_t kLen = 256 * 1024;
  fill_pattern(a.buffer, 0, kLen, 1);
  a.post(a.qpn, remote_wr(core::WrOpcode::rdma_write, 1, {a.sge(0, kLen)}, b.addr(0), b.mr.rkey));
  REQUIRE(a.wait(1)[0].status == core::WcStatus::success);
  CHECK(std::equal(a.buffer.begin(), a.buffer.begin() + kLen, b.buffer.begin()));

  fill_pattern(b.buffer, kLen, 5000, 2);
  a.post_recv(7, kLen, 8192);
  b.post(b.qpn, make_wr(core::WrOpcode::send, 2, {b.sge(kLen, 5000)}));
  REQUIRE(b.wait(1)[0].status == core::WcStatus::success);
  const core::Wc received = a.wait(1)[0];
  CHECK(received.wr_id == 7);
  CHECK(received.byte_len == 5000);
  CHECK(std::equal(a.buffer.begin() + kLen, a.buffer.begin() + kLen + 5000, b.buffer.begin() + kLen));

  fill_pattern(b.buffer, 2 * kLen, 70000, 3);
  a.post(a.qpn, remote_wr(core::WrOpcode::rdma_read, 3, {a.sge(2 * kLen, 70000)}, b.addr(2 * kLen), b.mr.rkey));
  REQUIRE(a.wait(1)[0].status == core::WcStatus::success);
  CHECK(std::equal(a.buffer.begin() + 2 * kLen, a.buffer.begin() + 2 * kLen + 70000, b.buffer.begin() + 2 * kLen));
}

TEST_CASE("daemon: a client naming another client's objects gets EINVAL and changes nothing", "[daemon]") {
  Daemon d("127.83.71.1");
  Client a(d), b(d);
  DaemonClient& thief = *b.link;
  CHECK(thief.dealloc_pd(a.pd) == EINVAL);
  CHECK(thief.destroy_cq(a.cq) == EINVAL);
  CHECK(thief.dereg_mr(a.mr.lkey) == EINVAL);
  CHECK(thief.destroy_qp(a.qpn) == EINVAL);
  CHECK(thief.reg_mr(a.pd, b.addr(), 4096, b.addr(), kAllAccess).error() == EINVAL);
  core::QpAttr attr;
  core::QpInitAttr init;
  CHECK(thief.query_qp(a.qpn, attr, init) == EINVAL);
  attr.qp_state = core::QpState::err;
  CHECK(thief.modify_qp(a.qpn, attr, core::qp_attr::state) == EINVAL);
  std::vector<core::Wc> wcs(4);
  CHECK(thief.poll_cq(a.cq, wcs) == -EINVAL);
  init.qp_type = core::QpType::rc;
  init.pd = b.pd;
  init.send_cq = a.cq;  // someone else's CQ
  init.recv_cq = b.cq;
  init.cap = {16, 16, 1, 1, 0};
  CHECK(thief.create_qp(init).error() == EINVAL);
  const core::SendWr wr = make_wr(core::WrOpcode::send, 1, {b.sge(0, 16)});
  std::size_t posted = 99;
  CHECK(thief.post_send(a.qpn, std::span(&wr, 1), posted) == EINVAL);
  CHECK(posted == 0);

  // a's objects still work: its QP connects to b's and a WRITE lands.
  a.connect(a.qpn, b.qpn, gid_of(d));
  b.connect(b.qpn, a.qpn, gid_of(d));
  fill_pattern(a.buffer, 0, 4096, 9);
  a.post(a.qpn, remote_wr(core::WrOpcode::rdma_write, 1, {a.sge(0, 4096)}, b.addr(0), b.mr.rkey));
  CHECK(a.wait(1)[0].status == core::WcStatus::success);
  CHECK(std::equal(a.buffer.begin(), a.buffer.begin() + 4096, b.buffer.begin()));
}

TEST_CASE("daemon: another client's rkey or lkey fails with an access error and its data stays untouched", "[daemon]") {
  Daemon d("127.83.72.1");
  Client victim(d), thief(d);
  fill_pattern(victim.buffer, 0, 8192, 5);
  const std::vector<std::uint8_t> before(victim.buffer.begin(), victim.buffer.begin() + 8192);
  // The thief's two QPs talk to each other; the responder's PD is the thief's, so the victim's
  // rkey names an MR of another PD (IBTA vol. 1 s10.6.3.2: remote access violation).
  const std::uint32_t q2 = thief.create_qp();
  thief.connect(thief.qpn, q2, gid_of(d));
  thief.connect(q2, thief.qpn, gid_of(d));
  fill_pattern(thief.buffer, 0, 8192, 6);
  thief.post(thief.qpn, remote_wr(core::WrOpcode::rdma_write, 1, {thief.sge(0, 8192)}, victim.addr(0), victim.mr.rkey));
  CHECK(thief.wait(1)[0].status == core::WcStatus::rem_access_err);
  CHECK(std::equal(before.begin(), before.end(), victim.buffer.begin()));

  // An SGE with the victim's lkey on the thief's QP: a local protection error (s10.6.3.1).
  const std::uint32_t q3 = thief.create_qp(), q4 = thief.create_qp();
  thief.connect(q3, q4, gid_of(d));
  thief.connect(q4, q3, gid_of(d));
  core::SendWr steal =
      remote_wr(core::WrOpcode::rdma_write, 2, {{victim.addr(0), 8192, victim.mr.lkey}}, thief.addr(0), thief.mr.rkey);
  thief.post(q3, steal);
  CHECK(thief.wait(1)[0].status == core::WcStatus::loc_prot_err);
  CHECK(std::equal(before.begin(), before.end(), victim.buffer.begin()));
}

TEST_CASE("daemon: a bind or local invalidation naming another client's window or region completes with an error",
          "[daemon]") {
  Daemon d("127.83.77.1");
  Client victim(d), thief(d);
  const auto victim_mw = victim.link->alloc_mw(victim.pd, 2);
  REQUIRE(victim_mw.ok());
  // Posted through the work ring, where an EINVAL would reach no one: the WR must complete, with
  // the error a NIC gives for a key the QP may not use, and the victim's objects stay as they were.
  const auto thief_qp_pair = [&] {
    const std::uint32_t q1 = thief.create_qp(), q2 = thief.create_qp();
    thief.connect(q1, q2, gid_of(d));
    thief.connect(q2, q1, gid_of(d));
    return q1;
  };
  core::SendWr bind;
  bind.opcode = core::WrOpcode::bind_mw;
  bind.wr_id = 1;
  bind.flags = core::send_flags::signaled;
  bind.mw_rkey = *victim_mw;
  bind.bind_new_rkey = 0x42;
  bind.bind_mr_lkey = victim.mr.lkey;
  bind.bind_addr = victim.addr();
  bind.bind_length = 4096;
  bind.bind_access = core::access::remote_write;
  thief.post(thief_qp_pair(), bind);
  const core::Wc bound = thief.wait(1)[0];
  CHECK(bound.wr_id == 1);
  CHECK(bound.status == core::WcStatus::mw_bind_err);

  core::SendWr inv;
  inv.opcode = core::WrOpcode::local_inv;
  inv.wr_id = 2;
  inv.flags = core::send_flags::signaled;
  inv.invalidate_rkey = victim.mr.rkey;
  thief.post(thief_qp_pair(), inv);
  const core::Wc invalidated = thief.wait(1)[0];
  CHECK(invalidated.wr_id == 2);
  CHECK(invalidated.status == core::WcStatus::loc_prot_err);

  victim.check_write_to_itself(gid_of(d), 12);      // its MR still valid
  CHECK(victim.link->dealloc_mw(*victim_mw) == 0);  // its window still its own, and unbound
}

TEST_CASE("daemon: a burst of events larger than the event socket holds reaches a client that reads late, all of them",
          "[daemon]") {
  Daemon d("127.83.78.1");
  Client c(d);
  // The client's event thread stalls in its first handler until released, as a descheduled
  // thread would: the daemon's writes fill the socket, and the rest must wait, not vanish.
  std::mutex m;
  std::condition_variable cv;
  bool released = false;
  std::atomic<int> events{0};
  c.link->set_event_handlers(
      [&](std::uint32_t) {
        std::unique_lock lock(m);
        cv.wait(lock, [&] { return released; });
        ++events;
      },
      [](const core::AsyncEvent&) {});
  // One CQ event per CQ: each armed CQ gets the flush completion of a receive posted to its QP
  // in the error state (s10.3.1: a WR posted in ERR completes flushed at once).
  constexpr int kCqs = 1500;  // a Unix socket's default buffer holds a few hundred messages
  for (int i = 0; i < kCqs; ++i) {
    const auto cq = c.link->create_cq(4);
    REQUIRE(cq.ok());
    core::QpInitAttr init;
    init.qp_type = core::QpType::rc;
    init.pd = c.pd;
    init.send_cq = init.recv_cq = *cq;
    init.cap = {4, 4, 1, 1, 0};
    const auto qp = c.link->create_qp(init);
    REQUIRE(qp.ok());
    to_init(*c.link, qp->qpn, 0);
    core::QpAttr a;
    a.qp_state = core::QpState::err;
    REQUIRE(c.link->modify_qp(qp->qpn, a, core::qp_attr::state) == 0);
    REQUIRE(c.link->req_notify_cq(*cq, false) == 0);
    core::RecvWr r;
    r.sg_list = {c.sge(0, 16)};
    std::size_t posted = 0;
    REQUIRE(c.link->post_recv(qp->qpn, std::span(&r, 1), posted) == 0);
  }
  // The socket filled up: some events wait in the daemon.
  CHECK(eventually([&] { return d.server->outbox().waiting_total() > 0; }));
  {
    std::lock_guard lock(m);
    released = true;
  }
  cv.notify_all();
  CHECK(eventually([&] { return events.load() == kCqs; }));
  CHECK(d.server->outbox().dropped() == 0);
}

TEST_CASE("daemon: registering memory where nothing is mapped fails with EFAULT, as the kernel's verbs do",
          "[daemon]") {
  Daemon d("127.83.79.1");
  Client c(d);
  const long page = ::sysconf(_SC_PAGESIZE);
  void* p = ::mmap(nullptr, static_cast<std::size_t>(page), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  REQUIRE(p != MAP_FAILED);
  const auto addr = reinterpret_cast<std::uint64_t>(p);
  REQUIRE(c.link->reg_mr(c.pd, addr, static_cast<std::uint64_t>(page), addr, kAllAccess).ok());  // mapped: fine
  REQUIRE(::munmap(p, static_cast<std::size_t>(page)) == 0);
  CHECK(c.link->reg_mr(c.pd, addr, static_cast<std::uint64_t>(page), addr, kAllAccess).error() == EFAULT);
}

TEST_CASE("daemon: a client that goes away leaves nothing behind and disturbs no one", "[daemon]") {
  Daemon d("127.83.73.1");
  Client stays(d);
  const std::size_t qps_before = d.live_qps();
  {
    Client leaves(d);
    leaves.create_qp();
    leaves.connect(leaves.qpn, stays.qpn, gid_of(d));
    CHECK(d.live_qps() == qps_before + 2);
  }  // its connection closes, as when a process exits or is killed
  CHECK(eventually([&] { return d.live_qps() == qps_before && d.server->client_count() == 1; }));
  stays.check_write_to_itself(gid_of(d), 11);
}

TEST_CASE("daemon: shutdown flushes client QPs, raises device_fatal, and then every verb fails with EIO", "[daemon]") {
  Daemon d("127.83.74.1", std::chrono::milliseconds(300));
  Client c(d);
  const std::uint32_t q2 = c.create_qp();
  c.connect(c.qpn, q2, gid_of(d));
  std::atomic<int> fatal{0};
  c.link->set_event_handlers([](std::uint32_t) {},
                             [&](const core::AsyncEvent& e) {
                               if (e.type == core::AsyncEventType::device_fatal) ++fatal;
                             });
  c.post_recv(42, 0, 64);
  std::thread stop([&] { d.server->shutdown(); });
  CHECK(eventually([&] { return fatal.load() == 1; }));
  const core::Wc flushed = c.wait(1)[0];  // within the grace period, the client still polls
  CHECK(flushed.wr_id == 42);
  CHECK(flushed.status == core::WcStatus::wr_flush_err);
  stop.join();
  CHECK(c.link->alloc_pd().error() == EIO);
  std::vector<core::Wc> wcs(1);
  CHECK(c.link->poll_cq(c.cq, wcs) == -EIO);
  CHECK(fatal.load() == 1);  // the connection's end raises no second one
}

TEST_CASE("daemon: posts through the work ring answer EINVAL and ENOMEM as the engine does", "[daemon]") {
  Daemon d("127.83.76.1");
  Client c(d);
  // RESET and INIT take no sends, RESET no receives (s10.3.1); the view follows modify_qp.
  const core::SendWr send = make_wr(core::WrOpcode::send, 1, {c.sge(0, 64)});
  std::size_t posted = 99;
  CHECK(c.link->post_send(c.qpn, std::span(&send, 1), posted) == EINVAL);
  CHECK(posted == 0);
  core::RecvWr recv;
  recv.sg_list = {c.sge(0, 64)};
  CHECK(c.link->post_recv(c.qpn, std::span(&recv, 1), posted) == EINVAL);
  const std::uint32_t peer = c.create_qp();
  c.connect(c.qpn, peer, gid_of(d));
  c.connect(peer, c.qpn, gid_of(d));

  // More receives than max_recv_wr (256) in one list: the first 256 are posted, the 257th
  // is ENOMEM, and bad_wr would name it.
  std::vector<core::RecvWr> many(300, recv);
  CHECK(c.link->post_recv(c.qpn, many, posted) == ENOMEM);
  CHECK(posted == 256);
  // An SGE too many: EINVAL for that WR, the ones before it posted. The queue is full, so
  // first make room on the peer side: its own receives.
  std::vector<core::RecvWr> two(2, recv);
  two[1].sg_list.assign(5, c.sge(0, 8));  // max_recv_sge is 4
  CHECK(c.link->post_recv(peer, two, posted) == EINVAL);
  CHECK(posted == 1);
  // Too many SGEs after a good WR, and too much inline data.
  core::SendWr bad = send;
  bad.sg_list.assign(5, c.sge(0, 8));  // max_send_sge is 4
  std::vector<core::SendWr> sends{send, bad};
  CHECK(c.link->post_send(c.qpn, sends, posted) == EINVAL);
  CHECK(posted == 1);
  bad = send;
  bad.flags |= core::send_flags::inline_data;
  bad.inline_data.assign(65, 7);  // max_inline_data is 64
  CHECK(c.link->post_send(c.qpn, std::span(&bad, 1), posted) == EINVAL);
  CHECK(posted == 0);
  // What was posted arrived: the one SEND lands in c's first receive, on the peer QP's CQ.
  const auto wcs = c.wait(2);  // the SEND's completion and the peer's receive
  for (const core::Wc& wc : wcs) CHECK(wc.status == core::WcStatus::success);

  // Send credits run out after max_send_wr and come back as completions retire WRs.
  std::vector<core::SendWr> burst(600, make_wr(core::WrOpcode::rdma_write, 5, {c.sge(0, 64)}));
  for (auto& w : burst) {
    w.remote_addr = c.addr(4096);
    w.rkey = c.mr.rkey;
  }
  std::size_t total = 0;
  const bool all = eventually([&] {
    std::size_t n = 0;
    const int err = c.link->post_send(c.qpn, std::span(burst).subspan(total), n);
    REQUIRE((err == 0 || err == ENOMEM));
    total += n;
    std::vector<core::Wc> out(64);
    const int k = c.link->poll_cq(c.cq, out);
    REQUIRE(k >= 0);
    return total == burst.size();
  });
  CHECK(all);
}

// A receive one client posted before another client sends to it is there when the packet
// loops back, though the progress thread looked at the receiver's ring before the receive
// and finds the send later in the same pull: a UC message that finds no receive is dropped
// silently (IBTA vol. 1 9.7.5.1.2). Client c's long run of posts, between a's ring and b's
// in the daemon's order, holds the progress thread in that pull meanwhile.
TEST_CASE("daemon: a send another client posts after a receive finds that receive", "[daemon]") {
  Daemon d("127.83.85.1");
  Client a(d), c(d), b(d);
  const std::uint32_t qa = a.create_qp(core::QpType::uc), qb = b.create_qp(core::QpType::uc);
  a.connect(qa, qb, gid_of(d), false);
  b.connect(qb, qa, gid_of(d), false);
  core::QpAttr reset;
  reset.qp_state = core::QpState::reset;
  core::RecvWr filler;
  filler.sg_list = {c.sge(0, 64)};
  constexpr int kRounds = 100;
  int received = 0;
  for (int round = 0; round < kRounds; ++round) {
    to_init(*c.link, c.qpn, kAllAccess);
    for (int i = 0; i < 250; ++i) {
      std::size_t posted = 0;
      REQUIRE(c.link->post_recv(c.qpn, std::span(&filler, 1), posted) == 0);
    }
    core::RecvWr r;
    r.wr_id = static_cast<std::uint64_t>(round);
    r.sg_list = {a.sge(0, 64)};
    std::size_t posted = 0;
    REQUIRE(a.link->post_recv(qa, std::span(&r, 1), posted) == 0);
    b.post(qb, make_wr(core::WrOpcode::send, static_cast<std::uint64_t>(round), {b.sge(0, 64)}));
    REQUIRE(b.wait(1)[0].status == core::WcStatus::success);
    std::vector<core::Wc> out(1);
    const bool arrived = eventually([&] { return a.link->poll_cq(a.cq, out) == 1; }, std::chrono::milliseconds(2000));
    INFO("round " << round);
    CHECK(arrived);
    if (arrived) {
      CHECK(out[0].wr_id == static_cast<std::uint64_t>(round));
      received += out[0].status == core::WcStatus::success ? 1 : 0;
    } else {
      // The receive stayed posted: the next round's message takes it.
      REQUIRE(a.link->modify_qp(qa, reset, core::qp_attr::state) == 0);
      a.connect(qa, qb, gid_of(d), false);
    }
    REQUIRE(c.link->modify_qp(c.qpn, reset, core::qp_attr::state) == 0);  // RESET empties the queue
  }
  CHECK(received == kRounds);
}

TEST_CASE("daemon: malformed and random requests drop only the connection that sent them", "[daemon]") {
  Daemon d("127.83.75.1");
  Client good(d);
  std::mt19937 rng(1234);
  for (int round = 0; round < 300; ++round) {
    const int fd = host::connect_daemon_socket(d.socket);
    REQUIRE(fd >= 0);
    int pair[2];
    REQUIRE(::socketpair(AF_UNIX, SOCK_SEQPACKET, 0, pair) == 0);
    if (round % 10 != 0) {  // mostly after a proper greeting, sometimes instead of it
      REQUIRE(host::send_daemon_hello(fd, pair[1]));
      std::vector<std::uint8_t> reply(256);
      REQUIRE(::recv(fd, reply.data(), reply.size(), 0) > 0);
    }
    for (int m = 0; m < 8; ++m) {
      std::vector<std::uint8_t> msg(rng() % 120);
      for (auto& byte : msg) byte = static_cast<std::uint8_t>(rng());
      if (msg.size() >= 4 && rng() % 2) msg[0] = static_cast<std::uint8_t>(rng() % 30), msg[1] = msg[2] = msg[3] = 0;
      if (::send(fd, msg.data(), msg.size(), MSG_NOSIGNAL) < 0) break;
      std::vector<std::uint8_t> reply(64 * 1024);
      if (::recv(fd, reply.data(), reply.size(), 0) <= 0) break;  // dropped
    }
    ::close(pair[0]);
    ::close(pair[1]);
    ::close(fd);
  }
  CHECK(eventually([&] { return d.server->client_count() == 1; }));
  good.check_write_to_itself(gid_of(d), 12);
}

TEST_CASE("daemon: a request that names no op drops the connection that sent it", "[daemon]") {
  Daemon d("127.83.86.1");
  Client good(d);
  // Below the first op, just past the last, the largest, and a message too short to name one.
  const std::uint32_t past_last = static_cast<std::uint32_t>(host::daemon::Op::end_of_ops);
  const std::vector<std::vector<std::uint8_t>> requests = {
      {0, 0, 0, 0}, {static_cast<std::uint8_t>(past_last), 0, 0, 0}, {0xff, 0xff, 0xff, 0xff}, {1, 0}};
  for (const std::vector<std::uint8_t>& request : requests) {
    const int fd = host::connect_daemon_socket(d.socket);
    REQUIRE(fd >= 0);
    int pair[2];
    REQUIRE(::socketpair(AF_UNIX, SOCK_SEQPACKET, 0, pair) == 0);
    REQUIRE(host::send_daemon_hello(fd, pair[1]));
    std::vector<std::uint8_t> reply(256);
    REQUIRE(::recv(fd, reply.data(), reply.size(), 0) > 0);
    REQUIRE(::send(fd, request.data(), request.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(request.size()));
    CHECK(::recv(fd, reply.data(), reply.size(), 0) == 0);  // closed, with no reply
    ::close(pair[0]);
    ::close(pair[1]);
    ::close(fd);
  }
  CHECK(eventually([&] { return d.server->client_count() == 1; }));
  good.check_write_to_itself(gid_of(d), 12);
}

namespace {

// A UD QP of `c`'s, ready to send and receive with `q_key`.
std::uint32_t ud_qp_of(Client& c, std::uint32_t q_key) {
  const std::uint32_t qp = c.create_qp(core::QpType::ud);
  ud_to_rts(q_key, [&](const core::QpAttr& a, std::uint32_t mask) { return c.link->modify_qp(qp, a, mask); });
  return qp;
}

}  // namespace

TEST_CASE("daemon: a client's UD QP joins a group, hears another client's SEND to it, and leaves when the client goes",
          "[daemon][multicast]") {
  Daemon d("127.83.87.1");
  const core::Gid group = softrdma::net::parse_gid("239.83.87.1").value();
  constexpr std::uint32_t kQkey = 0x11223344;
  auto member = std::make_unique<Client>(d);
  Client sender(d);
  // The daemon's device's limits, as its greeting carried them.
  CHECK(member->link->multicast_limits().max_groups == d.host->multicast_limits().max_groups);
  CHECK(member->link->multicast_limits().max_groups > 0);

  const std::uint32_t heard = ud_qp_of(*member, kQkey), speaks = ud_qp_of(sender, kQkey);
  CHECK(sender.link->attach_mcast(heard, group) == EINVAL);  // another client's QP
  REQUIRE(member->link->attach_mcast(heard, group) == 0);
  core::AddressVector av;
  av.dgid = group;
  const auto ah = sender.link->create_ah(sender.pd, av);
  REQUIRE(ah.ok());
  const auto send_to_group = [&](std::uint64_t id) {
    core::SendWr w = make_wr(core::WrOpcode::send, id, {sender.sge(0, 100)});
    w.ah = *ah;
    w.remote_qpn = wire::kMulticastQpn;
    w.remote_qkey = kQkey;
    sender.post(speaks, w);
    REQUIRE(sender.wait(1)[0].status == core::WcStatus::success);
  };

  core::RecvWr r;
  r.wr_id = 9;
  r.sg_list = {member->sge(0, 40 + 100)};  // the GRH first (IBTA vol. 1 s11.4.1.1)
  std::size_t posted = 0;
  REQUIRE(member->link->post_recv(heard, std::span(&r, 1), posted) == 0);
  fill_pattern(sender.buffer, 0, 100, 13);
  send_to_group(1);
  const core::Wc wc = member->wait(1)[0];
  CHECK(wc.wr_id == 9);
  CHECK(wc.byte_len == 40 + 100);
  CHECK(wc.src_qp == speaks);
  CHECK(std::equal(sender.buffer.begin(), sender.buffer.begin() + 100, member->buffer.begin() + 40));
  CHECK(d.host->stats().device.mcast_rcvd == 1);

  REQUIRE(member->link->detach_mcast(heard, group) == 0);
  CHECK(member->link->detach_mcast(heard, group) == EINVAL);  // attached no more
  REQUIRE(member->link->attach_mcast(heard, group) == 0);
  member.reset();  // the client goes with its QP attached: the device leaves the group
  CHECK(eventually([&] { return d.server->client_count() == 1; }));
  send_to_group(2);
  std::this_thread::sleep_for(200ms);
  CHECK(d.host->stats().device.mcast_rcvd == 1);
  CHECK(d.host->stats().device.mcast_dropped == 0);  // nothing came: the socket left the group
}

TEST_CASE("daemon: XRC domains are their client's, and opened targets and everything XRC a client leaves are freed",
          "[daemon][xrc]") {
  Daemon d("127.83.99.1");
  Client owner(d), other(d);
  const std::size_t qps_before = d.live_qps();
  const std::uint32_t xrcd = *owner.link->alloc_xrcd();
  CHECK(other.link->create_xrc_srq(other.pd, 4, 1, 0, {xrcd, other.cq}).error() == EINVAL);
  CHECK(other.link->dealloc_xrcd(xrcd) == EINVAL);
  const auto srq = owner.link->create_xrc_srq(owner.pd, 4, 1, 0, {xrcd, owner.cq});
  REQUIRE(srq.ok());
  core::QpInitAttr tgt;
  tgt.qp_type = core::QpType::xrc_recv;
  tgt.xrcd = xrcd;
  CHECK(other.link->create_qp(tgt).error() == EINVAL);
  const auto target = owner.link->create_qp(tgt);
  REQUIRE(target.ok());
  CHECK(other.link->open_qp(xrcd, target->qpn) == EINVAL);
  REQUIRE(owner.link->open_qp(xrcd, target->qpn) == 0);
  REQUIRE(owner.link->destroy_qp(target->qpn) == 0);  // one handle: the target stays
  CHECK(d.live_qps() == qps_before + 1);
  CHECK(owner.link->dealloc_xrcd(xrcd) == EBUSY);

  // The owner goes: its handle on the target, the XRC SRQ and the domain go with it.
  owner.link.reset();
  CHECK(eventually([&] { return d.live_qps() == qps_before - 1 && d.server->client_count() == 1; }));
  const auto fresh = other.link->alloc_xrcd();
  REQUIRE(fresh.ok());
  CHECK(*fresh == xrcd);  // the freed handle, reused
}

// Tag matching through softrdmad: the greeting carries the device's caps, a TM-SRQ must be on
// the client's own PD and CQ, only its owner operates on its tag list, and an ADD's handle
// comes back to the client.
TEST_CASE("daemon: tag-matching caps come with the greeting, and TM-SRQs and their tag lists are their client's",
          "[daemon][tm]") {
  Daemon d("127.83.98.1");
  Client owner(d), other(d);
  const core::TmCaps caps = owner.link->tm_caps();
  CHECK(caps.max_num_tags == core::DeviceConfig{}.tm.max_num_tags);
  CHECK(caps.max_ops == core::DeviceConfig{}.tm.max_ops);
  CHECK(other.link->create_tm_srq(other.pd, 4, 1, 0, {owner.cq, 4, 4}).error() == EINVAL);
  CHECK(owner.link->create_tm_srq(owner.pd, 4, 1, 0, {owner.cq, caps.max_num_tags + 1, 4}).error() == EINVAL);
  const auto srq = owner.link->create_tm_srq(owner.pd, 4, 1, 0, {owner.cq, 4, 4});
  REQUIRE(srq.ok());

  core::SrqOp add;
  add.wr_id = 7;
  add.opcode = core::SrqOpcode::tag_add;
  add.flags = core::srq_op_flags::signaled;
  add.recv_wr_id = 70;
  add.sg_list = {owner.sge(0, 64)};
  add.tag = 0x1234;
  add.mask = ~std::uint64_t{0};
  CHECK(other.link->post_srq_ops(*srq, add) == EINVAL);
  add.handle = 99;
  REQUIRE(owner.link->post_srq_ops(*srq, add) == 0);
  CHECK(add.handle < 4);
  const core::Wc added = owner.wait(1).at(0);
  CHECK(added.wr_id == 7);
  CHECK(added.opcode == core::WcOpcode::tm_add);

  core::SrqOp del;
  del.opcode = core::SrqOpcode::tag_del;
  del.handle = add.handle;
  CHECK(owner.link->post_srq_ops(*srq, del) == 0);
  core::SrqOp bogus;
  bogus.opcode = static_cast<core::SrqOpcode>(9);
  CHECK(owner.link->post_srq_ops(*srq, bogus) == EINVAL);
  CHECK(owner.link->destroy_srq(*srq) == 0);
}
