// rping's protocol (rdma-core's librdmacm/examples/rping.c) spoken by the engine's iWARP host
// directly, without the verbs shim: the engine-level peer of Linux siw's rping in the interop
// suite, and of itself on loopback. Per ping the client advertises its start buffer in a Send,
// the server RDMA Reads it and says go on, the client advertises its sink buffer, the server
// RDMA Writes the data back and says go on; the client compares, and with -v prints it.
#include <getopt.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <deque>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "emulator/host/iwarp_host.hpp"
#include "emulator/net/udp_gid.hpp"
#include "tests/iwarp_consumer_objects.hpp"

namespace {

namespace core = softrdma::core;
namespace host = softrdma::host;

struct Options {
  bool server = false;
  std::string address;  // server: where to listen; client: the server's
  std::string bind;     // client: our address (default: 127.0.0.1 for a loopback server)
  std::uint16_t port = 7174;
  unsigned count = 10;
  std::uint32_t size = 64;
  bool verbose = false;
  bool crc = false;
  unsigned settle_ms = 0;  // client: the pause between established and the first ping
  std::string capture;     // a pcap file for the connection; empty: none
  // Name a buffer by an STag that does not exist (client: the one it advertises; server: the
  // one it reads): the peer must end the connection with a Terminate, and that is success.
  bool bad_stag = false;
};

void usage(FILE* out) {
  std::fputs("usage: iwarp_rping -s|-c -a ADDRESS [-b BIND] [-p PORT] [-C COUNT] [-S SIZE] [-v] [--crc] [--settle MS]\n"
             "                   [--capture FILE] [--bad-stag]\n"
             "rping's protocol over softrdma's engine-level iWARP host (no verbs shim).\n"
             "  -s / -c      server / client\n"
             "  -a ADDRESS   server: the address to listen on; client: the server's\n"
             "  -b BIND      client: the local address (default 127.0.0.1)\n"
             "  -p PORT      TCP port (default 7174, rping's)\n"
             "  -C COUNT     pings (client; default 10)\n"
             "  -S SIZE      ping size in bytes (default 64)\n"
             "  -v           print each ping's data\n"
             "  --crc        ask for MPA CRCs\n"
             "  --settle MS  client: wait MS after the connection is up before the first ping\n"
             "  --capture FILE  write the connection to FILE (pcap)\n"
             "  --bad-stag   advertise (client) or read (server) an STag that does not exist, and\n"
             "               succeed when the connection ends with the Terminate that calls for\n",
             out);
}

// struct rping_rdma_info: a buffer's address, rkey and size, big-endian.
struct BufferInfo {
  std::uint64_t addr = 0;
  std::uint32_t rkey = 0, size = 0;
  void write(std::uint8_t* p) const {
    for (int i = 0; i < 8; ++i) p[i] = static_cast<std::uint8_t>(addr >> (56 - 8 * i));
    for (int i = 0; i < 4; ++i) p[8 + i] = static_cast<std::uint8_t>(rkey >> (24 - 8 * i));
    for (int i = 0; i < 4; ++i) p[12 + i] = static_cast<std::uint8_t>(size >> (24 - 8 * i));
  }
  static BufferInfo read(const std::uint8_t* p) {
    BufferInfo b;
    for (int i = 0; i < 8; ++i) b.addr = b.addr << 8 | p[i];
    for (int i = 0; i < 4; ++i) b.rkey = b.rkey << 8 | p[8 + i];
    for (int i = 0; i < 4; ++i) b.size = b.size << 8 | p[12 + i];
    return b;
  }
};
constexpr std::uint32_t kInfoLength = 16;
constexpr std::uint32_t kMissingStag = 0x00ABCD00;  // no region has it: ours start at index 1

// A work completion with an error status other than a flush.
struct WcFailed : std::runtime_error {
  explicit WcFailed(core::WcStatus s)
      : std::runtime_error("work completion failed with status " + std::to_string(static_cast<int>(s))), status(s) {}
  core::WcStatus status;
};

class Peer {
 public:
  explicit Peer(const Options& o, const std::string& our_address) : o_(o), memory_(3 * o.size + 2 * kInfoLength) {
    host::IwarpHostConfig config;
    config.ip = our_address;
    if (!o.capture.empty()) config.capture_path = o.capture;
    auto started = host::IwarpHost::start(config);
    if (!started.host) throw std::runtime_error(started.error);
    host_ = std::move(started.host);
    host_->set_event_handler([this](const core::IwarpEvent& e) {
      std::lock_guard lock(mutex_);
      events_.push_back(e);
      changed_.notify_all();
    });
    host_->call([this](core::Device& d, core::IwarpConnectionManager&) { create_objects(d); });
  }

