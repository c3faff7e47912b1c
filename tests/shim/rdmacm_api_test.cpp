// softrdma's librdmacm.so.1 called as a program compiled against rdma-core 44's rdma_cma.h
// calls it: this executable links it (and the shim's libibverbs.so.1, through the build
// RUNPATH). Where rdma-core's own library is installed it is dlopen()ed by path beside ours,
// and the two must answer alike (rdma_event_str, rdma_getaddrinfo). Loaded that way its
// libibverbs.so.1 is ours (already loaded), and its calls to its own exports bind to ours
// (first in the global scope): only its initialisation's probe for AF_IB support
// (rdma_create_id, rdma_bind_addr of an AF_IB address, rdma_destroy_id), which finds none
// either way, and rdma_freeaddrinfo, which frees the same way.
#include <arpa/inet.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <infiniband/ib.h>
#include <netdb.h>
#include <poll.h>
#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>
#include <rdma/rsocket.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace {

// The device must take the first free 127.0.0.N whatever the environment says (as in
// verbs_api_test.cpp).
[[maybe_unused]] const bool environment_cleared = [] {
  for (const char* name : {"SOFTRDMA_IP", "SOFTRDMA_NETDEV", "SYSFS_PATH"}) ::unsetenv(name);
  return true;
}();

constexpr const char* kRealLibrary = "/usr/lib/x86_64-linux-gnu/librdmacm.so.1";

// rdma-core's library, opened once; null (and a warning) where it is not installed.
void* real_library() {
  static void* handle = [] {
    void* h = ::dlopen(kRealLibrary, RTLD_NOW | RTLD_LOCAL);
    if (h == nullptr) WARN("rdma-core's librdmacm is not loadable here, no comparison: " << ::dlerror());
    return h;
  }();
  return handle;
}

template <class F>
F* real(const char* name) {
  void* h = real_library();
  return h != nullptr ? reinterpret_cast<F*>(::dlsym(h, name)) : nullptr;
}

// Everything stderr receives while `body` runs.
template <class Body>
std::string stderr_of(Body body) {
  std::fflush(stderr);
  std::FILE* capture = std::tmpfile();
  REQUIRE(capture != nullptr);
  const int saved = ::dup(STDERR_FILENO);
  ::dup2(::fileno(capture), STDERR_FILENO);
  body();
  std::fflush(stderr);
  ::dup2(saved, STDERR_FILENO);
  ::close(saved);
  std::string text;
  std::rewind(capture);
  for (int c; (c = std::fgetc(capture)) != EOF;) text += static_cast<char>(c);
  std::fclose(capture);
  return text;
}

std::string hex(const void* p, std::size_t n) {
  std::string s;
  char b[3];
  for (std::size_t i = 0; i < n; ++i) {
    std::snprintf(b, sizeof b, "%02x", static_cast<const unsigned char*>(p)[i]);
    s += b;
  }
  return s;
}

// An rdma_getaddrinfo answer as text, every field a program reads.
std::string describe(int ret, int err, const rdma_addrinfo* a) {
  if (ret != 0) return "ret=" + std::to_string(ret) + (ret == -1 ? " errno=" + std::to_string(err) : "");
  std::string s = "flags=" + std::to_string(a->ai_flags) + " family=" + std::to_string(a->ai_family) +
                  " qp_type=" + std::to_string(a->ai_qp_type) + " ps=" + std::to_string(a->ai_port_space) +
                  " src=" + hex(a->ai_src_addr, a->ai_src_len) + " dst=" + hex(a->ai_dst_addr, a->ai_dst_len) +
                  " src_name=" + (a->ai_src_canonname ? a->ai_src_canonname : "-") +
                  " dst_name=" + (a->ai_dst_canonname ? a->ai_dst_canonname : "-") +
                  " route=" + std::to_string(a->ai_route_len) + (a->ai_route ? "+" : "") +
                  " connect=" + std::to_string(a->ai_connect_len) + (a->ai_connect ? "+" : "") +
                  " next=" + (a->ai_next ? "yes" : "no");
  return s;
}

