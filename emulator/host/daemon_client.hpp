// The verbs shim's side of softrdmad (daemon mode, SOFTRDMA_DAEMON): verbs are requests on the
// daemon's control socket (daemon_protocol.hpp), except the data path. Each CQ has a ring in
// shared memory that the daemon fills (cq_ring.hpp), so ibv_poll_cq makes no system call; posts
// go into one work ring (work_ring.hpp) that the daemon's progress thread drains, with a
// doorbell only while it sleeps. So that ibv_post_send still answers EINVAL and ENOMEM as the
// engine would, the client keeps a view of each queue (type, state, limits: the engine's own
// checks, core/wr_checks.hpp) and credits: WRs the queue is known to take, refreshed with a
// request (queue_room) when they run out. Events arrive on a second socket that a thread of
// this client reads.
//
// Requests from all threads share one connection, one at a time, as the kernel's uverbs file
// serialises commands per context. When the daemon goes away, every verb fails with EIO and
// the async event handler gets device_fatal once: the application sees an error, never a hang.
#pragma once

#include <atomic>
#include <cerrno>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "emulator/host/cq_ring.hpp"
#include "emulator/host/daemon_protocol.hpp"
#include "emulator/host/device_link.hpp"
#include "emulator/host/work_ring.hpp"

namespace softrdma::host {

class DaemonClient;

struct DaemonConnect {
  std::unique_ptr<DaemonClient> client;  // null on failure
  std::string error;                     // on failure: one line for a person
};

class DaemonClient final : public DeviceLink {
 public:
  static DaemonConnect connect(const std::string& socket_path);

  DaemonClient(const DaemonClient&) = delete;
  DaemonClient& operator=(const DaemonClient&) = delete;
  ~DaemonClient() override;

  // The daemon's pid (SO_PEERCRED), for PR_SET_PTRACER.
  pid_t daemon_pid() const { return daemon_pid_; }

  const std::string& address() const override { return address_; }

