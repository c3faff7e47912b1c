#include "emulator/host/daemon_client.hpp"

#include <sched.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <memory>

#include "emulator/core/wr_checks.hpp"
#include "emulator/host/daemon_cm_codec.hpp"
#include "emulator/host/daemon_iwarp_codec.hpp"
#include "emulator/host/daemon_socket.hpp"

namespace softrdma::host {

using daemon::Op;
using daemon::Reader;
using daemon::Writer;

namespace {

std::string hello_error(int err, const std::string& path) {
  switch (err) {
    case EPROTONOSUPPORT:
      return "softrdmad at " + path + " is from another build of softrdma (protocol or layout differ)";
    case EUSERS:
      return "softrdmad at " + path + " serves as many clients as it can";
    case ESRCH:
      return "softrdmad at " + path + " cannot see this process: it runs in another PID namespace (docs/containers.md)";
    default:
      return "softrdmad at " + path + " refused the connection: " + std::strerror(err);
  }
}

}  // namespace

DaemonConnect DaemonClient::connect(const std::string& path) {
  const int fd = connect_daemon_socket(path);
  if (fd < 0) return {nullptr, "cannot reach softrdmad at " + path + ": " + std::strerror(errno)};
  int pair[2];
  if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) != 0) {
    const std::string error = std::string("socketpair: ") + std::strerror(errno);
    ::close(fd);
    return {nullptr, error};
  }
  const bool sent = send_daemon_hello(fd, pair[1]);
  ::close(pair[1]);  // the daemon holds its own copy now
  std::vector<std::uint8_t> reply(daemon::kMaxMessage);
  int doorbell = -1;
  const ssize_t n = sent ? receive_with_fd(fd, reply.data(), reply.size(), doorbell) : -1;
  Reader in(std::span<const std::uint8_t>(reply.data(), n > 0 ? static_cast<std::size_t>(n) : 0));
  const auto err = in.get<std::int32_t>();
  Offers offers;
  offers.multicast_limits = in.get<core::MulticastLimits>();
  offers.tm_caps = in.get<core::TmCaps>();
  if (!in.ok() || err != 0) {
    ::close(fd);
    ::close(pair[0]);
    if (doorbell >= 0) ::close(doorbell);
    if (!in.ok()) return {nullptr, "softrdmad at " + path + " closed the connection during the greeting"};
    return {nullptr, hello_error(err, path)};
  }
  const auto rest = in.rest();
  ucred cred{};
  socklen_t len = sizeof cred;
  ::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len);
  std::unique_ptr<DaemonClient> client(
      new DaemonClient(fd, pair[0], cred.pid, offers, std::string(rest.begin(), rest.end())));
  client->events_thread_ = std::thread([c = client.get()] { c->read_events(); });
  client->attach_work_ring(doorbell);
  return {std::move(client), {}};
}

// Without a work ring (no doorbell, no shared memory, a daemon that refuses it) posts travel as
// requests: slower, same results.
void DaemonClient::attach_work_ring(int doorbell) {
  if (doorbell < 0) return;
  int fd = -1;
  std::string error;
  std::unique_ptr<WorkRing> ring = WorkRing::create(fd, error);
  if (ring && simple_with_fd(Op::attach_work_ring, fd) == 0) {
    work_ = std::move(ring);
    doorbell_fd_ = doorbell;
  } else {
    ::close(doorbell);
  }
  if (fd >= 0) ::close(fd);
}

DaemonClient::DaemonClient(int fd, int events_fd, pid_t daemon_pid, const Offers& offers, std::string address)
    : fd_(fd),
      events_fd_(events_fd),
      daemon_pid_(daemon_pid),
      multicast_limits_(offers.multicast_limits),
      tm_caps_(offers.tm_caps),
      address_(std::move(address)),
      reply_(daemon::kMaxMessage) {}

DaemonClient::~DaemonClient() {
  closing_.store(true);
  if (doorbell_fd_ >= 0) ::close(doorbell_fd_);
  ::shutdown(events_fd_, SHUT_RDWR);
  if (events_thread_.joinable()) events_thread_.join();
  ::close(events_fd_);
  ::close(fd_);
}

