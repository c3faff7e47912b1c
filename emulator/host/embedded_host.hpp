// The embedded host (docs/architecture.md, "The embedded host"): one transport engine, one
// backend (a UDP socket unless the daemon brings another) and one progress thread, for the
// verbs shim or softrdmad to sit on.
//
// Every engine call happens under one lock. The progress thread receives, fires timers,
// transmits and delivers events; application threads take two short cuts so that latency
// does not wait for a thread handoff: call() sends what a verbs call queued (post_send's
// packets leave from the posting thread), and poll_cq() runs a receive step itself when the
// CQ is empty. After activity the thread keeps looking for work for HostConfig::spin (of its
// own passes, spin_budget.hpp), then sleeps in ppoll() until the socket (or a joined multicast
// group's, net/udp_groups.hpp) is readable, a kick or the engine's next deadline, so an idle
// device costs no CPU. While an application thread busy-polls a CQ (and so receives itself),
// the thread leaves the socket to it and wakes only for timers and kicks: two threads
// contending for every packet would halve a two-core machine.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "emulator/core/device.hpp"
#include "emulator/core/memory.hpp"
#include "emulator/host/doorbell.hpp"
#include "emulator/host/event_delivery.hpp"
#include "emulator/host/fault_stage.hpp"
#include "emulator/host/host_clock.hpp"
#include "emulator/host/local_memory.hpp"
#include "emulator/host/spinning_mutex.hpp"
#include "emulator/net/backend.hpp"
#include "emulator/net/capture_stage.hpp"

namespace softrdma::host {

struct HostConfig {
  // The address to bind, IPv4 or IPv6 text; none: the first free 127.0.0.N
  // (loopback_address.hpp).
  std::optional<std::string> ip;
  // The device's limits. Its GID table is replaced by the bound address's GID, at index 0.
  core::DeviceConfig device;
  // How long the progress thread keeps looking for work after activity before it sleeps, in
  // its own passes: time it spends preempted does not count (spin_budget.hpp).
  std::chrono::nanoseconds spin = std::chrono::microseconds(50);
  // Write every packet sent and received to this pcap file (net/capture_stage.hpp); none: off.
  std::optional<std::string> capture_path;
  // Seeded loss, duplication, reordering, delay and corruption (net/fault_plan.hpp); none: off.
  std::optional<net::FaultPlan> faults;
  // Where registered memory is: null for this process's (plain pointers); the daemon passes
  // its ProcessMemory (process_memory.hpp). It must outlive the host.
  core::Memory* memory = nullptr;
  // Send runs of equal packets as UDP GSO datagrams (net/udp_backend.hpp); off: one datagram
  // per packet, which is what a tcpdump on the interface can decode packet by packet.
  bool udp_gso = true;
  // Opens another backend than the udp one (softrdmad's dpdk); `ip` and `udp_gso` then do
  // nothing. Empty: udp.
  std::function<net::BackendOpen()> open_backend;
};

struct HostStats {
  core::DeviceCounters device;
  net::UdpCounters udp;
  net::CaptureCounters capture;       // all 0 without a capture
  FaultStats faults;                  // all 0 without faults
  std::vector<net::NamedCount> port;  // the backend's port_counters(); none for udp
};

class EmbeddedHost;

// Work that reaches the host other than by verbs calls and packets: the daemon's clients post
// through shared-memory rings (work_ring.hpp). The progress thread calls these without the
// host's lock.
class WorkSource {
 public:
  virtual ~WorkSource() = default;
  // Hands what is waiting to the engine (through call()); whether there was any.
  virtual bool pull() = 0;
  // The progress thread is about to sleep: announce it, so that producers ring the doorbell
  // (doorbell_fd()), and say whether work came meanwhile (then it does not sleep).
  virtual bool going_to_sleep() = 0;
  virtual void woke() = 0;
};

struct HostStart {
  std::unique_ptr<EmbeddedHost> host;  // null on failure
  std::string error;                   // on failure: one line for a person
};

class EmbeddedHost {
 public:
  // Binds the address, builds the device and starts the progress thread.
  static HostStart start(HostConfig config);