  core::Expected<std::uint32_t> alloc_pd() override;
  int dealloc_pd(std::uint32_t pd) override;
  core::Expected<core::MrKeys> reg_mr(std::uint32_t pd, std::uint64_t host, std::uint64_t length, std::uint64_t iova,
                                      std::uint32_t access) override;
  int rereg_mr(std::uint32_t lkey, const core::MrChange& change) override;
  int dereg_mr(std::uint32_t lkey) override;
  core::Expected<std::uint32_t> alloc_mw(std::uint32_t pd, int type) override;
  int dealloc_mw(std::uint32_t rkey) override;
  core::Expected<std::uint32_t> bind_mw(std::uint32_t qpn, std::uint32_t mw_rkey, std::uint32_t mr_lkey,
                                        std::uint64_t addr, std::uint64_t length, std::uint32_t access,
                                        std::optional<std::uint64_t> signal_wr_id) override;
  core::Expected<std::uint32_t> create_cq(std::uint32_t cqe) override;
  int destroy_cq(std::uint32_t cq) override;
  int resize_cq(std::uint32_t cq, std::uint32_t cqe) override;
  int poll_cq(std::uint32_t cq, std::span<core::Wc> out) override;
  int req_notify_cq(std::uint32_t cq, bool solicited_only) override;
  core::Expected<std::uint32_t> create_srq(std::uint32_t pd, std::uint32_t max_wr, std::uint32_t max_sge,
                                           std::uint32_t limit) override;
  int modify_srq(std::uint32_t srq, std::uint32_t max_wr, std::uint32_t limit, bool set_max_wr,
                 bool set_limit) override;
  int query_srq(std::uint32_t srq, std::uint32_t& max_wr, std::uint32_t& max_sge, std::uint32_t& limit) override;
  int destroy_srq(std::uint32_t srq) override;
  core::Expected<std::uint32_t> create_ah(std::uint32_t pd, const core::AddressVector& av) override;
  int destroy_ah(std::uint32_t ah) override;
  bool has_xrc() const override { return true; }
  core::Expected<std::uint32_t> alloc_xrcd() override;
  int dealloc_xrcd(std::uint32_t xrcd) override;
  core::Expected<std::uint32_t> create_xrc_srq(std::uint32_t pd, std::uint32_t max_wr, std::uint32_t max_sge,
                                               std::uint32_t limit, const core::Device::XrcSrq& xrc) override;
  int open_qp(std::uint32_t xrcd, std::uint32_t qpn) override;
  // Tag matching: the daemon's device's caps (from its greeting) and its list operations.
  core::TmCaps tm_caps() const override { return tm_caps_; }
  core::Expected<std::uint32_t> create_tm_srq(std::uint32_t pd, std::uint32_t max_wr, std::uint32_t max_sge,
                                              std::uint32_t limit, const core::Device::TmSrq& tm) override;
  int post_srq_ops(std::uint32_t srq, core::SrqOp& op) override;
  core::Expected<core::QpCreated> create_qp(const core::QpInitAttr& attr) override;
  int modify_qp(std::uint32_t qpn, const core::QpAttr& attr, std::uint32_t mask) override;
  int query_qp(std::uint32_t qpn, core::QpAttr& attr, core::QpInitAttr& init) override;
  int destroy_qp(std::uint32_t qpn) override;
  int post_send(std::uint32_t qpn, std::span<const core::SendWr> wrs, std::size_t& posted) override;
  int post_recv(std::uint32_t qpn, std::span<const core::RecvWr> wrs, std::size_t& posted) override;
  int post_srq_recv(std::uint32_t srq, std::span<const core::RecvWr> wrs, std::size_t& posted) override;
  void set_event_handlers(CqEventHandler on_cq, AsyncEventHandler on_async) override;
  // Connection management: requests to the daemon's CM, events from it (daemon_cm_codec.hpp).
  core::Expected<std::uint32_t> cm_listen(std::uint64_t service_id) override;
  int cm_stop_listening(std::uint32_t listener) override;
  core::Expected<std::uint32_t> cm_connect(const core::CmConnect& request) override;
  int cm_accept(std::uint32_t id, const core::CmAccept& reply) override;
  int cm_ready(std::uint32_t id, std::span<const std::uint8_t> private_data) override;
  int cm_reject(std::uint32_t id, std::span<const std::uint8_t> private_data) override;
  int cm_disconnect(std::uint32_t id, std::span<const std::uint8_t> private_data) override;
  core::Expected<std::uint32_t> cm_resolve_service(const core::CmServiceQuery& query) override;
  int cm_answer_service(std::uint32_t id, const core::CmServiceAnswer& answer) override;
  void cm_destroy(std::uint32_t id) override;
  void set_cm_handler(CmEventHandler on_cm) override;
  // The iWARP CM of srdmaiw0 (daemon_iwarp_codec.hpp): on srdma0's socket, EOPNOTSUPP.
  core::Expected<std::uint32_t> iw_listen(const core::TcpEndpoint& local) override;
  int iw_stop_listening(std::uint32_t listener) override;
  core::Expected<std::uint32_t> iw_connect(const core::TcpEndpoint& remote, std::uint32_t qpn,
                                           const core::MpaOffer& offer) override;
  int iw_accept(std::uint32_t id, std::uint32_t qpn, const core::MpaOffer& offer) override;
  int iw_reject(std::uint32_t id, std::span<const std::uint8_t> private_data) override;
  int iw_disconnect(std::uint32_t id) override;
  void iw_destroy(std::uint32_t id) override;
  void set_iw_handler(IwarpEventHandler on_iw) override;
  // Multicast: the daemon's device's limits (from its greeting) and its groups.
  core::MulticastLimits multicast_limits() const override { return multicast_limits_; }
  int attach_mcast(std::uint32_t qpn, const core::Gid& group) override;
  int detach_mcast(std::uint32_t qpn, const core::Gid& group) override;

 private:
  // What the daemon's greeting says of its device.
  struct Offers {
    core::MulticastLimits multicast_limits;
    core::TmCaps tm_caps;
  };
  DaemonClient(int fd, int events_fd, pid_t daemon_pid, const Offers& offers, std::string address);

  // Sends the request `encode(Writer&)` writes after `op`, reads the reply and hands the
  // results (after the errno) to `decode(Reader&, int err)`; returns the reply's errno, or EIO
  // when the daemon is gone or answers nonsense.
  template <class Encode, class Decode>
  int transact(daemon::Op op, Encode&& encode, Decode&& decode, int pass_fd = -1);
  template <class T>
  core::Expected<T> create(daemon::Op op, auto&& encode);
  int simple(daemon::Op op, auto&&... args);
  // WRs in as many requests as they need (kMaxMessage); stops at the first failure.
  template <class Wr>
  int post_batches(daemon::Op op, std::uint32_t queue, std::span<const Wr> wrs, std::size_t& posted);