void DaemonClient::set_event_handlers(CqEventHandler on_cq, AsyncEventHandler on_async) {
  std::lock_guard lock(handlers_mutex_);
  on_cq_ = std::move(on_cq);
  on_async_ = std::move(on_async);
}

void DaemonClient::read_events() {
  std::array<std::uint8_t, daemon::kMaxEventMessage> message;
  for (;;) {
    const ssize_t n = ::recv(events_fd_, message.data(), message.size(), 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < static_cast<ssize_t>(sizeof(daemon::Event))) break;
    std::lock_guard lock(handlers_mutex_);
    dispatch(std::span<const std::uint8_t>(message.data(), static_cast<std::size_t>(n)));
  }
  if (!closing_.load()) lost_daemon();
}

void DaemonClient::dispatch(std::span<const std::uint8_t> message) {
  daemon::Reader in(message);
  const auto e = in.get<daemon::Event>();
  if (e.kind == daemon::EventKind::cq && on_cq_) on_cq_(e.a);
  if (e.kind == daemon::EventKind::async && on_async_) {
    const core::AsyncEvent event{static_cast<core::AsyncEventType>(e.a), e.b};
    // The daemon is shutting down: until it closes the connection, requests still work, so
    // that the application can poll its flushed completions.
    if (event.type == core::AsyncEventType::device_fatal && fatal_raised_.exchange(true)) return;
    on_async_(event);
  }
  if (e.kind == daemon::EventKind::cm && on_cm_) {
    core::CmEvent event;
    if (daemon::get(in, event)) on_cm_(event);
  }
  if (e.kind == daemon::EventKind::iwarp && on_iw_) {
    core::IwarpEvent event;
    if (daemon::get(in, event)) on_iw_(event);
  }
}

void DaemonClient::lost_daemon() {
  gone_.store(true);
  if (fatal_raised_.exchange(true)) return;
  std::lock_guard lock(handlers_mutex_);
  if (on_async_) on_async_(core::AsyncEvent{core::AsyncEventType::device_fatal, 1});
}

template <class Encode, class Decode>
int DaemonClient::transact(Op op, Encode&& encode, Decode&& decode, int pass_fd) {
  std::lock_guard lock(mutex_);
  if (gone_.load()) return EIO;
  Writer out(request_);
  out.put(op);
  encode(out);
  ssize_t n = -1;
  if (send_with_fd(fd_, request_.data(), request_.size(), pass_fd)) {
    do {
      n = ::recv(fd_, reply_.data(), reply_.size(), 0);
    } while (n < 0 && errno == EINTR);
  }
  if (n <= 0) {
    gone_.store(true);
    return EIO;
  }
  Reader in(std::span<const std::uint8_t>(reply_.data(), static_cast<std::size_t>(n)));
  const int err = in.get<std::int32_t>();
  decode(in, err);
  return in.done() ? err : EIO;
}

template <class T>
core::Expected<T> DaemonClient::create(Op op, auto&& encode) {
  T value{};
  const int err = transact(op, encode, [&](Reader& in, int e) {
    if (e == 0) value = in.get<T>();
  });
  if (err != 0) return core::Expected<T>::error(err);
  return value;
}

// A request of plain arguments whose reply is an errno alone.
int DaemonClient::simple(Op op, auto&&... args) {
  return transact(
      op, [&](Writer& out) { (out.put(args), ...); }, [](Reader&, int) {});
}

int DaemonClient::simple_with_fd(Op op, int fd) {
  return transact(
      op, [](Writer&) {}, [](Reader&, int) {}, fd);
}

core::Expected<std::uint32_t> DaemonClient::alloc_pd() {
  return create<std::uint32_t>(Op::alloc_pd, [](Writer&) {});
}

int DaemonClient::dealloc_pd(std::uint32_t pd) { return simple(Op::dealloc_pd, pd); }

core::Expected<core::MrKeys> DaemonClient::reg_mr(std::uint32_t pd, std::uint64_t host, std::uint64_t length,
                                                  std::uint64_t iova, std::uint32_t access) {
  return create<core::MrKeys>(Op::reg_mr, [&](Writer& out) {
    out.put(pd);
    out.put(host);
    out.put(length);
    out.put(iova);
    out.put(access);
  });
}