using GetAddrInfo = int(const char*, const char*, const rdma_addrinfo*, rdma_addrinfo**);
using FreeAddrInfo = void(rdma_addrinfo*);

std::string ask(GetAddrInfo* f, FreeAddrInfo* release, const char* node, const char* service,
                const rdma_addrinfo* hints) {
  rdma_addrinfo* res = nullptr;
  errno = 0;
  const int ret = f(node, service, hints, &res);
  const int err = errno;
  std::string s = describe(ret, err, res);
  if (ret == 0) release(res);
  return s;
}

rdma_addrinfo hints_with(int flags, int family = 0, int qp_type = 0, int port_space = 0) {
  rdma_addrinfo h{};
  h.ai_flags = flags;
  h.ai_family = family;
  h.ai_qp_type = qp_type;
  h.ai_port_space = port_space;
  return h;
}

sockaddr_in ipv4(const char* text, std::uint16_t port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  REQUIRE(::inet_pton(AF_INET, text, &a.sin_addr) == 1);
  return a;
}

}  // namespace

TEST_CASE("rdma_event_str names the 16 events as rdma-core does, and any other value", "[rdmacm]") {
  const std::vector<std::pair<int, std::string>> names = {
      {RDMA_CM_EVENT_ADDR_RESOLVED, "RDMA_CM_EVENT_ADDR_RESOLVED"},
      {RDMA_CM_EVENT_ADDR_ERROR, "RDMA_CM_EVENT_ADDR_ERROR"},
      {RDMA_CM_EVENT_ROUTE_RESOLVED, "RDMA_CM_EVENT_ROUTE_RESOLVED"},
      {RDMA_CM_EVENT_ROUTE_ERROR, "RDMA_CM_EVENT_ROUTE_ERROR"},
      {RDMA_CM_EVENT_CONNECT_REQUEST, "RDMA_CM_EVENT_CONNECT_REQUEST"},
      {RDMA_CM_EVENT_CONNECT_RESPONSE, "RDMA_CM_EVENT_CONNECT_RESPONSE"},
      {RDMA_CM_EVENT_CONNECT_ERROR, "RDMA_CM_EVENT_CONNECT_ERROR"},
      {RDMA_CM_EVENT_UNREACHABLE, "RDMA_CM_EVENT_UNREACHABLE"},
      {RDMA_CM_EVENT_REJECTED, "RDMA_CM_EVENT_REJECTED"},
      {RDMA_CM_EVENT_ESTABLISHED, "RDMA_CM_EVENT_ESTABLISHED"},
      {RDMA_CM_EVENT_DISCONNECTED, "RDMA_CM_EVENT_DISCONNECTED"},
      {RDMA_CM_EVENT_DEVICE_REMOVAL, "RDMA_CM_EVENT_DEVICE_REMOVAL"},
      {RDMA_CM_EVENT_MULTICAST_JOIN, "RDMA_CM_EVENT_MULTICAST_JOIN"},
      {RDMA_CM_EVENT_MULTICAST_ERROR, "RDMA_CM_EVENT_MULTICAST_ERROR"},
      {RDMA_CM_EVENT_ADDR_CHANGE, "RDMA_CM_EVENT_ADDR_CHANGE"},
      {RDMA_CM_EVENT_TIMEWAIT_EXIT, "RDMA_CM_EVENT_TIMEWAIT_EXIT"},
      {16, "UNKNOWN EVENT"},
      {255, "UNKNOWN EVENT"},
      {-1, "UNKNOWN EVENT"},
  };
  // Called as C calls it, with an int: a value outside the enum is not one C++ code may
  // hold in an rdma_cm_event_type (UBSan's -fsanitize=enum).
  using EventStr = const char*(int);
  auto* ours = reinterpret_cast<EventStr*>(&rdma_event_str);
  EventStr* theirs = real<EventStr>("rdma_event_str");
  for (const auto& [value, name] : names) {
    CAPTURE(value);
    CHECK(std::string(ours(value)) == name);
    if (theirs != nullptr) CHECK(std::string(theirs(value)) == name);
  }
}