  std::uint8_t* start_buf() { return memory_.data(); }
  std::uint8_t* rdma_buf() { return memory_.data() + o_.size; }
  std::uint8_t* send_buf() { return memory_.data() + 2 * o_.size; }
  std::uint8_t* recv_buf() { return send_buf() + kInfoLength; }
  std::uint64_t addr(const std::uint8_t* p) const { return reinterpret_cast<std::uint64_t>(p); }

  core::IwarpEvent wait_event() {
    std::unique_lock lock(mutex_);
    if (!changed_.wait_for(lock, std::chrono::seconds(30), [&] { return !events_.empty(); }))
      throw std::runtime_error("no rdma_cm event within 30 s");
    core::IwarpEvent e = events_.front();
    events_.pop_front();
    return e;
  }

  // Waits for the next completion; a failed one, or a disconnect, ends the run.
  core::Wc wait_wc() {
    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    core::Wc wc;
    while (host_->poll_cq(cq_, {&wc, 1}) != 1) {
      if (std::chrono::steady_clock::now() > end) throw std::runtime_error("no completion within 30 s");
      std::unique_lock lock(mutex_);
      if (!events_.empty() && events_.front().type == core::IwarpEventType::disconnected) throw Disconnected{};
      changed_.wait_for(lock, std::chrono::microseconds(50));
    }
    if (wc.status == core::WcStatus::wr_flush_err) throw Disconnected{};  // as rping: the QP ended
    if (wc.status != core::WcStatus::success) throw WcFailed(wc.status);
    return wc;
  }

  void post_recv() {
    core::RecvWr r;
    r.sg_list = {{addr(recv_buf()), kInfoLength, mr_.lkey}};
    call_ok([&](core::Device& d) { return d.post_recv(qpn_, r); }, "post_recv");
  }

  void post(core::WrOpcode op, std::uint8_t* local, std::uint32_t length, const BufferInfo& remote = {}) {
    core::SendWr w;
    w.opcode = op;
    w.flags = core::send_flags::signaled;
    w.sg_list = {{addr(local), length, mr_.lkey}};
    w.remote_addr = remote.addr;
    w.rkey = remote.rkey;
    call_ok([&](core::Device& d) { return d.post_send(0, qpn_, w); }, "post_send");
  }

  void advertise(std::uint8_t* buffer) {
    BufferInfo{addr(buffer), o_.bad_stag ? kMissingStag : mr_.rkey, o_.size}.write(send_buf());
    post(core::WrOpcode::send, send_buf(), kInfoLength);
  }

  core::MpaOffer offer() const {
    core::MpaOffer m;  // rping's conn_param: responder_resources 1, initiator_depth 1
    m.crc = o_.crc;
    return m;
  }

  host::IwarpHost& host() { return *host_; }
  std::uint32_t qpn() const { return qpn_; }
  struct Disconnected {};

 private:
  void create_objects(core::Device& d) {
    const test::IwarpConsumerObjects o = test::create_consumer_objects(d, memory_, 16, {16, 16, 1, 1, 0});
    cq_ = o.cq;
    qpn_ = o.qpn;
    mr_ = o.mr;
  }

  template <class F>
  void call_ok(F&& f, const char* what) {
    const int err = host_->call([&](core::Device& d, core::IwarpConnectionManager&) { return f(d); });
    if (err) throw std::runtime_error(std::string(what) + ": " + std::strerror(err));
  }