int DaemonClient::rereg_mr(std::uint32_t lkey, const core::MrChange& change) {
  const std::uint8_t flags = (change.pd ? daemon::kChangePd : 0) |
                             (change.translation ? daemon::kChangeTranslation : 0) |
                             (change.access ? daemon::kChangeAccess : 0);
  return simple(Op::rereg_mr, lkey, flags, change.pd.value_or(0), change.translation.value_or(core::MrTranslation{}),
                change.access.value_or(0));
}

int DaemonClient::dereg_mr(std::uint32_t lkey) { return simple(Op::dereg_mr, lkey); }

int DaemonClient::attach_mcast(std::uint32_t qpn, const core::Gid& group) {
  return simple(Op::attach_mcast, qpn, group);
}

int DaemonClient::detach_mcast(std::uint32_t qpn, const core::Gid& group) {
  return simple(Op::detach_mcast, qpn, group);
}

core::Expected<std::uint32_t> DaemonClient::alloc_mw(std::uint32_t pd, int type) {
  return create<std::uint32_t>(Op::alloc_mw, [&](Writer& out) {
    out.put(pd);
    out.put(static_cast<std::int32_t>(type));
  });
}

int DaemonClient::dealloc_mw(std::uint32_t rkey) { return simple(Op::dealloc_mw, rkey); }

core::Expected<std::uint32_t> DaemonClient::bind_mw(std::uint32_t qpn, std::uint32_t mw_rkey, std::uint32_t mr_lkey,
                                                    std::uint64_t addr, std::uint64_t length, std::uint32_t access,
                                                    std::optional<std::uint64_t> signal_wr_id) {
  return create<std::uint32_t>(Op::bind_mw, [&](Writer& out) {
    out.put(qpn);
    out.put(mw_rkey);
    out.put(mr_lkey);
    out.put(addr);
    out.put(length);
    out.put(access);
    out.put(static_cast<std::uint8_t>(signal_wr_id.has_value()));
    out.put(signal_wr_id.value_or(0));
  });
}

core::Expected<std::uint32_t> DaemonClient::create_cq(std::uint32_t cqe) {
  auto ringed = std::make_unique<RingedCq>();
  int fd = -1;
  std::string error;
  ringed->ring = CqRing::create(cqe, fd, error);
  if (!ringed->ring) return core::Expected<std::uint32_t>::error(ENOMEM);
  std::uint32_t handle = 0;
  const int err = transact(
      Op::create_cq, [&](Writer& out) { out.put(cqe); },
      [&](Reader& in, int e) {
        if (e == 0) handle = in.get<std::uint32_t>();
      },
      fd);
  ::close(fd);  // the daemon has its own mapping
  if (err != 0) return core::Expected<std::uint32_t>::error(err);
  std::unique_lock lock(cqs_mutex_);
  cqs_[handle] = std::move(ringed);
  return handle;
}

int DaemonClient::destroy_cq(std::uint32_t cq) {
  const int err = simple(Op::destroy_cq, cq);
  if (err == 0) {
    std::unique_lock lock(cqs_mutex_);
    cqs_.erase(cq);
  }
  return err;
}
int DaemonClient::resize_cq(std::uint32_t cq, std::uint32_t cqe) {
  {
    // Completions in the ring are still in the CQ: fewer entries than those fail, as the engine
    // refuses a size below the completions it holds itself.
    std::shared_lock lock(cqs_mutex_);
    if (const auto it = cqs_.find(cq); it != cqs_.end()) {
      RingedCq& c = *it->second;
      std::lock_guard consumer(c.consumer);
      if (c.kept.size() + c.ring->held() > cqe) return EINVAL;
    }
  }
  return simple(Op::resize_cq, cq, cqe);
}

void DaemonClient::forget_completions(std::uint32_t cq, std::uint32_t qpn) {
  std::shared_lock lock(cqs_mutex_);
  const auto it = cqs_.find(cq);
  if (it == cqs_.end()) return;
  RingedCq& c = *it->second;
  std::lock_guard consumer(c.consumer);
  core::Wc wc;
  while (c.ring->take(std::span(&wc, 1)) == 1) c.kept.push_back(wc);
  std::erase_if(c.kept, [qpn](const core::Wc& w) { return w.qp_num == qpn; });
}

