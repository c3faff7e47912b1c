// Starting and stopping hosts: the address a host takes with and without configuration, the
// errors a person meets, the threads a host leaves behind (none), the progress thread's
// scheduler slice, and the CPU an idle host uses.
#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <fstream>

#include "emulator/host/short_slice.hpp"
#include "tests/host/host_fixture.hpp"

namespace test {
namespace {

// A plain UDP socket on ip:port; fd -1 when the bind fails.
struct PlainSocket {
  PlainSocket(const char* ip, std::uint16_t port) : fd(socket(AF_INET, SOCK_DGRAM, 0)) {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    inet_pton(AF_INET, ip, &a.sin_addr);
    if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
      close(fd);
      fd = -1;
    }
  }
  PlainSocket(const PlainSocket&) = delete;
  PlainSocket& operator=(const PlainSocket&) = delete;
  ~PlainSocket() {
    if (fd >= 0) close(fd);
  }
  int fd;
};

// The thread ids of this process's threads.
std::vector<int> thread_ids() {
  std::vector<int> tids;
  DIR* d = opendir("/proc/self/task");
  while (const dirent* e = readdir(d))
    if (e->d_name[0] != '.') tids.push_back(std::stoi(e->d_name));
  closedir(d);
  return tids;
}

std::size_t thread_count() { return thread_ids().size(); }

// The thread ids of this process's threads named `name`.
std::vector<int> threads_named(const std::string& name) {
  std::vector<int> named;
  for (const int tid : thread_ids()) {
    std::string comm;
    std::getline(std::ifstream("/proc/self/task/" + std::to_string(tid) + "/comm"), comm);
    if (comm == name) named.push_back(tid);
  }
  return named;
}

// Whether the kernel honours a SCHED_OTHER thread's requested slice (Linux 6.12 and later).
bool kernel_has_custom_slices() {
  utsname u{};
  uname(&u);
  int major = 0, minor = 0;
  std::sscanf(u.release, "%d.%d", &major, &minor);
  return major > 6 || (major == 6 && minor >= 12);
}

// The number of this process's threads once it settles at `expected` (within a second), or
// whatever it is then: a joined thread leaves /proc/self/task a moment after join returns,
// because the kernel wakes the joiner before it finishes removing the thread.
std::size_t thread_count_settling_at(std::size_t expected) {
  std::size_t n = thread_count();
  for (int i = 0; i < 1000 && n != expected; ++i) {
    std::this_thread::sleep_for(1ms);
    n = thread_count();
  }
  return n;
}

double cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

host::HostStart start_at(std::optional<std::string> ip) {
  host::HostConfig c;
  c.ip = std::move(ip);
  return host::EmbeddedHost::start(c);
}

TEST_CASE("with no address configured, a host takes the first free 127.0.0.N:4791", "[host][auto-address]") {
  // Hold 127.0.0.1:4791 as another program would (if someone else holds it already, so much
  // the same), and find the first address after it that is free right now.
  const PlainSocket holder("127.0.0.1", 4791);
  int expected = 2;
  while (expected <= 254 && PlainSocket(("127.0.0." + std::to_string(expected)).c_str(), 4791).fd < 0) ++expected;
  REQUIRE(expected <= 254);

  host::HostStart s = start_at(std::nullopt);
  INFO(s.error);
  REQUIRE(s.host);
  CHECK(s.host->address() == "127.0.0." + std::to_string(expected));
  CHECK(s.host->gid() ==
        core::Gid{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF, 127, 0, 0, static_cast<std::uint8_t>(expected)});

  // A second host in the same process takes the next one.
  host::HostStart second = start_at(std::nullopt);
  REQUIRE(second.host);
  CHECK(second.host->address() != s.host->address());
}

TEST_CASE("an address that cannot be bound gives one clear line", "[host][address]") {
  SECTION("not an address of this machine (TEST-NET-1, RFC 5737)") {
    const host::HostStart s = start_at("192.0.2.1");
    CHECK_FALSE(s.host);
    CHECK(s.error == "cannot bind 192.0.2.1:4791: cannot assign requested address (no network interface here has "
                     "this address)");
  }
  SECTION("in use") {
    const host::HostStart first = start_at("127.83.20.1");
    REQUIRE(first.host);
    const host::HostStart s = start_at("127.83.20.1");
    CHECK_FALSE(s.host);
    CHECK(s.error == "cannot bind 127.83.20.1:4791: address already in use (another softrdma device or the rdma_rxe "
                     "module holds it)");
  }
  SECTION("not an address at all") {
    const host::HostStart s = start_at("127.0.0.300");
    CHECK_FALSE(s.host);
    CHECK(s.error == "'127.0.0.300' is not an IPv4 or IPv6 address");
  }
  SECTION("the GID form of an IPv4 address means the IPv4 address") {
    const host::HostStart s = start_at("::ffff:127.83.20.2");
    REQUIRE(s.host);
    CHECK(s.host->address() == "127.83.20.2");
  }
}

TEST_CASE("a stopped host leaves no thread behind", "[host]") {
  const std::size_t before = thread_count();
  {
    Node a("127.83.21.1"), b("127.83.21.2");
    CHECK(thread_count() == before + 2);
    RcPair p(a, b);
    b.post_recv(p.qb, 1, 0, 64);
    a.post_send(p.qa, make_wr(core::WrOpcode::send, 1, {a.sge(0, 64)}));
    b.wait(b.recv_cq, 1);
    a.host->stop();
    CHECK(thread_count_settling_at(before + 1) == before + 1);
    a.host->stop();  // twice is harmless
  }
  CHECK(thread_count_settling_at(before) == before);
}

TEST_CASE("the progress thread asks for the shortest scheduler slice, and only it does", "[host][sched]") {
  if (!kernel_has_custom_slices()) {
    WARN("this kernel predates per-thread slices (Linux 6.12): nothing to check");
    return;
  }
  Node a("127.83.23.1");
  // The thread names itself and asks for its slice when it first runs, which on a loaded
  // machine may be a while after start() returns.
  std::vector<int> progress;
  std::uint64_t slice = 0;
  for (const auto give_up = std::chrono::steady_clock::now() + 5s; std::chrono::steady_clock::now() < give_up;) {
    progress = threads_named("srdma-progress");
    if (progress.size() == 1 && (slice = host::requested_slice_ns(progress[0])) == host::kProgressSliceNs) break;
    std::this_thread::sleep_for(1ms);
  }
  REQUIRE(progress.size() == 1);
  CHECK(slice == host::kProgressSliceNs);
  // The application's threads keep the kernel's default.
  CHECK(host::requested_slice_ns(0) > host::kProgressSliceNs);
}

TEST_CASE("a slice switch moves its thread between the short slice and the kernel's default", "[host][sched]") {
  if (!kernel_has_custom_slices()) {
    WARN("this kernel predates per-thread slices (Linux 6.12): nothing to check");
    return;
  }
  // On a thread of its own: the test's thread keeps the slice it has.
  std::vector<std::uint64_t> seen;
  std::thread([&] {
    host::SliceSwitch slice;
    slice.use_short();
    seen.push_back(host::requested_slice_ns(0));
    slice.use_default();
    seen.push_back(host::requested_slice_ns(0));
    slice.use_short();
    seen.push_back(host::requested_slice_ns(0));
  }).join();
  REQUIRE(seen.size() == 3);
  CHECK(seen[0] == host::kProgressSliceNs);
  CHECK(seen[1] > host::kProgressSliceNs);  // the default, as an application thread has
  CHECK(seen[1] == host::requested_slice_ns(0));
  CHECK(seen[2] == host::kProgressSliceNs);
}

TEST_CASE("an idle host uses no more than 5% of a core", "[host][cpu]") {
  Node a("127.83.22.1"), b("127.83.22.2");
  RcPair p(a, b);
  b.post_recv(p.qb, 1, 0, 64);
  a.post_send(p.qa, make_wr(core::WrOpcode::send, 1, {a.sge(0, 64)}));
  b.wait(b.recv_cq, 1);
  a.wait(a.send_cq, 1);
  std::this_thread::sleep_for(50ms);  // past the spin after the last packet
  const double cpu_before = cpu_seconds();
  const auto start = std::chrono::steady_clock::now();
  std::this_thread::sleep_for(1s);
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const double share = (cpu_seconds() - cpu_before) / wall;
  WARN("two idle hosts (two progress threads, connected QPs) used " << share * 100 << "% of a core over " << wall
                                                                    << " s");
  CHECK(share <= 0.05);
}

TEST_CASE("datagrams from a non-softrdma sender are counted and dropped, and the host carries on", "[host]") {
  Node a("127.83.23.1"), b("127.83.23.2");
  RcPair p(a, b);
  const PlainSocket stranger("127.83.23.9", 0);
  REQUIRE(stranger.fd >= 0);
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(4791);
  inet_pton(AF_INET, "127.83.23.2", &to.sin_addr);

  constexpr int kDatagrams = 300;
  std::uint32_t x = 12345;
  std::vector<std::uint8_t> bytes(1500);
  for (int i = 0; i < kDatagrams; ++i) {
    const std::size_t length = i % 150 * 10;  // 0 to 1490 bytes, the empty datagram included
    for (std::size_t k = 0; k < length; ++k) {
      x = x * 1664525u + 1013904223u;
      bytes[k] = static_cast<std::uint8_t>(x >> 24);
    }
    REQUIRE(sendto(stranger.fd, bytes.data(), length, 0, reinterpret_cast<sockaddr*>(&to), sizeof to) ==
            static_cast<ssize_t>(length));
  }
  // The largest datagram IPv4 carries fills a receive slot (64 KiB, room for a coalesced
  // one): it arrives whole and is one more malformed packet.
  std::vector<std::uint8_t> huge(65507, 0x55);
  REQUIRE(sendto(stranger.fd, huge.data(), huge.size(), 0, reinterpret_cast<sockaddr*>(&to), sizeof to) ==
          static_cast<ssize_t>(huge.size()));

  REQUIRE(eventually([&] {
    const host::HostStats s = b.host->stats();
    return s.udp.rx_packets + s.udp.rx_truncated >= kDatagrams + 1;
  }));
  const host::HostStats s = b.host->stats();
  CHECK(s.udp.rx_truncated == 0);
  // Each is malformed (IbPacket::check refuses it) or, if its bytes happen to look like a
  // packet, fails the ICRC; none reaches a QP.
  CHECK(s.device.malformed + s.device.icrc_err == kDatagrams + 1);
  CHECK(s.device.malformed > 0);
  CHECK(s.device.qps.rcvd_pkts == 0);

  b.post_recv(p.qb, 1, 0, 64);
  a.post_send(p.qa, make_wr(core::WrOpcode::send, 1, {a.sge(0, 64)}));
  CHECK(b.wait(b.recv_cq, 1).at(0).status == core::WcStatus::success);
}

}  // namespace
}  // namespace test