  EmbeddedHost(const EmbeddedHost&) = delete;
  EmbeddedHost& operator=(const EmbeddedHost&) = delete;
  ~EmbeddedHost();  // stop()s

  // Joins the progress thread. Packets not yet handed to the kernel are dropped with it.
  // Later calls still work, with no background progress; stop() again does nothing.
  void stop();

  const std::string& address() const { return backend_->local_address(); }  // "127.0.0.2", "::1"
  const core::Gid& gid() const { return backend_->local_gid(); }            // GID index 0
  // The capture (SOFTRDMA_CAPTURE), for the iWARP device beside this one to write its frames
  // into the same file; null without one. Set at start, never changed.
  net::CaptureStage* capture() const { return capture_.get(); }

  // Runs f(device, now) under the host's lock and returns what it returns (f must not keep
  // the Device& beyond the call, nor call into the host: the lock is not recursive).
  // Afterwards, on this thread: sends the packets the call queued (so post_send's packets
  // leave before call() returns), delivers the events it raised, and wakes the progress
  // thread if it must look again (a timer armed earlier than it sleeps for, or more to send).
  template <class F>
  auto call(F&& f) -> std::invoke_result_t<F, core::Device&, core::Time>;
  // call() for post_send: while the application busy-polls a CQ (see kBusyPollLease), the
  // packets wait for its next poll_cq(), which sends everything posted since in one batch (one
  // sendmmsg, runs of equal packets as one GSO datagram), as a NIC fetches a burst of WQEs per
  // doorbell; if the application stops polling, the progress thread sends them at the lease's
  // end. On the progress thread inside WorkSource::pull() (the daemon's work rings), the
  // packets wait for the pull's end, so that one pull's posts leave as one batch.
  // Otherwise: as call().
  template <class F>
  auto post(F&& f) -> std::invoke_result_t<F, core::Device&, core::Time>;

  // Device::poll_cq; when the CQ is empty and datagrams are waiting on the socket, receives
  // them on this thread and looks again. The answers those call for (ACKs) leave as post()'s
  // packets do: while the application busy-polls, with its next post or poll.
  int poll_cq(std::uint32_t cq, std::span<core::Wc> out);
  // Device::req_notify_cq, and a sign that the application will now sleep until an event:
  // use this rather than call() for it, or events wait for the busy-poll lease to end.
  int req_notify_cq(std::uint32_t cq, bool solicited_only);
  // Device::destroy_qp, after sending the packets the engine has ready: sends posted before
  // the destroy leave, as a NIC sends the WQEs whose doorbell it has read (mckey's sender
  // posts its datagrams unsignaled and destroys its QP at once).
  int destroy_qp(std::uint32_t qpn);

  // Multicast (core::Device::attach_mcast): the device's limits, all 0 where the backend
  // cannot receive groups; attaching makes the backend join the group when its first QP
  // attaches (a join it refuses fails the attach with its errno), and the last QP's detach or
  // destruction makes it leave.
  const core::MulticastLimits& multicast_limits() const { return device_.config().mcast; }
  int attach_mcast(std::uint32_t qpn, const core::Gid& group);
  int detach_mcast(std::uint32_t qpn, const core::Gid& group);

  // Completion-channel and async events (see event_delivery.hpp for the threads they run on).
  void set_event_handlers(CqEventHandler on_cq, AsyncEventHandler on_async);
  // The connection manager's events (core::Device::next_cm_event), on the same terms.
  void set_cm_handler(CmEventHandler on_cm);
  // Called under the host's lock after every step and call that may have completed work, before
  // events are delivered: the daemon moves new completions into its clients' shared CQ rings
  // there (cq_ring.hpp). It must not call into the host. Empty: none.
  void set_completion_sink(std::function<void(core::Device&)> sink);
  // The progress thread also pulls work from `source` (null: none). Unsetting it returns once
  // the progress thread no longer uses the old one, which may then be destroyed.
  void set_work_source(WorkSource* source);
  // Hands the work source's waiting posts to the engine, then sends the packets they queued as
  // one batch; whether there were any. The progress thread calls it on every pass; a thread
  // about to act for one producer calls it first, so that the act follows every post made
  // before it (a packet looped back to another producer's QP finds that QP's receives).
  bool pull_work();
  // Writing 1 (8 bytes) to this eventfd wakes the progress thread.
  int doorbell_fd() const { return doorbell_.fd(); }

