#include "emulator/host/iwarp_host.hpp"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "emulator/net/udp_gid.hpp"

namespace softrdma::host {
namespace {

// What one connection may hold taken from the engine and not yet accepted by the kernel: the
// rest waits in the QP's send queue, so a slow reader costs no more memory than this.
constexpr std::size_t kOutCap = 256 * 1024;
// Several FPDUs of the largest size at once: reads end on FPDU boundaries (receive()), and the
// FPDUs whole in one are placed from it without another copy.
constexpr std::size_t kReadChunk = 256 * 1024;
constexpr int kFlushRounds = 4;

}  // namespace

IwarpHostStart IwarpHost::start(IwarpHostConfig config) {
  IwarpHostStart s;
  const auto gid = net::parse_gid(config.ip);
  if (!gid) {
    s.error = "iWARP device: '" + config.ip + "' is not an IPv4 or IPv6 address";
    return s;
  }
  config.device.gids = {*gid};
  config.device.iwarp = true;
  std::unique_ptr<IwarpHost> host(new IwarpHost(config, *gid));
  if (host->wake_fd_.get() < 0) {
    s.error = "iWARP device: eventfd failed";
    return s;
  }
  host->cm_.require_crc(config.mpa_crc);
  if (config.faults && IwarpFaults::applies(*config.faults)) host->faults_.emplace(*config.faults);
  host->capture_ = config.shared_capture;
  if (config.capture_path) {
    net::CaptureOpen capture = net::CaptureStage::open(*config.capture_path);
    if (!capture.stage) {
      s.error = "iWARP device: " + capture.error;
      return s;
    }
    host->own_capture_ = std::move(capture.stage);
    host->capture_ = host->own_capture_.get();
  }
  host->thread_ = std::thread([h = host.get()] { h->run(); });
  s.host = std::move(host);
  return s;
}

IwarpHost::IwarpHost(const IwarpHostConfig& config, core::Gid gid)
    : memory_(config.memory ? *config.memory : local_memory_),
      gid_(gid),
      address_(config.ip),
      device_(config.device, memory_),
      cm_(device_),
      read_buffer_(kReadChunk),
      wake_fd_(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) {}

IwarpHost::~IwarpHost() {
  stopping_ = true;
  kick();
  if (thread_.joinable()) thread_.join();
}

core::Expected<std::uint32_t> IwarpHost::listen(const core::TcpEndpoint& local,
                                                const std::function<void(std::uint32_t)>& opened) {
  std::lock_guard lock(mutex_);
  const auto id = cm_.listen(local);
  if (!id) return id;
  carry_out_actions();
  const auto refused = listen_errors_.find(*id);
  if (refused == listen_errors_.end()) {
    if (opened) opened(*id);
    kick();  // a new socket to poll
    return id;
  }
  const int error = refused->second;
  listen_errors_.erase(refused);
  cm_.stop_listening(*id);
  carry_out_actions();
  return core::Expected<std::uint32_t>::error(error);
}

int IwarpHost::poll_cq(std::uint32_t cq, std::span<core::Wc> out) {
  {
    const std::unique_lock lock = lock_for_call();
    const int n = device_.poll_cq(cq, out);
    if (n != 0) return n;
    if (!read_and_write_held_back()) {
      lease_.empty_poll(steady_now());
      return 0;
    }
    after_call();
  }
  events_.deliver();
  std::lock_guard lock(mutex_);
  return device_.poll_cq(cq, out);
}

int IwarpHost::req_notify_cq(std::uint32_t cq, bool solicited_only) {
  const core::Time now = steady_now();
  arming_.armed(now);
  // From now on the progress thread receives: wake it if it sleeps off the connections' bytes.
  if (lease_.end(now)) kick();
  return call([&](core::Device& d, core::Time) { return d.req_notify_cq(cq, solicited_only); });
}

int IwarpHost::destroy_qp(std::uint32_t qpn) {
  return call([&](core::Device& d, core::Time) { return d.destroy_qp(qpn); });
}

std::unique_lock<SpinningMutex> IwarpHost::lock_for_call() { return mutex_.lock_for(arming_, steady_now()); }

bool IwarpHost::read_and_write_held_back() {
  bool acted = false;
  for (auto& [id, c] : connections_) {
    if (c.connecting) continue;
    if (c.holds_back()) acted |= flush(id, c);
    acted |= read_fpdus(id, c);
  }
  return acted;
}

void IwarpHost::set_event_handler(IwarpEventHandler handler) {
  std::lock_guard lock(handler_mutex_);
  handler_ = std::move(handler);
}

void IwarpHost::set_event_handlers(CqEventHandler on_cq, AsyncEventHandler on_async) {
  events_.set_handlers(std::move(on_cq), std::move(on_async));
}

void IwarpHost::set_completion_sink(std::function<void(core::Device&)> sink) {
  std::lock_guard lock(mutex_);
  completion_sink_ = std::move(sink);
}

net::FaultCounters IwarpHost::fault_counters() {
  std::lock_guard lock(mutex_);
  return faults_ ? faults_->counters() : net::FaultCounters{};
}

void IwarpHost::after_call() {
  // The progress thread looks again only for what it must do: poll sockets the call opened or
  // closed, wait for room in a full one, deliver events. A poll_cq that found nothing wakes
  // no one: an application spinning on its CQ would otherwise keep both threads busy.
  if (settle()) kick();
}

bool IwarpHost::settle() {
  bool acted = false;
  // Writing can end a stream (a Terminate is its last FPDU), which asks for its close.
  do {
    acted |= carry_out_actions();
  } while (write_ready());
  carry_out_resets();
  take_events();
  // A connection holding bytes back needs the thread to wait for room (or for a delayed
  // FPDU's time), once.
  const bool newly_held_back = std::any_of(connections_.begin(), connections_.end(), [](const auto& entry) {
    const Connection& c = entry.second;
    return (c.holds_back() || !c.held.empty()) && !c.room_awaited;
  });
  return acted || newly_held_back || !pending_events_.empty();
}

bool IwarpHost::carry_out_actions() {
  using Kind = core::TcpAction::Kind;
  bool any = false;
  while (const auto a = cm_.next_action()) {
    any = true;
    switch (a->kind) {
      case Kind::listen: {
        net::SocketResult r = net::listen_tcp(a->endpoint);
        if (r.error)
          listen_errors_[a->handle] = r.error;
        else
          listeners_[a->handle] = std::move(r.fd);
        break;
      }
      case Kind::stop_listening:
        listeners_.erase(a->handle);
        break;
      case Kind::connect: {
        net::SocketResult r = net::connect_tcp(gid_, a->endpoint);
        if (r.error) {
          cm_.tcp_failed(a->handle, r.error);
          break;
        }
        Connection c;
        c.fd = std::move(r.fd);
        c.connecting = true;
        connections_[a->handle] = std::move(c);
        break;
      }
      case Kind::close: {
        const auto it = connections_.find(a->handle);
        if (it == connections_.end()) break;
        it->second.closing = true;
        flush(a->handle, it->second);
        break;
      }
    }
  }
  return any;
}

bool IwarpHost::write_ready() {
  bool any = false;
  while (const auto id = cm_.next_ready()) {
    const auto it = connections_.find(*id);
    if (it != connections_.end()) any |= flush(*id, it->second);
  }
  return any;
}

// Takes the CM's bytes for `c` while there is room, and writes what the kernel accepts. A
// closing connection sends its FIN once everything is out; it stays open for reading until
// the peer's FIN, so that data in flight towards us does not turn the close into a reset.
bool IwarpHost::flush(std::uint32_t id, Connection& c) {
  if (c.connecting) return false;
  if (!c.held.empty()) release_held(c, steady_now());
  bool pulled = false;
  // While the kernel takes all we give it, pull again; a few rounds at most, so that one call
  // does not hold the lock for a whole transfer (the progress thread goes on at POLLOUT).
  for (int round = 0; round < kFlushRounds; ++round) {
    pulled |= pull(id, c);
    if (!write_out(c) || !c.pull_more) break;
  }
  if (c.closing && !c.holds_back() && c.held.empty() && !c.resetting) {
    ::shutdown(c.fd.get(), SHUT_WR);
    if (c.capture) c.capture->close(net::CaptureStage::wall_clock_ns(), net::TcpSide::local);
  }
  return pulled;
}

// Takes the CM's bytes while the buffer has room. pull_more says whether the CM may have more:
// only its "nothing" clears it.
bool IwarpHost::pull(std::uint32_t id, Connection& c) {
  // What the kernel took goes once it is most of the buffer: a partial send moves nothing.
  if (c.out_sent >= kOutCap / 2) {
    c.out.erase_front(c.out_sent);
    c.out_sent = 0;
  }
  bool pulled = false;
  while (!c.resetting && c.out.size() - c.out_sent + c.held_bytes < kOutCap) {
    const bool fpdu = faults_ && cm_.carries_fpdus(id);
    const std::size_t at = c.out.size();
    c.pull_more = cm_.tcp_transmit(id, c.out);
    if (!c.pull_more) break;
    pulled = true;
    if (fpdu && !apply_faults(id, c, at)) break;
  }
  return pulled;
}

bool IwarpHost::apply_faults(std::uint32_t id, Connection& c, std::size_t at) {
  const IwarpFaults::Verdict v = faults_->next({c.out.data() + at, c.out.size() - at});
  if (v.reset) {
    c.out.resize(at);
    c.resetting = true;
    c.pull_more = false;
    resets_.push_back(id);
    return false;
  }
  if (v.delay == 0 && c.held.empty()) return true;
  // Held back, and every FPDU after it too: TCP keeps their order.
  const core::Time due = std::max(steady_now() + v.delay, c.held.empty() ? 0 : c.held.back().due);
  c.held.push_back({due, core::UninitialisedBytes(c.out.begin() + at, c.out.end())});
  c.held_bytes += c.out.size() - at;
  c.out.resize(at);
  return true;
}

void IwarpHost::release_held(Connection& c, core::Time now) {
  while (!c.held.empty() && c.held.front().due <= now) {
    const core::UninitialisedBytes& b = c.held.front().bytes;
    c.out.append(b.begin(), b.end());
    c.held_bytes -= b.size();
    c.held.pop_front();
  }
}

void IwarpHost::release_due() {
  const core::Time now = steady_now();
  for (auto& [id, c] : connections_)
    if (!c.held.empty() && c.held.front().due <= now) flush(id, c);
}

std::optional<core::Time> IwarpHost::next_due() const {
  std::optional<core::Time> next;
  for (const auto& [id, c] : connections_)
    if (!c.held.empty() && (!next || c.held.front().due < *next)) next = c.held.front().due;
  return next;
}

// A reset (SO_LINGER 0, then close) in place of an FPDU: the peer's reads fail with
// ECONNRESET, and both QPs end as when a peer vanishes.
void IwarpHost::carry_out_resets() {
  for (const std::uint32_t id : resets_) {
    const auto it = connections_.find(id);
    if (it == connections_.end()) continue;
    Connection& c = it->second;
    const linger abort{1, 0};
    ::setsockopt(c.fd.get(), SOL_SOCKET, SO_LINGER, &abort, sizeof abort);
    if (c.capture) c.capture->reset(net::CaptureStage::wall_clock_ns(), net::TcpSide::local);
    cm_.tcp_closed(id);
    connections_.erase(it);
  }
  resets_.clear();
}

// Writes what the kernel takes; whether it took everything.
bool IwarpHost::write_out(Connection& c) {
  std::size_t& sent = c.out_sent;
  while (sent < c.out.size()) {
    const ssize_t n = ::send(c.fd.get(), c.out.data() + sent, c.out.size() - sent, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n <= 0) break;
    if (c.capture)
      c.capture->data(net::CaptureStage::wall_clock_ns(), net::TcpSide::local,
                      {c.out.data() + sent, static_cast<std::size_t>(n)});
    sent += static_cast<std::size_t>(n);
  }
  if (sent < c.out.size()) return false;
  c.out.clear();
  sent = 0;
  return true;
}

ssize_t IwarpHost::receive(std::uint32_t id, Connection& c) {
  const std::size_t boundary = cm_.bytes_to_boundary(id);
  const std::size_t want = boundary ? std::min(boundary, read_buffer_.size()) : read_buffer_.size();
  const ssize_t n = ::recv(c.fd.get(), read_buffer_.data(), want, MSG_DONTWAIT);
  if (n <= 0) return n;
  const std::span<const std::uint8_t> bytes(read_buffer_.data(), static_cast<std::size_t>(n));
  if (c.capture) c.capture->data(net::CaptureStage::wall_clock_ns(), net::TcpSide::remote, bytes);
  cm_.tcp_received(id, bytes);
  return n;
}

bool IwarpHost::read_fpdus(std::uint32_t id, Connection& c) {
  bool any = false;
  while (cm_.carries_fpdus(id) && receive(id, c) > 0) any = true;
  return any;
}

void IwarpHost::read(std::uint32_t id, Connection& c) {
  ssize_t n;
  while ((n = receive(id, c)) > 0) {
  }
  if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
  // The peer's FIN, or a reset: the connection is over.
  if (c.capture) {
    const std::uint64_t now = net::CaptureStage::wall_clock_ns();
    n == 0 ? c.capture->close(now, net::TcpSide::remote) : c.capture->reset(now, net::TcpSide::remote);
  }
  cm_.tcp_closed(id);
  connections_.erase(id);
}

void IwarpHost::accept_all(std::uint32_t listener, int fd) {
  while (auto s = net::accept_tcp(fd)) {
    const int raw = s->get();
    const std::uint32_t id =
        cm_.tcp_accepted(listener, net::local_endpoint(raw), net::remote_endpoint(raw), net::segment_size(raw));
    Connection c;
    c.fd = std::move(*s);
    capture_open(c, net::TcpSide::remote);
    connections_[id] = std::move(c);
  }
}

void IwarpHost::finish_connect(std::uint32_t id, Connection& c) {
  c.connecting = false;
  if (const int error = net::connect_error(c.fd.get())) {
    cm_.tcp_failed(id, error);
    connections_.erase(id);
    return;
  }
  capture_open(c, net::TcpSide::local);
  cm_.tcp_connected(id, net::local_endpoint(c.fd.get()), net::segment_size(c.fd.get()));
}

void IwarpHost::capture_open(Connection& c, net::TcpSide opener) {
  if (capture_ == nullptr) return;
  const core::TcpEndpoint local = net::local_endpoint(c.fd.get()), remote = net::remote_endpoint(c.fd.get());
  net::TcpCaptureOptions options;
  options.mss = static_cast<std::uint16_t>(
      std::min<std::uint32_t>(net::segment_size(c.fd.get()), net::TcpStreamCapture::kMaxMss));
  c.capture = std::make_unique<net::TcpStreamCapture>(
      net::TcpConnectionEnds{local.address, remote.address, local.port, remote.port, opener},
      [this](std::uint64_t t, std::span<const std::uint8_t> frame) { capture_->record_frame(t, frame); }, options);
  c.capture->open(net::CaptureStage::wall_clock_ns());
}

void IwarpHost::take_events() {
  while (auto e = cm_.next_event()) pending_events_.push_back(std::move(*e));
  memory_.flush();  // before completions and events reach the application
  if (completion_sink_) {
    completion_sink_(device_);
  } else {
    device_.take_completed_cqs(completed_cqs_);
    completed_cqs_.clear();
  }
  while (const auto cq = device_.next_cq_event()) events_.push(*cq);
  while (const auto event = device_.next_async_event()) events_.push(*event);
}

void IwarpHost::deliver() {
  std::vector<core::IwarpEvent> events;
  {
    std::lock_guard lock(mutex_);
    events.swap(pending_events_);
  }
  {
    std::lock_guard lock(handler_mutex_);
    for (const auto& e : events)
      if (handler_) handler_(e);
  }
  events_.deliver();
}

void IwarpHost::kick() {
  const std::uint64_t one = 1;
  [[maybe_unused]] const ssize_t n = ::write(wake_fd_.get(), &one, sizeof one);
}

// Owners: 0 for the eventfd, a listener's handle with its top bit set, or a connection's ID.
constexpr std::uint32_t kListenerBit = 0x80000000u;

void IwarpHost::service(const std::vector<pollfd>& fds, const std::vector<std::uint32_t>& owners) {
  for (std::size_t i = 1; i < fds.size(); ++i) {
    if (!fds[i].revents) continue;
    if (owners[i] & kListenerBit) {
      const std::uint32_t listener = owners[i] & ~kListenerBit;
      if (listeners_.count(listener)) accept_all(listener, fds[i].fd);
      continue;
    }
    const auto it = connections_.find(owners[i]);
    if (it == connections_.end()) continue;
    Connection& c = it->second;
    if (c.connecting) {
      finish_connect(owners[i], c);
      continue;
    }
    if (fds[i].revents & POLLOUT) flush(owners[i], c);
    if (fds[i].revents & (POLLIN | POLLRDHUP | POLLHUP | POLLERR)) read(owners[i], c);
  }
}

void IwarpHost::run() {
  std::vector<pollfd> fds;
  std::vector<std::uint32_t> owners;
  while (!stopping_) {
    fds.assign(1, pollfd{wake_fd_.get(), POLLIN, 0});
    owners.assign(1, 0);
    std::optional<core::Time> due;  // of the first delayed FPDU, or the busy-poll lease's end
    {
      std::lock_guard lock(mutex_);
      settle();
      due = next_due();
      const core::Time lease_end = lease_.until();
      const bool leased = steady_now() < lease_end;
      if (leased) due = std::min(due.value_or(lease_end), lease_end);
      for (const auto& [handle, fd] : listeners_) {
        fds.push_back({fd.get(), POLLIN, 0});
        owners.push_back(handle | kListenerBit);
      }
      for (auto& [id, c] : connections_) {
        const bool wants_out = c.connecting || c.holds_back();
        c.room_awaited = wants_out || !c.held.empty();
        // In a lease only its end: the peer's FIN (POLLRDHUP); the application reads the FPDUs.
        const short in = leased && cm_.carries_fpdus(id) ? POLLRDHUP : POLLIN;
        fds.push_back({c.fd.get(), static_cast<short>(in | (wants_out ? POLLOUT : 0)), 0});
        owners.push_back(id);
      }
    }
    deliver();
    timespec wait{};
    if (due) {
      const core::Time now = steady_now(), left = *due > now ? *due - now : 0;
      wait = to_timespec(left);
    }
    if (::ppoll(fds.data(), fds.size(), due ? &wait : nullptr, nullptr) < 0) continue;
    if (fds[0].revents) {
      std::uint64_t count = 0;
      [[maybe_unused]] const ssize_t n = ::read(wake_fd_.get(), &count, sizeof count);
    }
    std::lock_guard lock(mutex_);
    service(fds, owners);
    release_due();
  }
}

}  // namespace softrdma::host
