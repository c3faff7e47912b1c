#include "emulator/host/embedded_host.hpp"

#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <sys/prctl.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <system_error>

#include "emulator/host/core_step.hpp"
#include "emulator/host/loopback_address.hpp"
#include "emulator/host/short_slice.hpp"
#include "emulator/host/sibling_activity.hpp"
#include "emulator/host/spin_budget.hpp"
#include "emulator/host/thread_pause.hpp"
#include "emulator/net/udp_backend.hpp"
#include "wire/opcode.hpp"
#include "wire/udp.hpp"

namespace softrdma::host {
namespace {

// Receive bursts per step, and packets sent per step: bounds on how long one step holds the
// lock, so that a 1 MiB message does not keep the other side of the device waiting.
constexpr int kReceiveBurstsPerStep = 4;
// Packets handed to the backend at once: a whole GSO datagram's worth (the kernel's
// UDP_MAX_SEGMENTS). At 32, a 64 KiB WRITE's 64 packets at MTU 1024 left as three datagrams
// instead of two, and ib_write_bw over a veth ran at 1400 MB/s instead of 1774 (medians of 3).
constexpr std::size_t kTransmitBurst = 64;
constexpr std::size_t kTransmitPerStep = 4 * kTransmitBurst;

// An application that calls poll_cq many times in quick succession is busy-polling
// (perftest, ibv_rc_pingpong without -e): it receives on its own thread, and the progress
// thread stays off the socket for kBusyPollLease after each such poll. A few polls are not
// enough: a program driven by completion events polls its CQs until they are empty, arms
// them (req_notify_cq, which ends the lease) and sleeps. If the application stops polling
// without arming a CQ, packets wait kBusyPollLease at most.
constexpr std::uint32_t kBusyPollStreak = 16;
constexpr core::Time kBusyPollGap = 20'000;  // ns between the polls of one streak
// The lease lasts as long as a gap that would end the streak: an application that has not
// polled for that long has stopped (ib_write_lat, between its polls, spins on its buffer for
// the peer's WRITE, which only the progress thread can receive). A 200 us lease made every
// such WRITE wait for its end: ib_write_lat measured 90-200 us instead of about 25.
constexpr core::Time kBusyPollLease = kBusyPollGap;
// But the progress thread learns that the lease ended only by waking at its end, and a wake-up
// every 20 us beside an application that never stops polling cost ib_read_lat twice its
// round trip. So a streak that has gone on without a pause for kSteadyPolling (the
// application polls for good: perftest's send and read latency, ibv_rc_pingpong, the
// bandwidth tests) earns the long lease. Each of those wake-ups still preempts a polling
// thread where cores are few, so a wake-up that finds the lease renewed doubles the next one,
// up to kSteadyLeaseMost; one that finds it over (the application stopped polling) starts
// again from kSteadyLeaseFirst, so that a program that stops after each message, if ever taken
// for a steady poller, waits no longer than that.
constexpr core::Time kSteadyPolling = 1'000'000;   // ns
constexpr core::Time kSteadyLeaseFirst = 200'000;  // ns
constexpr core::Time kSteadyLeaseMost = 8 * kSteadyLeaseFirst;
// For this long after a lease the progress thread does not spin after work, but sleeps on the
// socket: beside an application spinning on memory, a spinning progress thread takes its core
// and runs ahead of it in the scheduler's virtual time, so that its next wake-up does not
// preempt the spinner and waits for a tick (4 ms at HZ=250; perf sched showed these delays).
constexpr core::Time kNoSpinAfterLease = 1'000'000;  // ns

// A post that comes less than kPostBurstGap after the last one returned is part of a burst:
// its packets wait, as a poll's posts do in a lease, until a burst's worth (kTransmitBurst)
// can leave in one sendmmsg, the application polls or makes another call, or kBurstHold has
// passed: a system call per post would bound the message rate by the kernel's. The first post
// after a pause still leaves at once, so a lone post's latency does not change.
constexpr core::Time kPostBurstGap = 2'000;  // ns
constexpr core::Time kBurstHold = 10'000;    // ns

constexpr core::Time kNever = ~core::Time{0};

// The earlier of a deadline (0: none) and `t`.
core::Time earliest(core::Time deadline, core::Time t) { return deadline == 0 || t < deadline ? t : deadline; }

bool is_answer(const core::TxPacket& p) {
  return !p.bytes.empty() && wire::info(wire::opcode(p.bytes[0])).is(wire::OpFlag::response);
}

// A batch's answers leave after its requests: a peer whose poll finds the completion an ACK
// brings then has the requests that came with it in its socket already (in-order delivery),
// rather than stop polling a moment before they arrive (ib_write_lat's WRITE, which only the
// peer's progress thread would then receive). One system call sends the batch, so answers
// are not starved by it.
void answers_last(std::vector<core::TxPacket>& batch) {
  const auto is_request = [](const core::TxPacket& p) { return !is_answer(p); };
  // Mostly in order already (a request and the ACK behind it); stable_partition would allocate.
  if (!std::is_partitioned(batch.begin(), batch.end(), is_request))
    std::stable_partition(batch.begin(), batch.end(), is_request);
}

}  // namespace

HostStart EmbeddedHost::start(HostConfig config) {
  std::unique_ptr<net::Backend> backend;
  if (config.open_backend) {
    net::BackendOpen opened = config.open_backend();
    if (!opened.backend) return {nullptr, opened.error};
    backend = std::move(opened.backend);
  } else {
    net::UdpOpenResult opened = config.ip ? net::UdpBackend::open(*config.ip) : bind_first_free_loopback();
    if (!opened.backend) return {nullptr, opened.error};
    opened.backend->set_gso(config.udp_gso);
    backend = std::move(opened.backend);
  }
  // Looped-back packets need no ICRC unless a capture shows them or a fault stage may corrupt them.
  config.device.unsealed_loopback = !config.capture_path && !config.faults;
  std::unique_ptr<EmbeddedHost> host(new EmbeddedHost(std::move(backend), config.device, config.memory, config.spin));
  if (const int err = host->doorbell_.error())
    return {nullptr, std::string("cannot create an eventfd: ") + std::strerror(err)};
  if (config.capture_path) {
    net::CaptureOpen capture = net::CaptureStage::open(*config.capture_path);
    if (!capture.stage) return {nullptr, capture.error};
    host->capture_ = std::move(capture.stage);
  }
  if (config.faults) {
    host->faults_.emplace(*config.faults, steady_now());
    host->device_.force_rnr(config.faults->forced_rnr);  // no other thread runs yet
  }
  try {
    host->thread_ = std::thread([h = host.get()] { h->run(); });
  } catch (const std::system_error& e) {
    return {nullptr, std::string("cannot start the progress thread: ") + e.what()};
  }
  return {std::move(host), {}};
}

namespace {

// The device as the backend makes it: GID 0 is its address, and when every packet leaves from
// the backend's one port (a socket's), the engine seals each ICRC with that port.
core::DeviceConfig for_backend(core::DeviceConfig config, const net::Backend& backend) {
  config.gids = {backend.local_gid()};
  if (backend.sends_from_local_port()) config.udp_source_port = backend.local_port();
  if (!backend.joins_groups()) config.mcast = {0, 0, 0};  // no multicast where no group can be received
  if (!config.cm_id_seed) config.cm_id_seed = std::random_device{}();
  return config;
}

}  // namespace

EmbeddedHost::EmbeddedHost(std::unique_ptr<net::Backend> backend, core::DeviceConfig device, core::Memory* memory,
                           std::chrono::nanoseconds spin)
    : memory_(memory != nullptr ? *memory : local_memory_),
      backend_(std::move(backend)),
      device_(for_backend(std::move(device), *backend_), memory_),
      spin_ns_(static_cast<core::Time>(std::max<std::chrono::nanoseconds::rep>(spin.count(), 0))) {
  tx_queue_.reserve(kTransmitBurst);
  steady_lease_.store(kSteadyLeaseFirst);
}

EmbeddedHost::~EmbeddedHost() { stop(); }

void EmbeddedHost::stop() {
  if (!thread_.joinable()) return;
  stopping_.store(true);
  doorbell_.kick();
  thread_.join();
  std::lock_guard lock(mutex_);
  if (capture_) capture_->flush();  // every packet so far is in the file; it is closed with the host
}

int EmbeddedHost::poll_cq(std::uint32_t cq, std::span<core::Wc> out) {
  const core::Time now = steady_now();
  note_poll(now);
  std::unique_lock lock = lock_for_call(now);
  // Posts that waited for this poll (see post()) leave first: their latency is the poll's.
  bool sent = unsent_.posts;
  if (sent) transmit(now);
  int n = device_.poll_cq(cq, out);
  // When the CQ is empty, one recvmmsg; finding nothing is the cost of an empty poll.
  const std::size_t received = n == 0 ? receive(now) : 0;
  if (received > 0) {
    n = device_.poll_cq(cq, out);
    sent = true;
  }
  // Answers alone (the ACKs a receive called for) wait while polls find completions or
  // packets, for the post the application makes on them (perftest's ib_send_lat reaps its
  // SEND's completion between the receive and its answer; ib_write_lat's peer sends its WRITE
  // just ahead of the ACK this poll waits for), but not longer than a short lease.
  if (unsent_.any && ((n == 0 && received == 0) || now - unsent_.since >= kBusyPollLease)) {
    transmit(now);
    sent = true;
  }
  if (sent) {
    // The ACKs the packets called for wait, while the application polls, for its next call:
    // they then leave in one batch with the answer it posts (an ACK covers every earlier PSN,
    // so a late one loses nothing), rather than by a system call before it sees its completion.
    after_call(lock, now, Sending::with_next_post);
  }
  if (lock.owns_lock()) lock.unlock();
  // The next call's pause starts here: a poll that took long (a burst to send, a slow build)
  // was not the application pausing.
  last_call_.store(steady_now(), std::memory_order_relaxed);
  last_poll_found_.store(n > 0, std::memory_order_relaxed);
  return n;
}

int EmbeddedHost::req_notify_cq(std::uint32_t cq, bool solicited_only) {
  // The application is about to sleep until the CQ's event: from now on the progress thread
  // must receive, and if it sleeps off the socket for a busy-poll lease, wake it.
  const core::Time now = steady_now();
  last_call_.store(0, std::memory_order_relaxed);  // the next poll starts a new streak
  arming_.armed(now);
  last_poll_found_.store(true, std::memory_order_relaxed);
  if (app_polls_until_.exchange(0) > now) doorbell_.kick();
  return call([&](core::Device& d, core::Time) { return d.req_notify_cq(cq, solicited_only); });
}

int EmbeddedHost::destroy_qp(std::uint32_t qpn) {
  return call([&](core::Device& d, core::Time now) {
    while (transmit(now).more && !tx_blocked_.load()) {
    }
    return d.destroy_qp(qpn);
  });
}

int EmbeddedHost::attach_mcast(std::uint32_t qpn, const core::Gid& group) {
  const int err = call([&](core::Device& d, core::Time) {
    int e = d.attach_mcast(qpn, group);
    // The port joins when the group's first QP attaches. A join the network refuses undoes
    // the attachment: the verb fails rather than leave a QP that would hear nothing.
    if (e == 0 && (e = carry_out_group_changes()) != 0) {
      d.detach_mcast(qpn, group);
      carry_out_group_changes();
    }
    return e;
  });
  if (err == 0) doorbell_.kick();  // a sleeping progress thread learns of the groups' descriptor
  return err;
}

int EmbeddedHost::detach_mcast(std::uint32_t qpn, const core::Gid& group) {
  // A leave it causes is carried out with the events, after the call (collect_events).
  return call([&](core::Device& d, core::Time) { return d.detach_mcast(qpn, group); });
}

int EmbeddedHost::carry_out_group_changes() {
  int refused = 0;
  while (const auto c = device_.next_group_change()) {
    const int err = c->joined ? backend_->join_group(c->group) : backend_->leave_group(c->group);
    if (c->joined && refused == 0) refused = err;
  }
  return refused;
}

std::unique_lock<SpinningMutex> EmbeddedHost::lock_for_call(core::Time now) {
  // The application's threads spin on a CQ, or on memory as ib_write_lat does, unless armed.
  return mutex_.lock_for(arming_, now);
}

void EmbeddedHost::set_event_handlers(CqEventHandler on_cq, AsyncEventHandler on_async) {
  events_.set_handlers(std::move(on_cq), std::move(on_async));
}

void EmbeddedHost::set_cm_handler(CmEventHandler on_cm) { events_.set_cm_handler(std::move(on_cm)); }

HostStats EmbeddedHost::stats() {
  std::lock_guard lock(mutex_);
  net::UdpCounters udp = backend_->counters();
  udp.loopback_packets = loopback_packets_;
  return {device_.counters(), udp, capture_ ? capture_->counters() : net::CaptureCounters{},
          faults_ ? faults_->stats() : FaultStats{}, backend_->port_counters()};
}

thread_local bool EmbeddedHost::pulling_ = false;

void EmbeddedHost::after_call(std::unique_lock<SpinningMutex>& lock, core::Time now, Sending sending) {
  const core::Time lease_end = app_polls_until_.load(std::memory_order_relaxed);
  const bool in_lease = now < lease_end;
  // A poll's answers wait for the next post even outside a lease: the application is polling.
  // A burst's packets are built now, to count them; a burst's worth leaves at once.
  const bool burst_waits = sending == Sending::in_burst && !in_lease && stage(now) && tx_queue_.size() < kTransmitBurst;
  const bool held = sending == Sending::with_next_post || burst_waits ||
                    ((sending == Sending::at_next_poll || sending == Sending::in_burst) && in_lease);
  const bool more = !held && transmit(now).more;
  // A poll's answers are built now, to wait in tx_queue_: every received packet wakes its QP,
  // an ACK too, and a wait noted for a QP with nothing to send would age until a progress
  // step's answers left alone at once (ib_write_lat's peer then had its ACK before the WRITE).
  if (held && (sending == Sending::with_next_post ? stage(now) : device_.may_transmit() || !tx_queue_.empty())) {
    // Their wait counts from after the receive that queued them, however long it took.
    keep_unsent(steady_now(), sending != Sending::with_next_post);
  }
  collect_events();
  core::Time deadline = next_wakeup();
  // If no poll or post comes first, the progress thread sends them.
  if (held && unsent_.any)
    deadline = earliest(deadline, in_lease ? lease_end : unsent_.since + (burst_waits ? kBurstHold : kBusyPollLease));
  deadline_.store(deadline);
  aim_timer(now, deadline);
  lock.unlock();
  events_.deliver();
  if (more) doorbell_.kick();  // packets are left to send
}

void EmbeddedHost::aim_timer(core::Time now, core::Time deadline) {
  // A sleeping progress thread must wake by the deadline if it would wake later. The timer
  // wakes it then, not now: a kick would put it on this core ahead of the application at once,
  // and the deadline (held answers, a retransmission timer) mostly passes unneeded. An awake
  // thread, wake_at_ 0, reads deadline_ before it sleeps (see sleep_until).
  const core::Time sleeper_wakes = wake_at_.load();
  const core::Time wanted = deadline != 0 && sleeper_wakes != 0 && deadline < sleeper_wakes ? deadline : 0;
  const core::Time armed = timer_at_ > now ? timer_at_ : 0;  // one that went off is spent
  if (wanted == armed) return;
  // A timer for a deadline since moved later or dropped goes too: its wake-up would find nothing.
  if (!doorbell_.ring_at(wanted)) {
    doorbell_.kick();  // without a timer, wake it now
    return;
  }
  timer_at_ = wanted;
}

bool EmbeddedHost::continues_streak(core::Time now) {
  static thread_local ThreadPause pause;
  const core::Time last = last_call_.exchange(now, std::memory_order_relaxed);
  if (now - last < kBusyPollGap) {
    pause.call(now);
    return true;
  }
  polls_.store(0, std::memory_order_relaxed);
  // A pause after a poll that found a completion, in which the thread ran for as long as a gap
  // that ends a streak, is the application's: it got what it polled for and went to wait
  // otherwise. A pause in the middle of empty polls, or the scheduler's (a preempted thread that
  // polls again as soon as it runs), does not make steady polling young again. The time run
  // counts, not its share of the pause: two spinning programs and two progress threads on two
  // cores leave a spinner off its core for most of a long pause, and the steady lease then
  // held ib_write_lat's every WRITE until its end.
  if (pause.ran_for(now, now - last) >= kBusyPollGap && last_poll_found_.load(std::memory_order_relaxed))
    streak_start_.store(now, std::memory_order_relaxed);
  return false;
}

void EmbeddedHost::note_poll(core::Time now) {
  static thread_local CoreStep core_step;
  // Before the poll takes the lock: reading the run delay, and a step, are system calls.
  if (continues_streak(now)) core_step.poll(now);
  if (polls_.fetch_add(1, std::memory_order_relaxed) + 1 >= kBusyPollStreak) {
    const bool steady = now - streak_start_.load(std::memory_order_relaxed) >= kSteadyPolling;
    polls_steadily_.store(steady, std::memory_order_relaxed);
    const core::Time lease = steady ? steady_lease_.load(std::memory_order_relaxed) : kBusyPollLease;
    app_polls_until_.store(now + lease, std::memory_order_relaxed);
  }
}

bool EmbeddedHost::follows_post(core::Time now) const {
  const core::Time last = last_post_end_.load(std::memory_order_relaxed);
  return last != 0 && now - last < kPostBurstGap;
}

void EmbeddedHost::lengthen_steady_lease(bool renewed) {
  const core::Time lease = steady_lease_.load(std::memory_order_relaxed);
  if (!renewed) {
    steady_lease_.store(kSteadyLeaseFirst, std::memory_order_relaxed);
  } else if (polls_steadily_.load(std::memory_order_relaxed)) {
    steady_lease_.store(std::min(2 * lease, kSteadyLeaseMost), std::memory_order_relaxed);
  }
}

void EmbeddedHost::set_work_source(WorkSource* source) {
  work_source_.store(source);
  if (source != nullptr || !thread_.joinable() || std::this_thread::get_id() == thread_.get_id()) return;
  // The loop iteration running now may hold the old source; the next one reads the new value.
  const std::uint64_t current = loops_.load();
  while (loops_.load() == current && !stopping_.load()) {
    doorbell_.kick();
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

bool EmbeddedHost::sleep_until(core::Time now, core::Time until, short events, WorkSource* source) {
  // A backend without a file descriptor (a DPDK port) is polled: never sleep past its interval.
  if (backend_->fd() < 0) until = std::min(until, now + backend_->poll_interval_ns());
  // wake_at_ is stored before deadline_ is read again, and after_call stores deadline_ before
  // it reads wake_at_ (both sequentially consistent): either this thread sees the new
  // deadline, or after_call sees that it sleeps and kicks it.
  wake_at_.store(until);
  const core::Time deadline = deadline_.load();
  bool woken = true;
  if ((deadline == 0 || deadline >= until) && !(source && source->going_to_sleep()))
    woken = doorbell_.sleep(backend_->fd(), events, (events & POLLIN) ? backend_->group_fd() : -1,
                            until == kNever ? -1 : static_cast<std::int64_t>(until - now));
  if (source) source->woke();
  wake_at_.store(0);
  return woken;
}

void EmbeddedHost::run() {
  pthread_setname_np(pthread_self(), "srdma-progress");
  // RNR timers start at 10 us (IBTA vol. 1 table 45); the default 50 us timer slack would
  // stretch them.
  prctl(PR_SET_TIMERSLACK, 1000UL);
  // A short slice, so that a packet's wake-up preempts a spinning application thread; but
  // while it spins beside a daemon's clients, which yield, the default, so that its own yields
  // hand the core over (short_slice.hpp).
  SliceSwitch slice;
  slice.use_short();
  const int fd = backend_->fd();
  SpinBudget budget(spin_ns_, steady_now());
  SiblingActivity siblings;
  bool ready = true;
  while (!stopping_.load()) {
    loops_.fetch_add(1);
    WorkSource* source = work_source_.load();
    const bool pulled = pull_work();
    if ((ready && progress()) || pulled) {
      budget.worked(steady_now());
      continue;  // look again at once: one step sends a bounded number of packets
    }
    ready = true;
    const core::Time now = steady_now();
    const core::Time deadline = deadline_.load();
    if (deadline != 0 && deadline <= now) continue;
    const core::Time until = deadline != 0 ? deadline : kNever;
    const short write = tx_blocked_.load() ? POLLOUT : 0;
    const core::Time lease_end = app_polls_until_.load(std::memory_order_relaxed);
    if (now < lease_end) {
      slice.use_short();
      const bool woken = sleep_until(now, std::min(until, lease_end), write, source);  // an application thread receives
      // Woken by the time alone, to find the lease renewed: the application still polls, and a
      // step would only contend with it for the lock and the socket.
      const bool renewed = steady_now() < app_polls_until_.load(std::memory_order_relaxed);
      ready = woken || !renewed;
      if (!woken && lease_end <= until) lengthen_steady_lease(renewed);
    } else if (now - lease_end >= kNoSpinAfterLease && budget.keep_spinning(now)) {
      // The short slice only where this process's own threads are busy beside it: elsewhere
      // its yields are for the program that shares its core (sibling_activity.hpp), or for
      // the daemon's clients, which yield too.
      if (source != nullptr || !siblings.busy(now)) {
        slice.use_default();
      } else {
        slice.use_short();
      }
      // The next pass steps at once: its receive asks the socket anyway, and a ppoll first would
      // put a second system call between a packet's arrival and its answer. Only a blocked send
      // waits for POLLOUT here. A polled backend (no fd to ask) is looked at on every pass.
      ready = write == 0 || fd < 0 || doorbell_.ready_now(fd, static_cast<short>(POLLIN | write), backend_->group_fd());
      // Spinning must not keep a woken application thread off this core: on a machine with
      // few cores that turns a microsecond wait into a scheduler time slice.
      sched_yield();
    } else {
      slice.use_short();
      sleep_until(now, until, static_cast<short>(POLLIN | write), source);
    }
  }
}

bool EmbeddedHost::pull_work() {
  WorkSource* source = work_source_.load();
  if (source == nullptr) return false;
  pulling_ = true;
  const bool pulled = source->pull();
  pulling_ = false;
  if (pulled) send_pulled();
  return pulled;
}

void EmbeddedHost::send_pulled() {
  // A step would receive first: a system call the posted packets need not wait for. More than
  // one step's worth kicks the doorbell (after_call), so that the next pass steps for the rest.
  std::unique_lock lock(mutex_);
  after_call(lock, steady_now(), Sending::now);
}

bool EmbeddedHost::progress() {
  std::unique_lock lock = lock_for_call(steady_now());
  const bool worked = step(steady_now());
  lock.unlock();
  events_.deliver();
  return worked;
}

bool EmbeddedHost::step(core::Time now) {
  const std::size_t received = receive(now);
  bool worked = received > 0;
  // What the packets completed reaches the daemon's CQ rings before the answers they call for
  // leave: a send may run a veth peer's whole receive path inside the system call, and an ACK
  // is no reason to keep a completion from its client (between two udp daemons, ib_send_lat
  // paid it on every message). Without a sink the application polls the engine under this
  // lock, and the collection at the end of the step is soon enough.
  if (worked && completion_sink_) collect_events();
  if (const auto due = device_.next_deadline(); due && *due <= now) {
    device_.advance(now);
    worked = true;
  }
  worked |= transmit(now, answers_may_wait(now, received) ? Answers::may_wait : Answers::leave).packets > 0;
  collect_events();
  core::Time deadline = next_wakeup();
  if (unsent_.any) deadline = earliest(deadline, unsent_.since + kBusyPollLease);
  deadline_.store(deadline);
  return worked;
}

bool EmbeddedHost::answers_may_wait(core::Time now, std::size_t received) const {
  // A daemon's clients poll their CQ rings, not this host (cq_ring.hpp): last_call_ and
  // last_poll_found_ below are the daemon's own, and say nothing of a client at work.
  if (work_source_.load() != nullptr) return false;
  if (unsent_.any) return !unsent_.posts && now - unsent_.since < kBusyPollLease;
  // An application whose last poll, less than kSteadyPolling ago, found a completion is at
  // work on it, and likely to post its own answer to what came: an RDMA WRITE without
  // immediate completes nothing at the responder, so ib_write_lat spins on its buffer and posts
  // its WRITE once it sees the peer's there. Its ACK then leaves with that WRITE, behind it,
  // and the peer's poll finds both.
  const core::Time last = last_call_.load(std::memory_order_relaxed);
  return received > 0 && last != 0 && now - last < kSteadyPolling && last_poll_found_.load(std::memory_order_relaxed);
}

void EmbeddedHost::keep_unsent(core::Time since, bool posts) {
  if (!unsent_.any) unsent_.since = since;
  unsent_.any = true;
  unsent_.posts = unsent_.posts || posts;
}

core::Time EmbeddedHost::next_wakeup() const {
  std::optional<core::Time> t = device_.next_deadline();
  if (faults_) {
    if (const auto held = faults_->next_release(); held && (!t || *held < *t)) t = held;
  }
  return t.value_or(0);
}

std::size_t EmbeddedHost::receive(core::Time now) {
  std::size_t received = 0;
  for (int burst = 0; burst < kReceiveBurstsPerStep; ++burst) {
    const std::span<const core::RxPacket> packets = backend_->receive();
    if (packets.empty()) break;
    received += deliver(now, packets);
    if (!backend_->may_have_more()) break;  // the next step looks again
  }
  if (faults_) received += deliver(now, {});  // held packets that came due
  return received;
}

std::size_t EmbeddedHost::deliver(core::Time now, std::span<const core::RxPacket> packets) {
  if (faults_) packets = faults_->receive(now, packets);
  if (capture_) capture_->record_rx(packets, backend_->local_port());
  for (const core::RxPacket& p : packets) device_.receive(now, p);
  return packets.size();
}

EmbeddedHost::Sent EmbeddedHost::transmit(core::Time now, Answers answers) {
  memory_.flush();  // writes land before the ACKs that announce them leave
  Sent sent;
  if (faults_) faults_->release(now, tx_queue_);
  while (sent.packets < kTransmitPerStep) {
    stage(now);
    answers_last(tx_queue_);
    const std::size_t looped = loop_back(now);
    sent.packets += looped;  // work, and bounded per step like the rest
    if (tx_queue_.empty()) {
      if (looped == 0) break;
      continue;  // all looped back: the engine may have answers to send
    }
    if (answers == Answers::may_wait && std::all_of(tx_queue_.begin(), tx_queue_.end(), is_answer)) {
      keep_unsent(now, false);  // in tx_queue_, for the next transmit
      return sent;
    }
    const std::size_t n = backend_->send(tx_queue_);
    if (capture_) capture_->record_tx(std::span(tx_queue_).first(n));  // may take the buffers
    for (std::size_t i = 0; i < n; ++i) device_.recycle(std::move(tx_queue_[i]));
    tx_queue_.erase(tx_queue_.begin(), tx_queue_.begin() + static_cast<std::ptrdiff_t>(n));
    sent.packets += n;
    if (!tx_queue_.empty()) break;  // the socket's send buffer is full: wait for POLLOUT
  }
  unsent_ = {};
  tx_blocked_.store(!tx_queue_.empty());
  // Reaching the per-step bound leaves the rest to the next step.
  sent.more = !tx_queue_.empty() || sent.packets >= kTransmitPerStep;
  return sent;
}

bool EmbeddedHost::stage(core::Time now) {
  while (tx_queue_.size() < kTransmitBurst) {
    std::optional<core::TxPacket> p = device_.transmit(now);
    if (!p) break;
    if (faults_) {
      faults_->send(now, std::move(*p), tx_queue_);
    } else {
      tx_queue_.push_back(std::move(*p));
    }
  }
  return !tx_queue_.empty();
}

std::size_t EmbeddedHost::loop_back(core::Time now) {
  // Both ends on this device (two QPs of one process, or two clients of one daemon): the
  // packets turn round here, as a NIC loops back traffic to its own address, and skip the
  // kernel's UDP path both ways (it was over a third of a daemon's time in ib_send_lat).
  // Faults and the capture see them as sent and received packets.
  const core::Gid& self = backend_->local_gid();
  auto wire = tx_queue_.begin();
  for (auto it = tx_queue_.begin(); it != tx_queue_.end(); ++it) {
    if (it->route.dst != self) {
      if (wire != it) *wire = std::move(*it);
      ++wire;
      continue;
    }
    if (capture_) {
      capture_->record(net::CaptureStage::wall_clock_ns(), net::Direction::tx, it->route, wire::kRoceV2Port, it->bytes);
      capture_->commit();
    }
    core::RxPacket in;
    in.bytes = it->bytes;
    in.src_gid = it->route.src;
    in.dst_gid = it->route.dst;
    in.src_port = it->route.src_port;
    in.ipv4_id = it->route.ipv4_id;
    // No wire touched the packet: its ICRC is unwritten (DeviceConfig::unsealed_loopback) or
    // was sealed a moment ago. Only the fault stage can corrupt it, and then the engine checks
    // it as it would a wire's.
    in.icrc_checked = !faults_;
    deliver(now, {&in, 1});
    ++loopback_packets_;
    device_.recycle(std::move(*it));
  }
  const std::size_t looped = static_cast<std::size_t>(tx_queue_.end() - wire);
  tx_queue_.erase(wire, tx_queue_.end());
  return looped;
}

void EmbeddedHost::set_completion_sink(std::function<void(core::Device&)> sink) {
  std::lock_guard lock(mutex_);
  completion_sink_ = std::move(sink);
}

void EmbeddedHost::collect_events() {
  carry_out_group_changes();  // leaves (a detach, a destroyed QP); joins happen in attach_mcast
  memory_.flush();            // and before completions and events reach the application
  if (completion_sink_) {
    completion_sink_(device_);
  } else {
    // Nobody mirrors CQs: still empty the engine's list, which would otherwise gain an entry
    // for every CQ created and destroyed after a completion.
    device_.take_completed_cqs(unused_completed_cqs_);
  }
  while (const auto cq = device_.next_cq_event()) events_.push(*cq);
  while (const auto event = device_.next_async_event()) events_.push(*event);
  while (auto event = device_.next_cm_event()) events_.push(std::move(*event));
}

}  // namespace softrdma::host