  int poll_by_request(std::uint32_t cq, std::span<core::Wc> out);
  int simple_with_fd(daemon::Op op, int fd);
  void attach_work_ring(int doorbell);
  // Posting through the work ring, with post_mutex_ held: each WR passes `check` (0 or an
  // errno) and takes a credit of `credits`.
  // `pushed`: the queue's count of WRs put in the ring, for the room slots (null for SRQs).
  template <class Wr, class Check>
  int post_via_ring(daemon::Op op, std::uint32_t queue, core::Device::WorkQueue which, std::uint32_t& credits,
                    std::uint32_t* pushed, std::span<const Wr> wrs, std::size_t& posted, Check&& check);
  // Credits for a queue that ran out: from the room slot if the daemon published some, else
  // asked for (queue_room). 0 with `err` 0 means the queue is full.
  std::uint32_t refill_credits(core::Device::WorkQueue which, std::uint32_t queue, const std::uint32_t* pushed,
                               int& err);
  bool push_record();  // record_ into the work ring, waiting for room; false when the daemon is gone
  void ring_doorbell();
  void read_events();                                    // the event thread
  void dispatch(std::span<const std::uint8_t> message);  // one event message, under handlers_mutex_
  int cm_with_data(daemon::Op op, std::uint32_t id, std::span<const std::uint8_t> private_data);
  void lost_daemon();  // device_fatal, once

  int fd_ = -1;
  int events_fd_ = -1;  // our end of the event socket pair
  pid_t daemon_pid_ = 0;
  core::MulticastLimits multicast_limits_;
  core::TmCaps tm_caps_;
  std::string address_;
  std::mutex mutex_;  // one request at a time; guards request_, reply_
  std::vector<std::uint8_t> request_;
  std::vector<std::uint8_t> reply_;
  std::atomic<bool> gone_{false};
  std::atomic<bool> fatal_raised_{false};
  std::atomic<bool> closing_{false};
  // Each CQ's ring, and a lock so that one thread at a time consumes it.
  struct RingedCq {
    std::unique_ptr<CqRing> ring;
    std::mutex consumer;
    // Taken from the ring to drop a reset QP's completions, and returned before the ring's.
    std::deque<core::Wc> kept;
  };
  // Drops the completions of `qpn` from the CQ's ring, as the engine drops those it still holds
  // when a QP goes back to RESET (core::Device::modify_qp).
  void forget_completions(std::uint32_t cq, std::uint32_t qpn);
  // The posting side: what the engine would check, known here (see the top of this file).
  struct QpView {
    core::QpType type = core::QpType::rc;
    core::QpState state = core::QpState::reset;
    core::QpCap cap;
    std::uint32_t send_cq = 0, recv_cq = 0;
    bool on_srq = false;  // or no receive queue at all (XRC)
    std::uint32_t send_credits = 0;
    std::uint32_t recv_credits = 0;
    std::uint32_t send_pushed = 0;  // WRs put in the work ring so far (free-running)
    std::uint32_t recv_pushed = 0;
  };
  struct SrqView {
    std::uint32_t max_sge = 0;
    std::uint32_t credits = 0;
  };
  std::mutex post_mutex_;  // guards the views, work_'s producer side and record_
  std::unordered_map<std::uint32_t, QpView> qp_views_;
  std::unordered_map<std::uint32_t, SrqView> srq_views_;
  // Records a created SRQ's view, and returns it.
  core::Expected<std::uint32_t> with_view(core::Expected<std::uint32_t> srq, std::uint32_t max_sge);
  std::unordered_set<std::uint32_t> ahs_;
  std::unique_ptr<WorkRing> work_;  // null: posts go as requests
  int doorbell_fd_ = -1;
  std::vector<std::uint8_t> record_;
  std::shared_mutex cqs_mutex_;  // guards cqs_ (the map, not the rings)
  std::unordered_map<std::uint32_t, std::unique_ptr<RingedCq>> cqs_;
  std::mutex handlers_mutex_;
  CqEventHandler on_cq_;
  AsyncEventHandler on_async_;
  CmEventHandler on_cm_;
  IwarpEventHandler on_iw_;
  std::thread events_thread_;
};

}  // namespace softrdma::host