// From the CQ's ring; a request only when the ring ran full and completions wait in the
// engine (cq_ring.hpp). Once the daemon is gone, what the ring holds is still returned, then EIO.
int DaemonClient::poll_cq(std::uint32_t cq, std::span<core::Wc> out) {
  std::shared_lock lock(cqs_mutex_);
  const auto it = cqs_.find(cq);
  if (it == cqs_.end()) {
    lock.unlock();
    return poll_by_request(cq, out);  // not ours: the daemon answers (EINVAL)
  }
  RingedCq& c = *it->second;
  std::lock_guard consumer(c.consumer);
  std::size_t n = std::min(out.size(), c.kept.size());
  std::copy_n(c.kept.begin(), n, out.begin());
  c.kept.erase(c.kept.begin(), c.kept.begin() + static_cast<std::ptrdiff_t>(n));
  n += c.ring->take(out.subspan(n));
  if (n < out.size() && c.ring->pending()) {
    if (const int err = simple(Op::drain_cq, cq); err != 0) return n > 0 ? static_cast<int>(n) : -err;
    n += c.ring->take(out.subspan(n));
  }
  if (n == 0 && gone_.load()) return -EIO;
  // An empty poll gives the CPU away once: a busy-polling application would otherwise keep
  // the daemon's threads, which must run for anything to complete, off a core for a whole
  // scheduler slice (measured: ib_send_lat 2 B on one daemon, 2.0 ms -> 62 us on 2 cores).
  if (n == 0) sched_yield();
  return static_cast<int>(n);
}

int DaemonClient::poll_by_request(std::uint32_t cq, std::span<core::Wc> out) {
  const auto want = static_cast<std::uint32_t>(std::min<std::size_t>(out.size(), daemon::kMaxPolled));
  thread_local std::vector<core::Wc> got;
  const int err = transact(
      Op::poll_cq,
      [&](Writer& w) {
        w.put(cq);
        w.put(want);
      },
      [&](Reader& in, int e) {
        if (e == 0) in.get_vector(got, want);
      });
  if (err != 0) return -err;
  std::copy(got.begin(), got.end(), out.begin());
  return static_cast<int>(got.size());
}

int DaemonClient::req_notify_cq(std::uint32_t cq, bool solicited_only) {
  return simple(Op::req_notify_cq, cq, static_cast<std::uint8_t>(solicited_only));
}

namespace {

// What every kind of SRQ is created with, in the order the daemon reads it.
void put_srq_sizes(Writer& out, std::uint32_t pd, std::uint32_t max_wr, std::uint32_t max_sge, std::uint32_t limit) {
  out.put(pd);
  out.put(max_wr);
  out.put(max_sge);
  out.put(limit);
}

}  // namespace

core::Expected<std::uint32_t> DaemonClient::create_srq(std::uint32_t pd, std::uint32_t max_wr, std::uint32_t max_sge,
                                                       std::uint32_t limit) {
  auto srq =
      create<std::uint32_t>(Op::create_srq, [&](Writer& out) { put_srq_sizes(out, pd, max_wr, max_sge, limit); });
  return with_view(srq, max_sge);
}

core::Expected<std::uint32_t> DaemonClient::with_view(core::Expected<std::uint32_t> srq, std::uint32_t max_sge) {
  std::lock_guard lock(post_mutex_);
  if (srq) srq_views_[*srq] = SrqView{max_sge, 0};
  return srq;
}

int DaemonClient::modify_srq(std::uint32_t srq, std::uint32_t max_wr, std::uint32_t limit, bool set_max_wr,
                             bool set_limit) {
  const int err = simple(Op::modify_srq, srq, max_wr, limit, static_cast<std::uint8_t>(set_max_wr),
                         static_cast<std::uint8_t>(set_limit));
  std::lock_guard lock(post_mutex_);
  if (auto it = srq_views_.find(srq); err == 0 && it != srq_views_.end()) it->second.credits = 0;  // ask again
  return err;
}

int DaemonClient::query_srq(std::uint32_t srq, std::uint32_t& max_wr, std::uint32_t& max_sge, std::uint32_t& limit) {
  return transact(
      Op::query_srq, [&](Writer& out) { out.put(srq); },
      [&](Reader& in, int e) {
        if (e != 0) return;
        max_wr = in.get<std::uint32_t>();
        max_sge = in.get<std::uint32_t>();
        limit = in.get<std::uint32_t>();
      });
}

