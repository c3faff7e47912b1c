#include "emulator/host/daemon_server.hpp"

#include <poll.h>
#include <pthread.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "emulator/host/daemon_protocol.hpp"
#include "emulator/host/daemon_socket.hpp"
#include "emulator/host/iwarp_link.hpp"
#include "emulator/host/short_slice.hpp"

namespace softrdma::host {

using daemon::Op;
using daemon::Reader;
using daemon::Writer;

namespace {

// Passes of pull() over the rings: a chain of posts, each made after the one before it by
// another client, longer than this in one pull is left to the next.
constexpr int kMaxPullPasses = 8;

std::string errno_text(const std::string& what) { return what + ": " + std::strerror(errno); }

// The socket file at `path`, bound and listening: a stale file (no one accepts on it) is
// replaced; a live one means another daemon serves that path.
int listen_at(const std::string& path, std::optional<gid_t> group, std::string& error) {
  sockaddr_un addr{};
  if (path.empty() || path.size() >= sizeof addr.sun_path) {
    error = "socket path '" + path + "' is empty or longer than " + std::to_string(sizeof addr.sun_path - 1) + " bytes";
    return -1;
  }
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  if (const int probe = connect_daemon_socket(path); probe >= 0) {
    ::close(probe);
    error = "another softrdmad is serving " + path;
    return -1;
  }
  ::unlink(path.c_str());
  const int fd = ::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    error = errno_text("socket");
    return -1;
  }
  // The socket file's mode is the gate (connect needs write permission): the daemon's user,
  // and the group when one is configured. It is set after bind and before listen, so no one can
  // connect in between, and without touching the process's umask, which other threads share.
  if (::bind(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0) {
    error = errno_text("cannot listen on " + path);
    ::close(fd);
    return -1;
  }
  // From here on the file is ours: a failure removes it with the socket.
  const auto give_up = [&](std::string why) {
    error = std::move(why);
    ::close(fd);
    ::unlink(path.c_str());
    return -1;
  };
  if (::chmod(path.c_str(), group ? 0660 : 0600) != 0) return give_up(errno_text("cannot set the mode of " + path));
  if (group && ::chown(path.c_str(), static_cast<uid_t>(-1), *group) != 0) {
    return give_up(errno_text("cannot give " + path + " to group " + std::to_string(*group)) +
                   " (a daemon without CAP_CHOWN must be a member of the group)");
  }
  if (::listen(fd, 64) != 0) return give_up(errno_text("cannot listen on " + path));
  return fd;
}

template <class Set>
bool contains(const Set& set, std::uint32_t key) {
  return set.find(key) != set.end();
}

}  // namespace

DaemonStart DaemonServer::start(EmbeddedHost& host, ProcessMemory& memory, DaemonOptions options) {
  return start(Host(&host), memory, std::move(options));
}

DaemonStart DaemonServer::start(IwarpHost& host, ProcessMemory& memory, DaemonOptions options) {
  return start(Host(&host), memory, std::move(options));
}

DaemonStart DaemonServer::start(Host host, ProcessMemory& memory, DaemonOptions options) {
  std::string error;
  const int listen_fd = listen_at(options.socket_path, options.group, error);
  if (listen_fd < 0) return {nullptr, error};
  const int stop_fd = ::eventfd(0, EFD_CLOEXEC);
  if (stop_fd < 0) {
    ::close(listen_fd);
    return {nullptr, errno_text("eventfd")};
  }
  std::unique_ptr<DaemonServer> server(new DaemonServer(host, memory, std::move(options), listen_fd, stop_fd));
  if (!server->outbox_.ok()) return {nullptr, errno_text("eventfd")};  // ~DaemonServer removes the socket
  server->accept_thread_ = std::thread([s = server.get()] { s->accept_loop(); });
  return {std::move(server), {}};
}

namespace {

std::unique_ptr<DeviceLink> link_over(EmbeddedHost* host) { return std::make_unique<EmbeddedLink>(*host); }
std::unique_ptr<DeviceLink> link_over(IwarpHost* host) { return std::make_unique<IwarpLink>(*host); }

}  // namespace

DaemonServer::DaemonServer(Host host, ProcessMemory& memory, DaemonOptions options, int listen_fd, int stop_fd)
    : host_(host),
      memory_(memory),
      link_(std::visit([](auto* h) { return link_over(h); }, host)),
      options_(std::move(options)),
      listen_fd_(listen_fd),
      stop_fd_(stop_fd) {
  set_host_handlers(true);
}

void DaemonServer::set_host_handlers(bool on) {
  std::visit(
      [&](auto* h) {
        if (on) {
          h->set_event_handlers([this](std::uint32_t cq) { send_event(cq); },
                                [this](const core::AsyncEvent& e) { send_event(e); });
          h->set_completion_sink([this](core::Device& d) { fill_rings(d); });
        } else {
          h->set_event_handlers(nullptr, nullptr);  // the host may outlive this server
          h->set_completion_sink(nullptr);
        }
      },
      host_);
  if (EmbeddedHost* h = roce()) {
    h->set_cm_handler(on ? CmEventHandler([this](const core::CmEvent& e) { send_event(e); }) : nullptr);
    h->set_work_source(on ? this : nullptr);
  }
  if (IwarpHost* h = iwarp()) {
    h->set_event_handler(on ? IwarpEventHandler([this](const core::IwarpEvent& e) { send_event(e); }) : nullptr);
  }
}

void DaemonServer::fill_rings(core::Device& device) {
  device.take_completed_cqs(completed_cqs_);
  if (completed_cqs_.empty()) return;
  std::lock_guard lock(rings_mutex_);
  for (std::uint32_t cq : completed_cqs_) fill_ring(device, cq);
}

void DaemonServer::fill_ring(core::Device& device, std::uint32_t cq) {
  auto it = rings_.find(cq);
  if (it == rings_.end()) return;
  completed_qps_.clear();
  it->second.ring->fill(device, cq, completed_qps_);
  publish_room(device, *it->second.owner);
}

void DaemonServer::publish_room(core::Device& device, Client& owner) {
  if (completed_qps_.empty()) return;
  std::lock_guard lock(mutex_);
  if (!owner.work) return;
  std::uint32_t last = 0;
  for (std::uint32_t qpn : completed_qps_) {
    if (qpn == last || !owner.qps.contains(qpn)) continue;  // runs of one QP: publish once
    last = qpn;
    const auto& taken = owner.taken[qpn];
    using Q = core::Device::WorkQueue;
    owner.work->publish_room(qpn, QueueRoom{device.room(Q::send, qpn).value_or(0),
                                            device.room(Q::recv, qpn).value_or(0), taken[0], taken[1]});
  }
}

void DaemonServer::forget_ring(std::uint32_t cq) {
  std::lock_guard lock(rings_mutex_);
  rings_.erase(cq);
}

DaemonServer::~DaemonServer() { shutdown(); }

std::size_t DaemonServer::client_count() {
  reap_finished();
  std::lock_guard lock(mutex_);
  return clients_.size();
}

void DaemonServer::accept_loop() {
  for (;;) {
    pollfd fds[2] = {{listen_fd_, POLLIN, 0}, {stop_fd_, POLLIN, 0}};
    if (::poll(fds, 2, -1) < 0 && errno != EINTR) return;
    if (fds[1].revents != 0) return;
    if (fds[0].revents & POLLIN) {
      const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd >= 0) admit(fd);
    }
    reap_finished();
  }
}