TEST_CASE("rdma_get_devices: the opened contexts, the same ones on every call", "[rdmacm]") {
  int n = -1;
  ibv_context** list = rdma_get_devices(&n);
  REQUIRE(list != nullptr);
  REQUIRE(n == 1);
  CHECK(list[1] == nullptr);
  REQUIRE(list[0] != nullptr);
  CHECK(std::string(ibv_get_device_name(list[0]->device)) == "srdma0");

  // The contexts stay open while the library is loaded: a second list holds the same one,
  // and it is usable after the first list is freed.
  ibv_context** again = rdma_get_devices(nullptr);  // num_devices may be NULL
  REQUIRE(again != nullptr);
  CHECK(again[0] == list[0]);
  CHECK(again[1] == nullptr);
  rdma_free_devices(list);
  ibv_device_attr attr{};
  CHECK(ibv_query_device(again[0], &attr) == 0);
  CHECK(attr.phys_port_cnt == 1);
  ibv_pd* pd = ibv_alloc_pd(again[0]);
  CHECK(pd != nullptr);
  if (pd != nullptr) CHECK(ibv_dealloc_pd(pd) == 0);
  rdma_free_devices(again);
}

TEST_CASE("rdma_getaddrinfo: numeric addresses, ports and port spaces", "[rdmacm]") {
  rdma_addrinfo* res = nullptr;

  SECTION("an active IPv4 address: the destination, RC in the TCP port space") {
    REQUIRE(rdma_getaddrinfo("127.0.0.1", "7471", nullptr, &res) == 0);
    CHECK(res->ai_flags == 0);
    CHECK(res->ai_family == AF_INET);
    CHECK(res->ai_qp_type == IBV_QPT_RC);
    CHECK(res->ai_port_space == RDMA_PS_TCP);
    CHECK(res->ai_src_len == 0);
    CHECK(res->ai_src_addr == nullptr);
    REQUIRE(res->ai_dst_len == sizeof(sockaddr_in));
    const sockaddr_in want = ipv4("127.0.0.1", 7471);
    CHECK(std::memcmp(res->ai_dst_addr, &want, sizeof want) == 0);
    // No ibacm on RoCE: no route or connection data, one answer.
    CHECK(res->ai_route == nullptr);
    CHECK(res->ai_route_len == 0);
    CHECK(res->ai_connect == nullptr);
    CHECK(res->ai_connect_len == 0);
    CHECK(res->ai_next == nullptr);
  }
  SECTION("RAI_PASSIVE with only a service: the wildcard source, flags RAI_PASSIVE") {
    rdma_addrinfo hints = hints_with(RAI_PASSIVE);
    REQUIRE(rdma_getaddrinfo(nullptr, "7471", &hints, &res) == 0);
    CHECK(res->ai_flags == RAI_PASSIVE);
    CHECK(res->ai_dst_len == 0);
    REQUIRE(res->ai_src_addr != nullptr);
    CHECK(res->ai_src_addr->sa_family == res->ai_family);
    if (res->ai_family == AF_INET) {
      const sockaddr_in want = ipv4("0.0.0.0", 7471);
      CHECK(std::memcmp(res->ai_src_addr, &want, sizeof want) == 0);
    }
  }
  SECTION("RDMA_PS_UDP: a UD QP") {
    rdma_addrinfo hints = hints_with(0, 0, 0, RDMA_PS_UDP);
    REQUIRE(rdma_getaddrinfo("127.0.0.1", "7174", &hints, &res) == 0);
    CHECK(res->ai_qp_type == IBV_QPT_UD);
    CHECK(res->ai_port_space == RDMA_PS_UDP);
  }
  SECTION("IBV_QPT_UD without a port space: RDMA_PS_UDP") {
    rdma_addrinfo hints = hints_with(0, 0, IBV_QPT_UD);
    REQUIRE(rdma_getaddrinfo("127.0.0.1", nullptr, &hints, &res) == 0);
    CHECK(res->ai_qp_type == IBV_QPT_UD);
    CHECK(res->ai_port_space == RDMA_PS_UDP);
  }
  SECTION("an IPv6 address with RAI_NUMERICHOST") {
    rdma_addrinfo hints = hints_with(RAI_NUMERICHOST);
    REQUIRE(rdma_getaddrinfo("::1", "18515", &hints, &res) == 0);
    CHECK(res->ai_family == AF_INET6);
    REQUIRE(res->ai_dst_len == sizeof(sockaddr_in6));
    const auto* sin6 = reinterpret_cast<const sockaddr_in6*>(res->ai_dst_addr);
    CHECK(ntohs(sin6->sin6_port) == 18515);
    CHECK(IN6_IS_ADDR_LOOPBACK(&sin6->sin6_addr));
  }
  SECTION("the hints' source address is kept beside a resolved destination") {
    sockaddr_in src = ipv4("127.0.0.7", 0);
    rdma_addrinfo hints{};
    hints.ai_src_addr = reinterpret_cast<sockaddr*>(&src);
    hints.ai_src_len = sizeof src;
    REQUIRE(rdma_getaddrinfo("127.0.0.1", "7471", &hints, &res) == 0);
    REQUIRE(res->ai_src_len == sizeof src);
    CHECK(res->ai_src_addr != hints.ai_src_addr);  // a copy, freed with the answer
    CHECK(std::memcmp(res->ai_src_addr, &src, sizeof src) == 0);
    CHECK(res->ai_dst_len == sizeof(sockaddr_in));
  }
  SECTION("no node and no service: the hints, copied") {
    sockaddr_in dst = ipv4("127.0.0.9", 99);
    rdma_addrinfo hints = hints_with(RAI_NUMERICHOST, AF_INET, IBV_QPT_RC, RDMA_PS_TCP);
    hints.ai_dst_addr = reinterpret_cast<sockaddr*>(&dst);
    hints.ai_dst_len = sizeof dst;
    REQUIRE(rdma_getaddrinfo(nullptr, nullptr, &hints, &res) == 0);
    CHECK(res->ai_flags == RAI_NUMERICHOST);
    CHECK(res->ai_family == AF_INET);
    CHECK(res->ai_qp_type == IBV_QPT_RC);
    CHECK(res->ai_port_space == RDMA_PS_TCP);
    REQUIRE(res->ai_dst_len == sizeof dst);
    CHECK(std::memcmp(res->ai_dst_addr, &dst, sizeof dst) == 0);
  }
  if (res != nullptr) rdma_freeaddrinfo(res);
}

