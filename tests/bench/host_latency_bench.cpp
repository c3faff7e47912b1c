// Round-trip latency of a 2-byte RC SEND ping-pong between two embedded hosts on loopback,
// beside a plain UDP ping-pong between two sockets measured in the same run: the baseline a
// kernel-UDP RoCE emulation cannot beat. It prints our figure, the baseline and the ratio
// (docs/benchmarks.md).
//
// Each side runs on its own thread, as two processes would. Two modes, each for several spin
// times of the progress thread: the application busy-polls its CQ (like ibv_rc_pingpong
// without -e, and perftest), compared with UDP busy-polling recv(); or it sleeps until the
// CQ's event arrives (like ibv_rc_pingpong -e), compared with a blocking recv(). Not a ctest:
// run it by hand.
//   host_latency_bench [ITERATIONS]
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <thread>
#include <vector>

#include "emulator/host/embedded_host.hpp"

namespace {

namespace core = softrdma::core;
namespace host = softrdma::host;
using Clock = std::chrono::steady_clock;

struct Summary {
  double median_us, p99_us, mean_us;
};

Summary summarize(std::vector<double> rtt_us) {
  std::sort(rtt_us.begin(), rtt_us.end());
  double sum = 0;
  for (const double v : rtt_us) sum += v;
  return {rtt_us[rtt_us.size() / 2], rtt_us[rtt_us.size() * 99 / 100], sum / static_cast<double>(rtt_us.size())};
}

// ---- plain UDP ----

int udp_socket(const char* ip, std::uint16_t port) {
  const int fd = socket(AF_INET, SOCK_DGRAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  inet_pton(AF_INET, ip, &a.sin_addr);
  if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    std::perror("bind");
    std::exit(1);
  }
  return fd;
}

void connect_to(int fd, const char* ip, std::uint16_t port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  inet_pton(AF_INET, ip, &a.sin_addr);
  connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
}

void wait_recv(int fd, char* buffer, bool busy) {
  if (!busy) {
    recv(fd, buffer, 64, 0);
    return;
  }
  while (recv(fd, buffer, 64, MSG_DONTWAIT) < 0) {
  }
}

Summary udp_pingpong(int iterations, bool busy) {
  const int a = udp_socket("127.83.40.3", 5000), b = udp_socket("127.83.40.4", 5000);
  connect_to(a, "127.83.40.4", 5000);
  connect_to(b, "127.83.40.3", 5000);
  std::thread echo([&] {
    char buffer[64];
    for (int i = 0; i < iterations; ++i) {
      wait_recv(b, buffer, busy);
      send(b, buffer, 2, 0);
    }
  });
  std::vector<double> rtt;
  char buffer[64] = {1, 2};
  for (int i = 0; i < iterations; ++i) {
    const auto start = Clock::now();
    send(a, buffer, 2, 0);
    wait_recv(a, buffer, busy);
    rtt.push_back(std::chrono::duration<double, std::micro>(Clock::now() - start).count());
  }
  echo.join();
  close(a);
  close(b);
  return summarize(rtt);
}

// ---- two embedded hosts ----

struct Side {
  Side(const std::string& ip, std::chrono::nanoseconds spin) : buffer(4096) {
    host::HostConfig c;
    c.ip = ip;
    c.spin = spin;
    host::HostStart s = host::EmbeddedHost::start(c);
    if (!s.host) {
      std::fprintf(stderr, "%s\n", s.error.c_str());
      std::exit(1);
    }
    h = std::move(s.host);
    h->call([&](core::Device& d, core::Time) {
      pd = *d.alloc_pd();
      send_cq = *d.create_cq(256);
      recv_cq = *d.create_cq(256);
      const auto addr = reinterpret_cast<std::uint64_t>(buffer.data());
      mr = *d.reg_mr(pd, addr, buffer.size(), addr, core::access::local_write);
      core::QpInitAttr init;
      init.pd = pd;
      init.send_cq = send_cq;
      init.recv_cq = recv_cq;
      init.cap = {64, 64, 1, 1, 16};
      qpn = d.create_qp(init)->qpn;
    });
    h->set_event_handlers(
        [this](std::uint32_t) {
          std::lock_guard lock(mutex);
          fired = true;
          cv.notify_one();
        },
        nullptr);
  }