int DaemonClient::destroy_srq(std::uint32_t srq) {
  const int err = simple(Op::destroy_srq, srq);
  std::lock_guard lock(post_mutex_);
  if (err == 0) srq_views_.erase(srq);
  return err;
}

core::Expected<std::uint32_t> DaemonClient::create_ah(std::uint32_t pd, const core::AddressVector& av) {
  auto ah = create<std::uint32_t>(Op::create_ah, [&](Writer& out) {
    out.put(pd);
    out.put(av);
  });
  std::lock_guard lock(post_mutex_);
  if (ah) ahs_.insert(*ah);
  return ah;
}

int DaemonClient::destroy_ah(std::uint32_t ah) {
  const int err = simple(Op::destroy_ah, ah);
  std::lock_guard lock(post_mutex_);
  if (err == 0) ahs_.erase(ah);
  return err;
}

core::Expected<std::uint32_t> DaemonClient::alloc_xrcd() {
  return create<std::uint32_t>(Op::alloc_xrcd, [](Writer&) {});
}

int DaemonClient::dealloc_xrcd(std::uint32_t xrcd) { return simple(Op::dealloc_xrcd, xrcd); }

core::Expected<std::uint32_t> DaemonClient::create_xrc_srq(std::uint32_t pd, std::uint32_t max_wr,
                                                           std::uint32_t max_sge, std::uint32_t limit,
                                                           const core::Device::XrcSrq& xrc) {
  auto srq = create<std::uint32_t>(Op::create_xrc_srq, [&](Writer& out) {
    put_srq_sizes(out, pd, max_wr, max_sge, limit);
    out.put(xrc.xrcd);
    out.put(xrc.cq);
  });
  return with_view(srq, max_sge);
}

int DaemonClient::open_qp(std::uint32_t xrcd, std::uint32_t qpn) { return simple(Op::open_qp, xrcd, qpn); }

core::Expected<std::uint32_t> DaemonClient::create_tm_srq(std::uint32_t pd, std::uint32_t max_wr, std::uint32_t max_sge,
                                                          std::uint32_t limit, const core::Device::TmSrq& tm) {
  auto srq = create<std::uint32_t>(Op::create_tm_srq, [&](Writer& out) {
    put_srq_sizes(out, pd, max_wr, max_sge, limit);
    out.put(tm.cq);
    out.put(tm.max_num_tags);
    out.put(tm.max_ops);
  });
  return with_view(srq, max_sge);
}

// A request, not the work ring: an ADD's handle must come back before ibv_post_srq_ops returns.
// The daemon takes what the work ring holds before each request, so earlier posts stay first.
int DaemonClient::post_srq_ops(std::uint32_t srq, core::SrqOp& op) {
  return transact(
      Op::post_srq_ops,
      [&](Writer& out) {
        out.put(srq);
        out.put_op(op);
      },
      [&](Reader& in, int e) {
        if (e == 0) op.handle = in.get<std::uint32_t>();
      });
}

core::Expected<core::QpCreated> DaemonClient::create_qp(const core::QpInitAttr& attr) {
  auto qp = create<core::QpCreated>(Op::create_qp, [&](Writer& out) { out.put(attr); });
  std::lock_guard lock(post_mutex_);
  if (qp) {
    qp_views_[qp->qpn] = QpView{attr.qp_type, core::QpState::reset, qp->cap,
                                attr.send_cq, attr.recv_cq,         !core::has_own_receive_queue(attr)};
    if (work_) work_->clear_room(qp->qpn);  // what an earlier QP of this number left there
  }
  return qp;
}