TEST_CASE("rdma_getaddrinfo: errors as rdma-core reports them", "[rdmacm]") {
  rdma_addrinfo* res = reinterpret_cast<rdma_addrinfo*>(0x1);  // must stay untouched on failure
  errno = 0;
  CHECK(rdma_getaddrinfo(nullptr, nullptr, nullptr, &res) == -1);
  CHECK(errno == EINVAL);
  // getaddrinfo(3)'s EAI_* codes come back as they are (rdma_getaddrinfo(3)).
  rdma_addrinfo numeric = hints_with(RAI_NUMERICHOST);
  CHECK(rdma_getaddrinfo("localhost", nullptr, &numeric, &res) == EAI_NONAME);
  CHECK(rdma_getaddrinfo("127.0.0.1", "no-such-service-here", nullptr, &res) == EAI_SERVICE);
  rdma_addrinfo v6 = hints_with(0, AF_INET6);
  CHECK(rdma_getaddrinfo("127.0.0.1", nullptr, &v6, &res) == EAI_ADDRFAMILY);
  CHECK(res == reinterpret_cast<rdma_addrinfo*>(0x1));
  rdma_freeaddrinfo(nullptr);  // harmless
}

TEST_CASE("rdma_getaddrinfo answers as rdma-core's library does", "[rdmacm]") {
  auto* theirs = real<GetAddrInfo>("rdma_getaddrinfo");
  auto* their_free = real<FreeAddrInfo>("rdma_freeaddrinfo");
  if (theirs == nullptr || their_free == nullptr) return;  // warned above

  sockaddr_in src = ipv4("127.0.0.7", 0);
  sockaddr_in dst = ipv4("127.0.0.9", 4791);
  struct Case {
    const char* node;
    const char* service;
    bool has_hints;
    rdma_addrinfo hints;
  };
  rdma_addrinfo with_src{};
  with_src.ai_src_addr = reinterpret_cast<sockaddr*>(&src);
  with_src.ai_src_len = sizeof src;
  rdma_addrinfo only_addresses = hints_with(0, AF_INET, IBV_QPT_UD, RDMA_PS_UDP);
  only_addresses.ai_src_addr = reinterpret_cast<sockaddr*>(&src);
  only_addresses.ai_src_len = sizeof src;
  only_addresses.ai_dst_addr = reinterpret_cast<sockaddr*>(&dst);
  only_addresses.ai_dst_len = sizeof dst;
  const Case cases[] = {
      {"127.0.0.1", "7471", false, {}},
      {"127.0.0.1", nullptr, false, {}},
      {nullptr, "7471", false, {}},
      {nullptr, "7471", true, hints_with(RAI_PASSIVE)},
      {"127.0.0.1", "7471", true, hints_with(RAI_PASSIVE)},
      {"127.0.0.1", "7174", true, hints_with(0, 0, 0, RDMA_PS_UDP)},
      {"127.0.0.1", "7174", true, hints_with(0, 0, 0, RDMA_PS_TCP)},
      {"127.0.0.1", "7174", true, hints_with(0, 0, 0, RDMA_PS_IB)},
      {"127.0.0.1", "7174", true, hints_with(0, 0, IBV_QPT_UD, RDMA_PS_IB)},
      {"127.0.0.1", "7174", true, hints_with(0, 0, 0, RDMA_PS_IPOIB)},
      {"127.0.0.1", "80", true, hints_with(0, 0, IBV_QPT_UD)},
      {"127.0.0.1", "80", true, hints_with(0, 0, IBV_QPT_UC)},
      {"127.0.0.1", "80", true, hints_with(0, 0, IBV_QPT_UD, RDMA_PS_TCP)},
      {"127.0.0.1", "7471", true, hints_with(0, 0, 0, 0x3f)},
      {"localhost", "7471", false, {}},
      {"localhost", "7471", true, hints_with(0, AF_INET)},
      {"localhost", nullptr, true, hints_with(RAI_NUMERICHOST)},
      {"::1", "7471", true, hints_with(RAI_NUMERICHOST)},
      {"::1", "7471", true, hints_with(RAI_NUMERICHOST | RAI_PASSIVE, AF_INET6)},
      {"127.0.0.1", "1", true, hints_with(0, AF_INET6)},
      {"::1", "1", true, hints_with(0, AF_INET)},
      {"no.such.host.invalid", nullptr, false, {}},
      {"127.0.0.1", "no-such-service-here", false, {}},
      {"127.0.0.1", "7471", true, hints_with(RAI_NOROUTE | RAI_FAMILY, AF_INET)},
      // A GID in AF_IB form: a struct sockaddr_ib with the port space's service id.
      {"fe80::1", "7471", true, hints_with(RAI_FAMILY | RAI_NUMERICHOST, AF_IB)},
      {"fe80::2", "7471", true, hints_with(RAI_PASSIVE | RAI_FAMILY | RAI_NUMERICHOST, AF_IB, 0, RDMA_PS_UDP)},
      {"fe80::3", nullptr, true, hints_with(RAI_FAMILY | RAI_NUMERICHOST, AF_IB, IBV_QPT_UD, RDMA_PS_IB)},
      {"127.0.0.1", "7471", true, with_src},
      {nullptr, nullptr, true, hints_with(RAI_PASSIVE, 0, IBV_QPT_RC)},
      {nullptr, nullptr, true, only_addresses},
      {nullptr, nullptr, false, {}},
  };
  for (const Case& c : cases) {
    const rdma_addrinfo* hints = c.has_hints ? &c.hints : nullptr;
    CAPTURE(c.node ? c.node : "(null)", c.service ? c.service : "(null)", c.has_hints, c.hints.ai_flags,
            c.hints.ai_family, c.hints.ai_qp_type, c.hints.ai_port_space);
    const std::string want = ask(theirs, their_free, c.node, c.service, hints);
    CHECK(ask(rdma_getaddrinfo, rdma_freeaddrinfo, c.node, c.service, hints) == want);
    // Each library's answer can be freed by the other's rdma_freeaddrinfo.
    CHECK(ask(rdma_getaddrinfo, their_free, c.node, c.service, hints) == want);
  }
}