  HostStats stats();

 private:
  EmbeddedHost(std::unique_ptr<net::Backend> backend, core::DeviceConfig device, core::Memory* memory,
               std::chrono::nanoseconds spin);

  struct Sent {
    std::size_t packets = 0;
    bool more = false;  // the engine has more, or the socket's send buffer is full
  };

  void run();                 // the progress thread
  void send_pulled();         // after a pull: sends what its posts queued (post())
  bool progress();            // one step under the lock, then events; whether anything happened
  bool step(core::Time now);  // receive (and hand on what it completed), timers, transmit, events; the lock is held
  std::size_t receive(core::Time now);
  std::size_t deliver(core::Time now, std::span<const core::RxPacket> packets);  // through faults and capture
  core::Time next_wakeup() const;  // the engine's deadline or a held packet's, 0 for none
  // may_wait: answers alone (see answers_may_wait) stay in tx_queue_, noted in unsent_.
  enum class Answers { leave, may_wait };
  Sent transmit(core::Time now, Answers answers = Answers::leave);
  // In a progress step that received `received` packets: whether answers alone may wait for the
  // application's next post (kBusyPollLease at most) rather than leave now.
  bool answers_may_wait(core::Time now, std::size_t received) const;
  // Notes that packets wait (in the engine or tx_queue_) for a poll or post, from `since`.
  void keep_unsent(core::Time since, bool posts);
  // Builds the engine's next packets (a burst at most, through the fault stage) into
  // tx_queue_ without sending them; whether any wait there.
  bool stage(core::Time now);
  // Delivers tx_queue_'s packets to our own address and takes them out of it; how many.
  std::size_t loop_back(core::Time now);
  void collect_events();
  // Has the backend join or leave the groups the engine's port changed membership of; the
  // errno of the first join it refused, else 0. The lock is held.
  int carry_out_group_changes();
  // After engine calls on an application thread: sends what they queued, publishes the
  // deadline (aim_timer), releases the lock, delivers events and kicks the progress thread when
  // packets are left to send. at_next_poll (post()): while the application busy-polls, what the
  // call queued waits for its next poll_cq(), and the progress thread sends it at the lease's
  // end if no poll came first. with_next_post (a poll's receive): as at_next_poll, but polls
  // that find completions let it wait on for a while (poll_cq). in_burst (a post that follows
  // the last one at once): as at_next_poll, and outside a lease too until a GSO burst's worth
  // waits, for kBurstHold at most.
  enum class Sending { now, at_next_poll, with_next_post, in_burst };
  void after_call(std::unique_lock<SpinningMutex>& lock, core::Time now, Sending sending);
  // Sets the doorbell's timer for `deadline` (0: none) if the progress thread sleeps past it,
  // and cancels one set for an earlier deadline. The lock is held.
  void aim_timer(core::Time now, core::Time deadline);
  void note_poll(core::Time now);
  // Whether a post at `now` comes at once after the last one returned: the application posts a
  // burst (ib_send_bw between its polls), whose packets may leave together.
  bool follows_post(core::Time now) const;
  // The lock, for a verbs call or a progress step at `now`: spun for unless the application
  // armed a CQ lately (it sleeps on completion events).
  std::unique_lock<SpinningMutex> lock_for_call(core::Time now);
  // The progress thread woke at a lease's end: doubles the next steady lease if the application
  // had renewed a steady one, and starts again from the shortest if it had not renewed it.
  void lengthen_steady_lease(bool renewed);
  // A verbs call at `now` (a poll or a post): whether it goes on with the streak of calls, or
  // follows a pause long enough to start a new one.
  bool continues_streak(core::Time now);
  // The progress thread sleeps until `until` (kNever: no limit) or `fd` has `events`; whether
  // a kick or the descriptor woke it (false: the time came, or it did not sleep).
  bool sleep_until(core::Time now, core::Time until, short events, WorkSource* source);