// A QP leaves RESET, INIT and RTR only through this: the engine itself moves QPs only among
// states that take WRs alike (RTS, SQD, SQE, ERR), so the view's state is exact for the checks.
int DaemonClient::modify_qp(std::uint32_t qpn, const core::QpAttr& attr, std::uint32_t mask) {
  const int err = simple(Op::modify_qp, qpn, attr, mask);
  std::unique_lock lock(post_mutex_);
  const auto it = qp_views_.find(qpn);
  if (err != 0 || it == qp_views_.end()) return err;
  const bool to_reset = (mask & core::qp_attr::state) && attr.qp_state == core::QpState::reset &&
                        it->second.state != core::QpState::reset;
  if (mask & core::qp_attr::state) it->second.state = attr.qp_state;
  it->second.send_credits = it->second.recv_credits = 0;  // RESET empties queues: ask again
  const std::uint32_t send_cq = it->second.send_cq, recv_cq = it->second.recv_cq;
  lock.unlock();
  if (to_reset) {
    forget_completions(send_cq, qpn);
    if (recv_cq != send_cq) forget_completions(recv_cq, qpn);
  }
  return err;
}

int DaemonClient::query_qp(std::uint32_t qpn, core::QpAttr& attr, core::QpInitAttr& init) {
  return transact(
      Op::query_qp, [&](Writer& out) { out.put(qpn); },
      [&](Reader& in, int e) {
        if (e != 0) return;
        attr = in.get<core::QpAttr>();
        init = in.get<core::QpInitAttr>();
      });
}

int DaemonClient::destroy_qp(std::uint32_t qpn) {
  const int err = simple(Op::destroy_qp, qpn);
  std::lock_guard lock(post_mutex_);
  if (err == 0) qp_views_.erase(qpn);
  return err;
}

namespace {

// Room left in a request for one more WR: a generous bound on a WR's fixed fields.
constexpr std::size_t kWrFixedBytes = 160;

template <class Wr>
std::size_t encoded_bound(const Wr& wr) {
  std::size_t n = kWrFixedBytes + wr.sg_list.size() * sizeof(core::Sge);
  if constexpr (requires { wr.inline_data; }) n += wr.inline_data.size();
  return n;
}

// Puts a count and then the first WRs of `wrs` that fit in one message; returns how many.
template <class Wr>
std::size_t put_batch(Writer& out, std::span<const Wr> wrs) {
  const std::size_t count_at = out.size();
  out.put(std::uint32_t{0});
  std::size_t n = 0;
  while (n < wrs.size() && n < daemon::kMaxWrs &&
         (n == 0 || out.size() + encoded_bound(wrs[n]) <= daemon::kMaxMessage)) {
    out.put_wr(wrs[n]);
    ++n;
  }
  out.put_at(count_at, static_cast<std::uint32_t>(n));
  return n;
}

}  // namespace

template <class Wr>
int DaemonClient::post_batches(Op op, std::uint32_t queue, std::span<const Wr> wrs, std::size_t& posted) {
  posted = 0;
  while (posted < wrs.size()) {
    std::size_t sent = 0;
    std::uint32_t accepted = 0;
    const int err = transact(
        op,
        [&](Writer& out) {
          out.put(queue);
          sent = put_batch(out, wrs.subspan(posted));
        },
        [&](Reader& in, int) { accepted = in.get<std::uint32_t>(); });
    posted += std::min<std::size_t>(accepted, sent);
    if (err != 0) return err;
  }
  return 0;
}

int DaemonClient::post_send(std::uint32_t qpn, std::span<const core::SendWr> wrs, std::size_t& posted) {
  std::unique_lock lock(post_mutex_);
  if (!work_) {
    lock.unlock();
    return post_batches(Op::post_send, qpn, wrs, posted);
  }
  posted = 0;
  const auto it = qp_views_.find(qpn);
  if (it == qp_views_.end()) return EINVAL;
  QpView& v = it->second;
  return post_via_ring(Op::post_send, qpn, core::Device::WorkQueue::send, v.send_credits, &v.send_pushed, wrs, posted,
                       [&](const core::SendWr& wr) {
                         if (const int err = core::check_send_wr(v.type, v.state, v.cap, wr)) return err;
                         if (v.type == core::QpType::ud && !ahs_.contains(wr.ah)) return EINVAL;
                         return 0;
                       });
}

int DaemonClient::post_recv(std::uint32_t qpn, std::span<const core::RecvWr> wrs, std::size_t& posted) {
  std::unique_lock lock(post_mutex_);
  if (!work_) {
    lock.unlock();
    return post_batches(Op::post_recv, qpn, wrs, posted);
  }
  posted = 0;
  const auto it = qp_views_.find(qpn);
  if (it == qp_views_.end() || it->second.on_srq) return EINVAL;
  QpView& v = it->second;
  return post_via_ring(Op::post_recv, qpn, core::Device::WorkQueue::recv, v.recv_credits, &v.recv_pushed, wrs, posted,
                       [&](const core::RecvWr& wr) { return core::check_recv_wr(v.state, v.cap, wr); });
}

