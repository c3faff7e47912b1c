// RDMA Write bandwidth of two embedded iWARP hosts in one process over loopback TCP, against
// qperf tcp_bw at the same message size in the same run, interleaved, medians of repetitions
// (docs/benchmarks.md): the engine-level reading of the iWARP bandwidth target (ib_write_bw
// 64 KiB at least 0.8x qperf tcp_bw) until the verbs shim has an iWARP device for perftest.
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "emulator/host/iwarp_host.hpp"
#include "emulator/net/udp_gid.hpp"
#include "tests/iwarp_consumer_objects.hpp"

namespace {

namespace core = softrdma::core;
namespace host = softrdma::host;
using Clock = std::chrono::steady_clock;

struct Side {
  explicit Side(const std::string& ip, std::size_t bytes) : buffer(bytes) {
    host::IwarpHostConfig config;
    config.ip = ip;
    auto started = host::IwarpHost::start(config);
    if (!started.host) throw std::runtime_error(started.error);
    h = std::move(started.host);
    h->set_event_handler([this](const core::IwarpEvent& e) {
      std::lock_guard lock(mutex);
      events.push_back(e);
    });
    h->call([&](core::Device& d, core::IwarpConnectionManager&) {
      const test::IwarpConsumerObjects o = test::create_consumer_objects(d, buffer, 4096, {1024, 16, 1, 1, 0});
      cq = o.cq;
      qpn = o.qpn;
      mr = o.mr;
    });
  }
  std::uint64_t addr() const { return reinterpret_cast<std::uint64_t>(buffer.data()); }
  core::IwarpEvent next_event() {
    for (;;) {
      {
        std::lock_guard lock(mutex);
        if (!events.empty()) {
          core::IwarpEvent e = events.front();
          events.erase(events.begin());
          return e;
        }
      }
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
  }
  int poll(std::vector<core::Wc>& wcs) { return h->poll_cq(cq, wcs); }

  std::vector<std::uint8_t> buffer;
  std::uint32_t cq = 0, qpn = 0;
  core::MrKeys mr;
  std::mutex mutex;
  std::vector<core::IwarpEvent> events;
  // Last, so it is destroyed first: its thread delivers events into the members above until it stops.
  std::unique_ptr<host::IwarpHost> h;
};

// MB/s (10^6 bytes) of RDMA Writes of `size` bytes, `depth` in flight, for `seconds`; timed
// until a Send posted after the last Write reaches the server, so nothing is left in buffers.
double iwarp_write_bw(std::uint32_t size, unsigned depth, double seconds, std::uint16_t port) {
  Side server("127.83.93.1", size), client("127.83.93.2", size);
  const core::TcpEndpoint service{*softrdma::net::parse_gid("127.83.93.1"), port};
  if (!server.h->listen(service)) throw std::runtime_error("listen failed");
  client.h->call(
      [&](core::Device&, core::IwarpConnectionManager& cm) { return cm.connect(service, client.qpn, {}).ok(); });
  const core::IwarpEvent request = server.next_event();
  core::RecvWr r;
  r.sg_list = {{server.addr(), 16, server.mr.lkey}};
  server.h->call([&](core::Device& d, core::IwarpConnectionManager& cm) {
    d.post_recv(server.qpn, r);
    return cm.accept(request.id, server.qpn, {});
  });
  client.next_event();  // established
  core::SendWr write;
  write.opcode = core::WrOpcode::rdma_write;
  write.flags = core::send_flags::signaled;
  write.sg_list = {{client.addr(), size, client.mr.lkey}};
  write.remote_addr = server.addr();
  write.rkey = server.mr.rkey;
  std::vector<core::Wc> wcs(64);
  std::uint64_t done = 0, posted = 0;
  const auto start = Clock::now();
  const auto end = start + std::chrono::duration<double>(seconds);
  while (Clock::now() < end) {
    while (posted - done < depth) {
      client.h->call([&](core::Device& d, core::IwarpConnectionManager&) { return d.post_send(0, client.qpn, write); });
      ++posted;
    }
    const int n = client.poll(wcs);
    if (n > 0) done += static_cast<std::uint64_t>(n);
  }
  core::SendWr last;
  last.opcode = core::WrOpcode::send;
  last.sg_list = {{client.addr(), 16, client.mr.lkey}};
  client.h->call([&](core::Device& d, core::IwarpConnectionManager&) { return d.post_send(0, client.qpn, last); });
  while (server.poll(wcs) < 1) {
  }
  const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  return static_cast<double>(posted) * size / elapsed / 1e6;
}

// qperf tcp_bw between two processes on loopback, in MB/s.
double qperf_tcp_bw(std::uint32_t size, double seconds) {
  const pid_t server = fork();
  if (server == 0) {
    execlp("qperf", "qperf", static_cast<char*>(nullptr));
    _exit(127);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const std::string command = "qperf 127.0.0.1 -t " + std::to_string(static_cast<int>(seconds + 0.5)) + " -m " +
                              std::to_string(size) + " tcp_bw 2>&1";
  std::string out;
  if (FILE* p = popen(command.c_str(), "r")) {
    char line[256];
    while (std::fgets(line, sizeof line, p)) out += line;
    pclose(p);
  }
  kill(server, SIGTERM);
  waitpid(server, nullptr, 0);
  double value = 0;
  char unit[16] = {};
  const auto at = out.find("bw ");  // not the "tcp_bw:" heading
  if (at == std::string::npos || std::sscanf(out.c_str() + at, "bw = %lf %15s", &value, unit) != 2)
    throw std::runtime_error("qperf tcp_bw gave no figure: " + out);
  const std::string u = unit;
  return u.rfind("GB", 0) == 0 ? value * 1000 : u.rfind("KB", 0) == 0 ? value / 1000 : value;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::string(argv[1]) == "--help") {
    std::puts("usage: iwarp_bw_bench [REPS] [SECONDS]\n"
              "RDMA Write 64 KiB between two embedded iWARP hosts on loopback against qperf tcp_bw 64 KiB,\n"
              "interleaved; prints the medians and their ratio.");
    return 0;
  }
  const int reps = argc > 1 ? std::atoi(argv[1]) : 3;
  const double seconds = argc > 2 ? std::atof(argv[2]) : 2.0;
  if (reps < 1 || seconds <= 0) {
    std::fprintf(stderr, "iwarp_bw_bench: REPS and SECONDS must be positive (see --help)\n");
    return 2;
  }
  constexpr std::uint32_t kSize = 64 * 1024;
  std::vector<double> ours, theirs;
  try {
    for (int i = 0; i < reps; ++i) {
      ours.push_back(iwarp_write_bw(kSize, 16, seconds, static_cast<std::uint16_t>(17300 + i)));
      theirs.push_back(qperf_tcp_bw(kSize, seconds));
      std::printf("rep %d: iWARP RDMA Write %.0f MB/s, qperf tcp_bw %.0f MB/s\n", i + 1, ours.back(), theirs.back());
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "iwarp_bw_bench: %s\n", e.what());
    return 1;
  }
  const double a = median(ours), b = median(theirs);
  std::printf("median: iWARP RDMA Write 64 KiB %.0f MB/s, qperf tcp_bw 64 KiB %.0f MB/s, ratio %.2f\n", a, b, a / b);
  return 0;
}