  void connect(const Side& peer) {
    using namespace core::qp_attr;
    core::QpAttr a;
    a.qp_state = core::QpState::init;
    a.port_num = 1;
    a.qp_access_flags = core::access::local_write;
    h->call([&](core::Device& d, core::Time now) {
      return d.modify_qp(now, qpn, a, state | pkey_index | port | access_flags);
    });
    a.qp_state = core::QpState::rtr;
    a.path_mtu = core::Mtu::mtu1024;
    a.dest_qp_num = peer.qpn;
    a.max_dest_rd_atomic = 1;
    a.min_rnr_timer = 12;
    a.ah_attr.dgid = peer.h->gid();
    h->call([&](core::Device& d, core::Time now) {
      return d.modify_qp(now, qpn, a, state | av | path_mtu | dest_qpn | rq_psn | max_dest_rd_atomic | min_rnr_timer);
    });
    a.qp_state = core::QpState::rts;
    a.timeout = 14;
    a.retry_cnt = 7;
    a.rnr_retry = 7;
    a.max_rd_atomic = 1;
    h->call([&](core::Device& d, core::Time now) {
      return d.modify_qp(now, qpn, a, state | sq_psn | timeout | retry_cnt | rnr_retry | max_qp_rd_atomic);
    });
  }

  void post_recv() {
    core::RecvWr r;
    r.sg_list = {{reinterpret_cast<std::uint64_t>(buffer.data()), 64, mr.lkey}};
    h->call([&](core::Device& d, core::Time) { return d.post_recv(qpn, r); });
  }

  void send() {
    core::SendWr w;
    w.opcode = core::WrOpcode::send;
    w.flags = core::send_flags::signaled | core::send_flags::inline_data;
    w.inline_data = {1, 2};
    h->call([&](core::Device& d, core::Time now) { return d.post_send(now, qpn, w); });
  }

  // Waits for the receive, then reaps the send completions that came meanwhile.
  void wait_recv(bool events) {
    core::Wc wc[4];
    if (events) {
      for (;;) {
        if (h->poll_cq(recv_cq, {wc, 1}) == 1) break;
        std::unique_lock lock(mutex);
        cv.wait(lock, [&] { return fired; });
        fired = false;
        lock.unlock();
        h->req_notify_cq(recv_cq, false);
      }
    } else {
      while (h->poll_cq(recv_cq, {wc, 1}) == 0) {
      }
    }
    while (h->poll_cq(send_cq, wc) > 0) {
    }
  }

  std::vector<std::uint8_t> buffer;
  std::uint32_t pd = 0, send_cq = 0, recv_cq = 0, qpn = 0;
  core::MrKeys mr;
  std::mutex mutex;
  std::condition_variable cv;
  bool fired = false;
  // Last, so it is destroyed first: its thread signals the members above until it stops.
  std::unique_ptr<host::EmbeddedHost> h;
};

Summary host_pingpong(int iterations, std::chrono::nanoseconds spin, bool events) {
  Side a("127.83.40.1", spin), b("127.83.40.2", spin);
  a.connect(b);
  b.connect(a);
  if (events) {
    for (Side* s : {&a, &b}) s->h->req_notify_cq(s->recv_cq, false);
  }
  a.post_recv();
  b.post_recv();
  std::thread echo([&] {
    for (int i = 0; i < iterations; ++i) {
      b.wait_recv(events);
      b.post_recv();
      b.send();
    }
  });
  std::vector<double> rtt;
  for (int i = 0; i < iterations; ++i) {
    const auto start = Clock::now();
    a.send();
    a.wait_recv(events);
    a.post_recv();
    rtt.push_back(std::chrono::duration<double, std::micro>(Clock::now() - start).count());
  }
  echo.join();
  return summarize(rtt);
}

void print(const char* what, const Summary& s, const Summary& udp) {
  std::printf("%-44s median %7.2f us  p99 %7.2f us  mean %7.2f us  ratio to UDP (median) %5.2f\n", what, s.median_us,
              s.p99_us, s.mean_us, s.median_us / udp.median_us);
}

}  // namespace

int main(int argc, char** argv) {
  const int iterations = argc > 1 ? std::atoi(argv[1]) : 20000;
  using std::chrono::microseconds;
  const Summary udp = udp_pingpong(iterations, true);
  std::printf("%-44s median %7.2f us  p99 %7.2f us  mean %7.2f us\n", "plain UDP 2 B, busy-polling recv", udp.median_us,
              udp.p99_us, udp.mean_us);
  for (const auto spin : {microseconds(0), microseconds(50), microseconds(200)}) {
    const std::string label = "RC SEND 2 B, poll_cq, spin " + std::to_string(spin.count()) + " us";
    print(label.c_str(), host_pingpong(iterations, spin, false), udp);
  }
  const Summary udp_blocking = udp_pingpong(iterations / 4, false);
  std::printf("%-44s median %7.2f us  p99 %7.2f us  mean %7.2f us\n", "plain UDP 2 B, blocking recv",
              udp_blocking.median_us, udp_blocking.p99_us, udp_blocking.mean_us);
  for (const auto spin : {microseconds(0), microseconds(50), microseconds(200)}) {
    const std::string label = "RC SEND 2 B, CQ events, spin " + std::to_string(spin.count()) + " us";
    print(label.c_str(), host_pingpong(iterations / 4, spin, true), udp_blocking);
  }
  return 0;
}