int DaemonClient::post_srq_recv(std::uint32_t srq, std::span<const core::RecvWr> wrs, std::size_t& posted) {
  std::unique_lock lock(post_mutex_);
  if (!work_) {
    lock.unlock();
    return post_batches(Op::post_srq_recv, srq, wrs, posted);
  }
  posted = 0;
  const auto it = srq_views_.find(srq);
  if (it == srq_views_.end()) return EINVAL;
  SrqView& v = it->second;
  return post_via_ring(Op::post_srq_recv, srq, core::Device::WorkQueue::srq, v.credits, nullptr, wrs, posted,
                       [&](const core::RecvWr& wr) { return wr.sg_list.size() > v.max_sge ? EINVAL : 0; });
}

std::uint32_t DaemonClient::refill_credits(core::Device::WorkQueue which, std::uint32_t queue,
                                           const std::uint32_t* pushed, int& err) {
  err = 0;
  QueueRoom slot;
  if (pushed != nullptr && work_->read_room(queue, slot)) {
    const bool send = which == core::Device::WorkQueue::send;
    const std::uint32_t room = send ? slot.send_room : slot.recv_room;
    const std::uint32_t in_flight = *pushed - (send ? slot.send_taken : slot.recv_taken);  // in the ring still
    if (in_flight < room) return room - in_flight;
  }
  // Unknown or none left as of the last look: the daemon runs what the ring holds, then says.
  ring_doorbell();
  std::uint32_t room = 0;
  err = transact(
      Op::queue_room,
      [&](Writer& w) {
        w.put(which);
        w.put(queue);
      },
      [&](Reader& in, int e) {
        if (e == 0) room = in.get<std::uint32_t>();
      });
  return room;
}

template <class Wr, class Check>
int DaemonClient::post_via_ring(Op op, std::uint32_t queue, core::Device::WorkQueue which, std::uint32_t& credits,
                                std::uint32_t* pushed, std::span<const Wr> wrs, std::size_t& posted, Check&& check) {
  posted = 0;
  if (gone_.load()) return EIO;
  Writer out(record_);
  std::size_t in_record = 0;
  const auto begin = [&] {
    out.clear();
    out.put(op);
    out.put(queue);
    out.put(std::uint32_t{0});  // the count, once known
    in_record = 0;
  };
  // Puts the WRs so far in the ring; they are posted from then on.
  const auto flush = [&] {
    if (in_record == 0) return true;
    out.put_at(sizeof(Op) + sizeof(std::uint32_t), static_cast<std::uint32_t>(in_record));
    if (!push_record()) return false;
    posted += in_record;
    if (pushed != nullptr) *pushed += static_cast<std::uint32_t>(in_record);
    begin();
    return true;
  };
  begin();
  int err = 0;
  for (const Wr& wr : wrs) {
    if ((err = check(wr)) != 0) break;
    if (credits == 0) {
      if (!flush()) return EIO;  // what is queued counts against the room
      credits = refill_credits(which, queue, pushed, err);
      if (err == 0 && credits == 0) err = ENOMEM;
      if (err != 0) break;
    }
    if (in_record > 0 && out.size() + encoded_bound(wr) > daemon::kMaxMessage && !flush()) return EIO;
    out.put_wr(wr);
    ++in_record;
    --credits;
  }
  if (!flush()) return EIO;
  ring_doorbell();
  return err;
}

