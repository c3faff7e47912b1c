// Completion-channel and async events leave the engine through the host's handlers: from the
// progress thread when nobody else is calling in, and from the calling thread after a verb.
// Completions reach the completion sink (softrdmad's CQ rings) before the ACKs they call for leave.
#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <mutex>

#include "tests/host/host_fixture.hpp"

namespace test {
namespace {

// What the handlers saw, from whichever thread ran them.
struct Recorder {
  void attach(host::EmbeddedHost& h) {
    h.set_event_handlers(
        [this](std::uint32_t cq) {
          std::lock_guard lock(mutex);
          cqs.push_back(cq);
          changed.notify_all();
        },
        [this](const core::AsyncEvent& e) {
          std::lock_guard lock(mutex);
          asyncs.push_back(e);
          changed.notify_all();
        });
  }
  bool wait_cqs(std::size_t n) {
    std::unique_lock lock(mutex);
    return changed.wait_for(lock, 10s, [&] { return cqs.size() >= n; });
  }
  bool wait_asyncs(std::size_t n) {
    std::unique_lock lock(mutex);
    return changed.wait_for(lock, 10s, [&] { return asyncs.size() >= n; });
  }

  std::mutex mutex;
  std::condition_variable changed;
  std::vector<std::uint32_t> cqs;
  std::vector<core::AsyncEvent> asyncs;
};

TEST_CASE("an armed CQ's event reaches the handler from the progress thread", "[host][events]") {
  Node a("127.83.10.1"), b("127.83.10.2");
  RcPair p(a, b);
  Recorder seen;
  seen.attach(*b.host);
  REQUIRE(b.host->req_notify_cq(b.recv_cq, false) == 0);
  b.post_recv(p.qb, 1, 0, 64);
  a.post_send(p.qa, make_wr(core::WrOpcode::send, 1, {a.sge(0, 16)}));
  REQUIRE(seen.wait_cqs(1));  // this thread never called into b: b's progress thread delivered it
  CHECK(seen.cqs == std::vector<std::uint32_t>{b.recv_cq});
  CHECK(b.wait(b.recv_cq, 1).size() == 1);

  SECTION("one event per arming") {
    b.post_recv(p.qb, 2, 0, 64);
    a.post_send(p.qa, make_wr(core::WrOpcode::send, 2, {a.sge(0, 16)}));
    CHECK(b.wait(b.recv_cq, 1).size() == 1);
    std::lock_guard lock(seen.mutex);
    CHECK(seen.cqs.size() == 1);
  }
}

TEST_CASE("an async event raised by a verb reaches the handler", "[host][events]") {
  Node a("127.83.11.1");
  Recorder seen;
  seen.attach(*a.host);
  const std::uint32_t srq = *a.host->call([&](core::Device& d, core::Time) { return d.create_srq(a.pd, 16, 1, 0); });
  core::QpInitAttr init;
  init.qp_type = core::QpType::rc;
  init.pd = a.pd;
  init.send_cq = a.send_cq;
  init.recv_cq = a.recv_cq;
  init.srq = srq;
  init.cap = {16, 0, 1, 1, 0};
  const std::uint32_t qpn = a.host->call([&](core::Device& d, core::Time) { return d.create_qp(init); })->qpn;
  core::QpAttr attr;
  attr.qp_state = core::QpState::init;
  attr.port_num = 1;
  const auto modify = [&](std::uint32_t mask) {
    return a.host->call([&](core::Device& d, core::Time now) { return d.modify_qp(now, qpn, attr, mask); });
  };
  using namespace core::qp_attr;
  REQUIRE(modify(state | pkey_index | port | access_flags) == 0);
  attr.qp_state = core::QpState::err;
  REQUIRE(modify(state) == 0);
  // This thread delivers it on its way out of call(), unless the progress thread happened to
  // be delivering at that moment and took it along.
  REQUIRE(seen.wait_asyncs(1));
  std::lock_guard lock(seen.mutex);
  REQUIRE(seen.asyncs.size() == 1);
  CHECK(seen.asyncs[0].type == core::AsyncEventType::qp_last_wqe_reached);
  CHECK(seen.asyncs[0].element == qpn);
}

TEST_CASE("a received SEND's completion reaches the completion sink before its ACK is sent", "[host][events]") {
  Node a("127.83.12.1"), b("127.83.12.2");
  RcPair p(a, b);
  // softrdmad's sink copies completions into its clients' CQ rings. b's application never calls
  // in, so b's progress thread receives the SEND; the packets b's QP had sent when the sink
  // first saw the receive completion tell whether the ACK went first.
  std::atomic<std::int64_t> sent_when_seen{-1};
  std::vector<std::uint32_t> completed;  // the sink runs under b's host lock
  b.host->set_completion_sink([&](core::Device& d) {
    d.take_completed_cqs(completed);
    if (sent_when_seen.load() < 0 && std::find(completed.begin(), completed.end(), b.recv_cq) != completed.end())
      sent_when_seen.store(static_cast<std::int64_t>(d.qp(p.qb)->counters.sent_pkts));
  });
  b.post_recv(p.qb, 1, 0, 64);
  a.post_send(p.qa, make_wr(core::WrOpcode::send, 1, {a.sge(0, 16)}));
  REQUIRE(eventually([&] { return sent_when_seen.load() >= 0; }));
  CHECK(sent_when_seen.load() == 0);
  CHECK(a.wait(a.send_cq, 1).front().status == core::WcStatus::success);  // the ACK left after it
  b.host->set_completion_sink(nullptr);
}

}  // namespace
}  // namespace test