void DaemonServer::admit(int fd) {
  ucred cred{};
  socklen_t len = sizeof cred;
  if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) {
    ::close(fd);
    return;
  }
  std::lock_guard lock(mutex_);
  Client& c = clients_.emplace_back();
  c.fd = fd;
  c.pid = cred.pid;
  c.uid = cred.uid;
  c.gid = cred.gid;
  c.thread = std::thread([this, &c] { serve(c); });
}

void DaemonServer::reap_finished() {
  std::list<Client> done;
  {
    std::lock_guard lock(mutex_);
    for (auto it = clients_.begin(); it != clients_.end();) {
      auto next = std::next(it);
      if (it->finished.load()) done.splice(done.end(), clients_, it);
      it = next;
    }
  }
  for (Client& c : done) c.thread.join();
}

void DaemonServer::serve(Client& c) {
  pthread_setname_np(pthread_self(), "srdmad-client");
  // A client's request wakes this thread while the client's other threads (or other clients)
  // spin on their CQ rings: with the default slice it would wait milliseconds for a core, as
  // the progress thread would (short_slice.hpp).
  request_short_slice();
  daemon::Hello hello;
  const ssize_t got = receive_with_fd(c.fd, &hello, sizeof hello, c.events_fd);
  std::vector<std::uint8_t> reply;
  Writer out(reply);
  int err = 0;
  if (got != static_cast<ssize_t>(sizeof hello) || c.events_fd < 0 || hello.magic != daemon::kMagic) {
    err = EPROTO;
  } else if (hello.version != daemon::kVersion || hello.layout != daemon::kLayout) {
    err = EPROTONOSUPPORT;  // a shim and a daemon of different builds
  } else if (c.pid == 0) {
    // SO_PEERCRED gives 0 for a peer in a PID namespace the daemon cannot see: process_vm_readv
    // could never reach its memory, so refuse now rather than at its first ibv_reg_mr.
    err = ESRCH;
    std::fprintf(stderr,
                 "softrdmad: refused a client (uid %u) whose PID namespace this daemon cannot see; "
                 "run softrdmad in the host's PID namespace, or the client in softrdmad's\n",
                 c.uid);
  } else if (const auto slot = on_engine([&](core::Device&, core::Time) { return memory_.attach(c.pid); })) {
    c.slot = *slot;
  } else {
    err = EUSERS;
  }
  out.put(static_cast<std::int32_t>(err));
  out.put(link_->multicast_limits());
  out.put(link_->tm_caps());
  reply.insert(reply.end(), link_->address().begin(), link_->address().end());
  // The doorbell offers a work ring, which only srdma0's progress thread drains.
  const int doorbell = err == 0 && roce() != nullptr ? roce()->doorbell_fd() : -1;
  const bool greeted = send_with_fd(c.fd, reply.data(), reply.size(), doorbell);
  if (err == 0 && greeted && !shutting_down_.load()) {
    std::vector<std::uint8_t> request(daemon::kMaxMessage);
    for (;;) {
      int passed = -1;
      const ssize_t n = receive_with_fd(c.fd, request.data(), request.size(), passed);
      if (n <= 0) break;
      if (EmbeddedHost* h = roce()) h->pull_work();  // what any client posted before this request comes first
      const bool ok = handle(c, std::span(request.data(), static_cast<std::size_t>(n)), passed, reply);
      if (passed >= 0) ::close(passed);  // a descriptor the request had no use for
      if (!ok || ::send(c.fd, reply.data(), reply.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(reply.size())) break;
    }
  }
  release(c);
  {
    std::lock_guard lock(mutex_);  // send_event() may be using the event socket
    outbox_.forget(c.events_fd);
    ::close(c.events_fd);
    c.events_fd = -1;
  }
  ::close(c.fd);
  c.finished.store(true);
}

// Destroys what the client left, in the order the verbs require (QPs before the CQs, SRQs and
// PDs they use; MWs before the MRs they are bound to), then frees its memory slot.
void DaemonServer::release(Client& c) {
  {
    std::lock_guard ring_lock(ring_clients_mutex_);
    std::erase(ring_clients_, &c);  // the progress thread pulls from it no more
  }
  // First: the peers hear DREQ or REJ (or the TCP close) while the QPs still exist.
  if (roce() != nullptr) {
    release_cm(c);
  } else {
    release_iwarp(c);
  }
  Client owned;
  {
    std::lock_guard lock(mutex_);
    owned.opened_qps.swap(c.opened_qps);
    owned.qps.swap(c.qps);
    owned.mws.swap(c.mws);
    owned.ahs.swap(c.ahs);
    owned.mrs.swap(c.mrs);
    owned.srqs.swap(c.srqs);
    owned.cqs.swap(c.cqs);
    owned.pds.swap(c.pds);
    owned.xrcds.swap(c.xrcds);
  }
  for (const auto& [qpn, handles] : owned.opened_qps)
    for (std::uint32_t i = 0; i < handles; ++i) link_->destroy_qp(qpn);
  for (std::uint32_t qpn : owned.qps) link_->destroy_qp(qpn);
  for (const auto& [index, key] : owned.mws) link_->dealloc_mw(key);
  for (std::uint32_t ah : owned.ahs) link_->destroy_ah(ah);
  for (const auto& [index, key] : owned.mrs) link_->dereg_mr(key);
  for (std::uint32_t srq : owned.srqs) link_->destroy_srq(srq);
  for (std::uint32_t cq : owned.cqs) {
    link_->destroy_cq(cq);
    forget_ring(cq);
  }
  for (std::uint32_t pd : owned.pds) link_->dealloc_pd(pd);
  for (std::uint32_t xrcd : owned.xrcds) link_->dealloc_xrcd(xrcd);  // after the SRQs and targets in them
  if (c.slot != 0) on_engine([&](core::Device&, core::Time) { memory_.detach(c.slot); });
  // Last: fill_rings publishes room into the work ring while any CQ ring of this client lives.
  std::lock_guard work_lock(c.work_mutex);
  std::lock_guard lock(mutex_);
  c.work.reset();
}

bool DaemonServer::drain_work(Client& c) {
  std::lock_guard lock(c.work_mutex);
  if (!c.work) return false;
  thread_local std::vector<std::uint8_t> reply;
  bool any = false;
  std::span<const std::uint8_t> record;
  for (;;) {
    if (!c.work->next(record)) {
      ::shutdown(c.fd, SHUT_RDWR);  // a ring of nonsense: drop the client, as for a bad request
      return any;
    }
    if (record.empty()) return any;
    // Only posts travel this way; anything else is a client that does not speak the protocol.
    daemon::Reader peek(record);
    const auto op = peek.get<Op>();
    int no_fd = -1;
    if ((op != Op::post_send && op != Op::post_recv && op != Op::post_srq_recv) || !handle(c, record, no_fd, reply)) {
      ::shutdown(c.fd, SHUT_RDWR);
      return any;
    }
    c.work->pop();
    any = true;
  }
}

bool DaemonServer::pull() {
  std::lock_guard lock(ring_clients_mutex_);
  // A post found in one pass may follow a post that another client made, to a ring this pass
  // had already looked at, before it (the receive a sender waited for): look again until a
  // pass finds nothing, so that no packet of the posts pulled overtakes a post made before it.
  bool any = false;
  for (int pass = 0; pass < kMaxPullPasses; ++pass) {
    bool found = false;
    for (Client* c : ring_clients_) found |= drain_work(*c);
    if (!found) break;
    any = true;
  }
  return any;
}

bool DaemonServer::going_to_sleep() {
  std::lock_guard lock(ring_clients_mutex_);
  for (Client* c : ring_clients_) c->work->set_asleep(true);
  for (Client* c : ring_clients_) {
    if (!c->work->empty()) return true;  // posted meanwhile: woke() clears the flags
  }
  return false;
}

void DaemonServer::woke() {
  std::lock_guard lock(ring_clients_mutex_);
  for (Client* c : ring_clients_) c->work->set_asleep(false);
}

void DaemonServer::send_event(std::uint32_t cq) {
  std::lock_guard lock(mutex_);
  for (Client& c : clients_) {
    if (contains(c.cqs, cq) && c.events_fd >= 0) {
      outbox_.send(c.events_fd, {daemon::EventKind::cq, cq, 0});
    }
  }
}

void DaemonServer::send_event(const core::AsyncEvent& event) {
  using core::AsyncEventType;
  std::lock_guard lock(mutex_);
  const daemon::Event e{daemon::EventKind::async, static_cast<std::uint32_t>(event.type), event.element};
  for (Client& c : clients_) {
    bool to_client = false;
    switch (event.type) {
      case AsyncEventType::cq_err:
        to_client = contains(c.cqs, event.element);
        break;
      case AsyncEventType::srq_err:
      case AsyncEventType::srq_limit_reached:
        to_client = contains(c.srqs, event.element);
        break;
      case AsyncEventType::device_fatal:
      case AsyncEventType::port_active:
      case AsyncEventType::port_err:
        to_client = true;
        break;
      default:
        to_client = contains(c.qps, event.element);
    }
    if (to_client && c.events_fd >= 0) outbox_.send(c.events_fd, e);
  }
}

void DaemonServer::shutdown() {
  if (shutting_down_.exchange(true)) return;
  const std::uint64_t one = 1;
  if (::write(stop_fd_, &one, sizeof one) < 0) {
    // An eventfd write fails only on overflow, which one write cannot cause.
  }
  if (accept_thread_.joinable()) accept_thread_.join();  // not started when start() failed
  ::close(listen_fd_);
  ::unlink(options_.socket_path.c_str());

  std::vector<std::uint32_t> qps;
  {
    std::lock_guard lock(mutex_);
    for (const Client& c : clients_) qps.insert(qps.end(), c.qps.begin(), c.qps.end());
  }
  core::QpAttr to_error;
  to_error.qp_state = core::QpState::err;
  for (std::uint32_t qpn : qps) link_->modify_qp(qpn, to_error, core::qp_attr::state);
  send_event(core::AsyncEvent{core::AsyncEventType::device_fatal, 1});

  const auto until = std::chrono::steady_clock::now() + options_.shutdown_grace;
  while (client_count() > 0 && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  {
    std::lock_guard lock(mutex_);
    for (Client& c : clients_) ::shutdown(c.fd, SHUT_RDWR);  // their threads see EOF and release
  }
  while (client_count() > 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  ::close(stop_fd_);
  set_host_handlers(false);
}

}  // namespace softrdma::host