bool DaemonClient::push_record() {
  // A full ring (1 MiB of WRs the daemon has not taken yet) waits for it, as a full doorbell
  // queue holds a NIC driver back.
  for (int tries = 0; !work_->push(record_); ++tries) {
    if (gone_.load()) return false;
    ring_doorbell();
    if (tries > 100'000) return false;
    sched_yield();
  }
  return true;
}

void DaemonClient::ring_doorbell() {
  if (!work_->daemon_asleep()) return;  // awake: it will find the record (work_ring.hpp)
  const std::uint64_t one = 1;
  [[maybe_unused]] const ssize_t n = ::write(doorbell_fd_, &one, sizeof one);
}

// The connection manager's requests: the daemon checks the handles are this client's.
core::Expected<std::uint32_t> DaemonClient::cm_listen(std::uint64_t service_id) {
  return create<std::uint32_t>(Op::cm_listen, [&](Writer& out) { out.put(service_id); });
}

int DaemonClient::cm_stop_listening(std::uint32_t listener) { return simple(Op::cm_stop_listening, listener); }

core::Expected<std::uint32_t> DaemonClient::cm_connect(const core::CmConnect& request) {
  return create<std::uint32_t>(Op::cm_connect, [&](Writer& out) { daemon::put(out, request); });
}

int DaemonClient::cm_accept(std::uint32_t id, const core::CmAccept& reply) {
  return transact(
      Op::cm_accept,
      [&](Writer& out) {
        out.put(id);
        daemon::put(out, reply);
      },
      [](Reader&, int) {});
}

int DaemonClient::cm_with_data(Op op, std::uint32_t id, std::span<const std::uint8_t> private_data) {
  return transact(
      op,
      [&](Writer& out) {
        out.put(id);
        out.put_vector(private_data);
      },
      [](Reader&, int) {});
}

int DaemonClient::cm_ready(std::uint32_t id, std::span<const std::uint8_t> private_data) {
  return cm_with_data(Op::cm_ready, id, private_data);
}

int DaemonClient::cm_reject(std::uint32_t id, std::span<const std::uint8_t> private_data) {
  return cm_with_data(Op::cm_reject, id, private_data);
}

int DaemonClient::cm_disconnect(std::uint32_t id, std::span<const std::uint8_t> private_data) {
  return cm_with_data(Op::cm_disconnect, id, private_data);
}

core::Expected<std::uint32_t> DaemonClient::cm_resolve_service(const core::CmServiceQuery& query) {
  return create<std::uint32_t>(Op::cm_resolve_service, [&](Writer& out) { daemon::put(out, query); });
}

int DaemonClient::cm_answer_service(std::uint32_t id, const core::CmServiceAnswer& answer) {
  return transact(
      Op::cm_answer_service,
      [&](Writer& out) {
        out.put(id);
        daemon::put(out, answer);
      },
      [](Reader&, int) {});
}

void DaemonClient::cm_destroy(std::uint32_t id) { simple(Op::cm_destroy, id); }

void DaemonClient::set_cm_handler(CmEventHandler on_cm) {
  std::lock_guard lock(handlers_mutex_);
  on_cm_ = std::move(on_cm);
}

core::Expected<std::uint32_t> DaemonClient::iw_listen(const core::TcpEndpoint& local) {
  return create<std::uint32_t>(Op::iw_listen, [&](Writer& out) { out.put(local); });
}

int DaemonClient::iw_stop_listening(std::uint32_t listener) { return simple(Op::iw_stop_listening, listener); }

core::Expected<std::uint32_t> DaemonClient::iw_connect(const core::TcpEndpoint& remote, std::uint32_t qpn,
                                                       const core::MpaOffer& offer) {
  return create<std::uint32_t>(Op::iw_connect, [&](Writer& out) {
    out.put(remote);
    out.put(qpn);
    daemon::put(out, offer);
  });
}

int DaemonClient::iw_accept(std::uint32_t id, std::uint32_t qpn, const core::MpaOffer& offer) {
  return transact(
      Op::iw_accept,
      [&](Writer& out) {
        out.put(id);
        out.put(qpn);
        daemon::put(out, offer);
      },
      [](Reader&, int) {});
}

int DaemonClient::iw_reject(std::uint32_t id, std::span<const std::uint8_t> private_data) {
  return cm_with_data(Op::iw_reject, id, private_data);
}

int DaemonClient::iw_disconnect(std::uint32_t id) { return simple(Op::iw_disconnect, id); }

void DaemonClient::iw_destroy(std::uint32_t id) { simple(Op::iw_destroy, id); }

void DaemonClient::set_iw_handler(IwarpEventHandler on_iw) {
  std::lock_guard lock(handlers_mutex_);
  on_iw_ = std::move(on_iw);
}

}  // namespace softrdma::host