TEST_CASE("rsocket functions are implemented: no ENOSYS, nothing on stderr", "[rdmacm]") {
  // rsocket_api_test.cpp tests them; here only that none is a stub that names itself.
  const std::string said = stderr_of([] {
    char buf[8];
    errno = 0;
    CHECK(rrecv(-1, buf, sizeof buf, 0) == -1);
    CHECK(errno == EBADF);  // no rsocket has that number
    errno = 0;
    CHECK(rfcntl(-1, F_GETFL) == -1);
    CHECK(errno == EBADF);
    errno = 0;
    CHECK(riowrite(-1, buf, sizeof buf, 0, 0) == static_cast<size_t>(-1));
    CHECK(errno == EBADF);
    CHECK(rpoll(nullptr, 0, 0) == 0);
    const int s = rsocket(AF_INET, SOCK_STREAM, 0);
    CHECK(s >= 0);
    if (s >= 0) CHECK(rclose(s) == 0);
  });
  CHECK(said.empty());
}

// rping's CM thread loops on rdma_get_cm_event while its main thread destroys the ID: an event
// taken off the channel for an ID being destroyed must still find the ID.
TEST_CASE("rdma_destroy_id waits for an event another thread is taking for the ID", "[rdmacm]") {
  rdma_event_channel* channel = rdma_create_event_channel();
  REQUIRE(channel != nullptr);
  REQUIRE(fcntl(channel->fd, F_SETFL, fcntl(channel->fd, F_GETFL) | O_NONBLOCK) == 0);
  std::atomic<bool> done{false};
  std::atomic<int> taken{0};
  std::thread reader([&] {
    while (!done.load()) {
      rdma_cm_event* event = nullptr;
      if (rdma_get_cm_event(channel, &event) != 0) continue;  // EAGAIN: none yet
      if (event->event == RDMA_CM_EVENT_ADDR_RESOLVED && event->id != nullptr) ++taken;
      rdma_ack_cm_event(event);
    }
  });
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  // At least 300 IDs, and on until the reader has taken some events: on a loaded machine it
  // may not be scheduled before the first destroys drop theirs.
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  for (int i = 0; i < 300 || (taken.load() == 0 && std::chrono::steady_clock::now() < give_up); ++i) {
    rdma_cm_id* id = nullptr;
    REQUIRE(rdma_create_id(channel, &id, nullptr, RDMA_PS_TCP) == 0);
    REQUIRE(rdma_resolve_addr(id, nullptr, reinterpret_cast<sockaddr*>(&to), 1000) == 0);  // queues ADDR_RESOLVED
    if (i % 2 == 1) std::this_thread::yield();  // lets the reader take the event as the destroy begins
    REQUIRE(rdma_destroy_id(id) == 0);
  }
  done.store(true);
  reader.join();
  CHECK(taken.load() > 0);  // the reader did take events of IDs being destroyed
  rdma_destroy_event_channel(channel);
}