  Options o_;
  std::vector<std::uint8_t> memory_;
  std::uint32_t cq_ = 0, qpn_ = 0;
  core::MrKeys mr_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<core::IwarpEvent> events_;
  // Last, so it is destroyed first: its thread delivers events into the members above until it stops.
  std::unique_ptr<host::IwarpHost> host_;
};

core::TcpEndpoint endpoint(const std::string& address, std::uint16_t port) {
  const auto gid = softrdma::net::parse_gid(address);
  if (!gid) throw std::runtime_error("'" + address + "' is not an IPv4 or IPv6 address");
  return {*gid, port};
}

void expect(const core::IwarpEvent& e, core::IwarpEventType type, const char* what) {
  if (e.type != type)
    throw std::runtime_error(std::string("expected ") + what + ", got event " +
                             std::to_string(static_cast<int>(e.type)) + " (status " + std::to_string(e.status) + ")");
}

int run_server(const Options& o) {
  Peer p(o, o.address);
  const auto listener = p.host().listen(endpoint(o.address, o.port));
  if (!listener) throw std::runtime_error(std::string("listen: ") + std::strerror(listener.error()));
  const core::IwarpEvent request = p.wait_event();
  expect(request, core::IwarpEventType::connect_request, "a connect request");
  p.post_recv();
  const int err = p.host().call(
      [&](core::Device&, core::IwarpConnectionManager& cm) { return cm.accept(request.id, p.qpn(), p.offer()); });
  if (err) throw std::runtime_error(std::string("accept: ") + std::strerror(err));
  expect(p.wait_event(), core::IwarpEventType::established, "established");
  try {
    for (;;) {
      p.wait_wc();  // the client's start buffer
      const BufferInfo start = BufferInfo::read(p.recv_buf());
      if (start.size > o.size) throw std::runtime_error("the client's buffer is larger than -S");
      p.post_recv();
      BufferInfo source = start;
      if (o.bad_stag) source.rkey = kMissingStag;
      p.post(core::WrOpcode::rdma_read, p.rdma_buf(), start.size, source);
      p.wait_wc();
      if (o.verbose) std::printf("server ping data: %s\n", reinterpret_cast<const char*>(p.rdma_buf()));
      p.post(core::WrOpcode::send, p.send_buf(), kInfoLength);  // go on
      p.wait_wc();
      p.wait_wc();  // the client's sink buffer
      const BufferInfo sink = BufferInfo::read(p.recv_buf());
      p.post_recv();
      const auto length = static_cast<std::uint32_t>(strnlen(reinterpret_cast<const char*>(p.rdma_buf()), o.size) + 1);
      p.post(core::WrOpcode::rdma_write, p.rdma_buf(), std::min(length, sink.size), sink);
      p.wait_wc();
      p.post(core::WrOpcode::send, p.send_buf(), kInfoLength);  // go on
      p.wait_wc();
    }
  } catch (const Peer::Disconnected&) {
    std::printf("server DISCONNECT EVENT...\n");
  }
  return 0;
}

// rping's ping text: "rdma-ping-N: " then letters from a rotating start, NUL-terminated.
void format_ping(std::uint8_t* buf, std::uint32_t size, unsigned ping) {
  const int n = std::snprintf(reinterpret_cast<char*>(buf), size, "rdma-ping-%u: ", ping);
  for (std::uint32_t i = static_cast<std::uint32_t>(n); i + 1 < size; ++i)
    buf[i] = static_cast<std::uint8_t>(' ' + 33 + (ping + i - n) % 62);
  buf[size - 1] = 0;
}

int run_client(const Options& o) {
  Peer p(o, o.bind.empty() ? "127.0.0.1" : o.bind);
  p.post_recv();
  const auto id = p.host().call([&](core::Device&, core::IwarpConnectionManager& cm) {
    return cm.connect(endpoint(o.address, o.port), p.qpn(), p.offer());
  });
  if (!id) throw std::runtime_error(std::string("connect: ") + std::strerror(id.error()));
  expect(p.wait_event(), core::IwarpEventType::established, "established");
  std::this_thread::sleep_for(std::chrono::milliseconds(o.settle_ms));
  for (unsigned ping = 0; ping < o.count; ++ping) {
    format_ping(p.start_buf(), o.size, ping);
    std::memset(p.rdma_buf(), 0, o.size);
    p.advertise(p.start_buf());
    p.wait_wc();  // our Send
    p.wait_wc();  // the server's go on
    p.post_recv();
    p.advertise(p.rdma_buf());
    p.wait_wc();
    p.wait_wc();  // the server's go on: its RDMA Write is in
    p.post_recv();
    if (std::memcmp(p.start_buf(), p.rdma_buf(), o.size) != 0) throw std::runtime_error("data mismatch");
    if (o.verbose) std::printf("ping data: %s\n", reinterpret_cast<const char*>(p.rdma_buf()));
  }
  if (o.bad_stag) throw std::runtime_error("the server read an STag that does not exist without complaint");
  p.host().call([&](core::Device&, core::IwarpConnectionManager& cm) { return cm.disconnect(*id); });
  expect(p.wait_event(), core::IwarpEventType::disconnected, "disconnected");
  return 0;
}

// Reads the command line into `o`; an exit status when the program is to end now.
std::optional<int> parse(int argc, char** argv, Options& o) {
  bool client = false;
  static const option long_options[] = {
      {"crc", no_argument, nullptr, 'r'},           {"settle", required_argument, nullptr, 't'},
      {"capture", required_argument, nullptr, 'w'}, {"bad-stag", no_argument, nullptr, 'x'},
      {"help", no_argument, nullptr, 'h'},          {}};
  const auto number = [](const char* text) -> unsigned {
    char* end = nullptr;
    const unsigned long n = std::strtoul(text, &end, 10);
    if (*text == '\0' || *end != '\0' || n > 0xFFFFFFFFul) throw std::invalid_argument(text);
    return static_cast<unsigned>(n);
  };
  try {
    for (int c; (c = getopt_long(argc, argv, "sca:b:p:C:S:vh", long_options, nullptr)) != -1;) {
      if (c == 's')
        o.server = true;
      else if (c == 'c')
        client = true;
      else if (c == 'a')
        o.address = optarg;
      else if (c == 'b')
        o.bind = optarg;
      else if (c == 'p')
        o.port = static_cast<std::uint16_t>(number(optarg));
      else if (c == 'C')
        o.count = number(optarg);
      else if (c == 'S')
        o.size = number(optarg);
      else if (c == 'v')
        o.verbose = true;
      else if (c == 'r')
        o.crc = true;
      else if (c == 'x')
        o.bad_stag = true;
      else if (c == 'w')
        o.capture = optarg;
      else if (c == 't')
        o.settle_ms = number(optarg);
      else if (c == 'h')
        return usage(stdout), 0;
      else
        return usage(stderr), 2;
    }
  } catch (const std::invalid_argument& e) {
    std::fprintf(stderr, "iwarp_rping: '%s' is not a number (see --help)\n", e.what());
    return 2;
  }
  if (o.server == client || o.address.empty() || o.size < 16) {
    std::fprintf(stderr, "iwarp_rping: give -s or -c, -a ADDRESS, and -S of at least 16 (see --help)\n");
    return 2;
  }
  return std::nullopt;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  if (const auto status = parse(argc, argv, o)) return *status;
  try {
    return o.server ? run_server(o) : run_client(o);
  } catch (const WcFailed& e) {
    // The server's RDMA Read of a missing STag: the peer's Terminate fails it (RFC 5040 s7.4).
    if (o.bad_stag && o.server && e.status == core::WcStatus::rem_access_err) {
      std::printf("RDMA Read refused with a remote access error: the peer's Terminate, as --bad-stag expects\n");
      return 0;
    }
    std::fprintf(stderr, "iwarp_rping: %s\n", e.what());
    return 1;
  } catch (const Peer::Disconnected&) {
    // The client advertised a missing STag: our Terminate to the server's Read ends the QP.
    if (o.bad_stag && !o.server) {
      std::printf("the connection ended with our Terminate, as --bad-stag expects\n");
      return 0;
    }
    std::fprintf(stderr, "iwarp_rping: the connection ended early\n");
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "iwarp_rping: %s\n", e.what());
    return 1;
  }
}