  LocalMemory local_memory_;  // unless HostConfig::memory names another
  core::Memory& memory_;      // the one the device uses; flushed before packets leave and events go out
  std::unique_ptr<net::Backend> backend_;
  SpinningMutex mutex_;  // guards device_, backend_'s I/O and counters, tx_queue_
  core::Device device_;
  std::vector<core::TxPacket> tx_queue_;  // taken from the engine, not yet accepted by the kernel
  // What after_call left for poll_cq() to send; guarded by mutex_.
  struct Unsent {
    bool any = false;    // packets wait
    bool posts = false;  // among them, a post()'s
    core::Time since = 0;
  } unsent_;
  std::uint64_t loopback_packets_ = 0;                  // guarded by mutex_
  std::unique_ptr<net::CaptureStage> capture_;          // null without a capture; guarded by mutex_
  std::optional<FaultStage> faults_;                    // none without faults; guarded by mutex_
  std::function<void(core::Device&)> completion_sink_;  // guarded by mutex_
  std::vector<std::uint32_t> unused_completed_cqs_;     // without a sink; guarded by mutex_
  std::atomic<WorkSource*> work_source_{nullptr};
  // This thread is in pull_work(): its posts wait for send_pulled().
  static thread_local bool pulling_;
  std::atomic<std::uint64_t> loops_{0};  // progress loop iterations begun (set_work_source waits on it)
  EventDelivery events_;
  Doorbell doorbell_;
  const core::Time spin_ns_;
  core::Time timer_at_ = 0;              // when the doorbell's timer goes off, 0 for never; guarded by mutex_
  std::atomic<core::Time> deadline_{0};  // the engine's next deadline, 0 for none
  std::atomic<bool> tx_blocked_{false};  // tx_queue_ waits for POLLOUT
  std::atomic<bool> stopping_{false};
  // When the progress thread wakes on its own at the latest, while it sleeps (kNever: no
  // limit); 0 while it is awake, when it reads deadline_ before it sleeps again.
  std::atomic<core::Time> wake_at_{0};
  // Busy-polling (see kBusyPollLease): poll_cq() calls in quick succession, when the last one
  // or the last post() was (posts between polls keep a streak going: a sender posts a burst
  // between its polls), and until when the progress thread leaves the socket to the application.
  std::atomic<std::uint32_t> polls_{0};
  std::atomic<core::Time> last_call_{0};
  std::atomic<core::Time> streak_start_{0};  // when the streak's first call was
  std::atomic<bool> last_poll_found_{true};  // the last poll_cq() returned completions
  CqArming arming_;
  std::atomic<core::Time> app_polls_until_{0};
  std::atomic<bool> polls_steadily_{false};   // the last lease was a steady one
  std::atomic<core::Time> steady_lease_{0};   // the next steady lease's length; from kSteadyLeaseFirst
  std::atomic<core::Time> last_post_end_{0};  // when the last post() returned
  std::thread thread_;
};

template <class F>
auto EmbeddedHost::call(F&& f) -> std::invoke_result_t<F, core::Device&, core::Time> {
  std::unique_lock lock(mutex_);
  const core::Time now = steady_now();
  // Any verbs call keeps a streak going: ibv_rc_pingpong posts its 500 receives between polls.
  continues_streak(now);
  if constexpr (std::is_void_v<std::invoke_result_t<F, core::Device&, core::Time>>) {
    std::forward<F>(f)(device_, now);
    after_call(lock, now, Sending::now);
  } else {
    auto result = std::forward<F>(f)(device_, now);
    after_call(lock, now, Sending::now);
    return result;
  }
}

template <class F>
auto EmbeddedHost::post(F&& f) -> std::invoke_result_t<F, core::Device&, core::Time> {
  std::unique_lock lock = lock_for_call(steady_now());
  const core::Time now = steady_now();
  auto result = std::forward<F>(f)(device_, now);
  // In a pull, send_pulled() sends, collects and publishes the deadline once for all its posts.
  if (!pulling_) after_call(lock, now, follows_post(now) ? Sending::in_burst : Sending::at_next_poll);
  const core::Time end = steady_now();
  continues_streak(end);  // a pause before a post ends a streak, as one before a poll
  last_post_end_.store(end, std::memory_order_relaxed);
  return result;
}

}  // namespace softrdma::host
