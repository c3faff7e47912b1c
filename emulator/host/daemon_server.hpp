// softrdmad's side of the control protocol (daemon_protocol.hpp): it accepts verbs clients on
// a Unix socket and runs their requests on one engine, as a NIC serves the processes that
// open it (docs/architecture.md, "The daemon: softrdmad").
//
// Isolation: every handle a request names (PD, MR, MW, CQ, SRQ, AH, QP, and the AHs, MWs and
// MRs inside WRs) must be one this client created, else the request fails with EINVAL as the
// kernel answers a handle from another process; what the engine checks itself (lkeys in SGEs
// against the QP's PD, rkeys of arriving requests) then keeps one client's memory from
// another's. A client's MRs reach only its own memory (process_memory.hpp). When a client's
// connection closes (exit, crash, kill -9) its objects are destroyed, QPs first.
//
// Threads: one accept thread and one thread per client, each calling the host like an
// application thread would. Events go to the owning client's event socket.
//
// One server serves one device, as the kernel has one uverbs file per device: srdma0 on an
// EmbeddedHost, with shared-memory CQ and work rings and the InfiniBand CM, or srdmaiw0 on an
// IwarpHost, with CQ rings and the iWARP CM; its clients post with requests.
#pragma once

#include <sys/types.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <variant>
#include <vector>

#include "emulator/host/cq_ring.hpp"
#include "emulator/host/daemon_protocol.hpp"
#include "emulator/host/embedded_host.hpp"
#include "emulator/host/embedded_link.hpp"
#include "emulator/host/event_outbox.hpp"
#include "emulator/host/iwarp_host.hpp"
#include "emulator/host/process_memory.hpp"
#include "emulator/host/work_ring.hpp"

namespace softrdma::host {

struct DaemonOptions {
  std::string socket_path;
  // Besides the daemon's user, members of this group may attach (the socket is made 0660 and
  // given to the group); none: 0600.
  std::optional<gid_t> group;
  // At shutdown, how long clients get to read their flushed completions and leave before their
  // connections are closed.
  std::chrono::milliseconds shutdown_grace{2000};
};

class DaemonServer;

struct DaemonStart {
  std::unique_ptr<DaemonServer> server;  // null on failure
  std::string error;
};

class DaemonServer final : private WorkSource {
 public:
  // Listens on options.socket_path (replacing a stale socket file, refusing a live one) and
  // starts accepting. `host` must have been started with `memory` as its config's memory.
  static DaemonStart start(EmbeddedHost& host, ProcessMemory& memory, DaemonOptions options);
  static DaemonStart start(IwarpHost& host, ProcessMemory& memory, DaemonOptions options);

  DaemonServer(const DaemonServer&) = delete;
  DaemonServer& operator=(const DaemonServer&) = delete;
  ~DaemonServer();  // shutdown()s

  // Stops accepting, moves every client QP to the error state (their outstanding WRs complete
  // with IBV_WC_WR_FLUSH_ERR), tells every client the device is gone (IBV_EVENT_DEVICE_FATAL),
  // waits up to the grace for them to disconnect, then closes the rest and frees everything.
  void shutdown();

  std::size_t client_count();
  // Events waiting for room in clients' event sockets, and those a client that never reads lost.
  EventOutbox& outbox() { return outbox_; }

 private:
  struct Client {
    int fd = -1;
    int events_fd = -1;
    pid_t pid = 0;
    uid_t uid = 0;  // SO_PEERCRED's, for the log when its memory cannot be reached
    gid_t gid = 0;
    std::uint16_t slot = 0;  // in ProcessMemory; 0 until Hello
    // What the client created, guarded by mutex_. MRs and MWs by key index (key >> 8): an MW's
    // key byte changes with every bind.
    std::unordered_set<std::uint32_t> pds, cqs, srqs, ahs, qps, xrcds;
    // The XRC targets it opened again (open_qp), QPN -> handles: each destroy_qp closes one.
    std::unordered_map<std::uint32_t, std::uint32_t> opened_qps;
    std::unordered_map<std::uint32_t, std::uint32_t> mrs, mws;  // index -> key
    // Its connection manager listeners and connections (communication IDs, or the iWARP CM's
    // connections): those it opened, and those a peer's REQ, SIDR_REQ or MPA Request opened for
    // one of its listeners.
    std::unordered_set<std::uint32_t> cm_listeners, cm_ids;
    // WRs posted so far per QP, {send, recv} (free-running), for the room slots (work_ring.hpp).
    std::unordered_map<std::uint32_t, std::array<std::uint32_t, 2>> taken;
    std::thread thread;
    std::atomic<bool> finished{false};
    // Its work ring (work_ring.hpp), set once by attach_work_ring; one consumer at a time.
    std::mutex work_mutex;
    std::unique_ptr<WorkRing> work;
  };
  using Host = std::variant<EmbeddedHost*, IwarpHost*>;
  DaemonServer(Host host, ProcessMemory& memory, DaemonOptions options, int listen_fd, int stop_fd);
  static DaemonStart start(Host host, ProcessMemory& memory, DaemonOptions options);
  // Runs f(device, now) under the host's lock, as the verbs do.
  template <class F>
  auto on_engine(F&& f) {
    return std::visit([&](auto* host) { return host->call(f); }, host_);
  }
  // The host, when it is of that kind; else null.
  EmbeddedHost* roce() const {
    auto* const* host = std::get_if<EmbeddedHost*>(&host_);
    return host != nullptr ? *host : nullptr;
  }
  IwarpHost* iwarp() const {
    auto* const* host = std::get_if<IwarpHost*>(&host_);
    return host != nullptr ? *host : nullptr;
  }
  void set_host_handlers(bool on);  // the host's events, completion sink and work source to us, or to no one

  void accept_loop();
  void admit(int fd);
  void serve(Client& client);
  // Handles one request, with the descriptor that came with it (a request that keeps it sets
  // `passed` to -1); false when the message is malformed or names no op (the client is dropped).
  bool handle(Client& client, std::span<const std::uint8_t> request, int& passed, std::vector<std::uint8_t>& reply);
  // One op's handler, found by handle() in its table (daemon_requests.cpp): reads the op's
  // arguments from `in`, runs it and writes the reply to `out`, on the same terms as handle().
  using Handler = bool (DaemonServer::*)(Client& client, daemon::Reader& in, daemon::Writer& out, int& passed);
  // PDs, CQs, SRQs, AHs, QPs and QPs' multicast groups (daemon_object_requests.cpp).
  bool handle_alloc_pd(Client&, daemon::Reader&, daemon::Writer&, int&);
  bool handle_dealloc_pd(Client&, daemon::Reader&, daemon::Writer&, int&);
  bool handle_create_cq(Client&, daemon::Reader&, daemon::Writer&, int&);
  bool handle_drain_cq(Client&, daemon::Reader&, daemon::Writer&, int&);
  bool handle_destroy_cq(Client&, daemon::Reader&, daemon::Writer&, int&);
  bool handle_resize_cq(Client&, daemon::Reader&, daemon::Writer&, int&);
  bool handle_poll_cq(Client&, daemon::Reader&, daemon::Writer&, int&);
  bool handle_req_notify_cq(Client&, daemon::Reader&, daemon::Writer&, int&);
  bool handle_create_srq(Client&, daemon::Reader&, daemon::Writer&, int&);
  bool handle_modify_srq(Client&, daemon::Reader&, daemon::Writer&, int&);
  bool handle_query_srq(Client&, daemon::Reader&, daemon::Writer&, int&);
  bool handle_destroy_srq(Client&, daemon::Reader&, daemon::Writer&, int&);
  bool handle_create_ah(Client&, daemon::Reader&, daemon::Writer&, int&);
  bool handle_destroy_ah(Client&, daemon::Reader&, daemon::Writer&, int&);
  bool handle_create_qp(Client&, daemon::Reader&, daemon::Writer&, int&);
  bool handle_modify_qp(Client&, daemon::Reader&, daemon::Writer&, int&);
  bool handle_query_qp(Client&, daemon::Reader&, daemon::Writer&, int&);
  bool handle_destroy_qp(Client&, daemon::Reader&, daemon::Writer&, int&);
  // XRC domains, XRC SRQs and targets opened again (daemon_xrc_requests.cpp).
  bool handle_alloc_xrcd(Client&, daemon::Reader&, daemon::Writer&, int&);
  bool handle_dealloc_xrcd(Client&, daemon::Reader&, daemon::Writer&, int&);
  bool handle_create_xrc_srq(Client&, daemon::Reader&, daemon::Writer&, int&);
  bool handle_open_qp(Client&, daemon::Reader&, daemon::Writer&, int&);
  // Whether the client holds `qpn`: its own QP, or a target it opened (under mutex_).
  bool holds_qp(Client& client, std::uint32_t qpn);
  // Closes one handle the client opened on the target `qpn`; nullopt when it opened none.
  std::optional<int> close_opened_qp(Client& client, std::uint32_t qpn);
  // Tag-matching SRQs and their list operations (daemon_tm_requests.cpp).
  bool handle_create_tm_srq(Client&, daemon::Reader&, daemon::Writer&, int&);
  bool handle_post_srq_ops(Client&, daemon::Reader&, daemon::Writer&, int&);
  bool handle_attach_mcast(Client&, daemon::Reader&, daemon::Writer&, int&);
  bool handle_detach_mcast(Client&, daemon::Reader&, daemon::Writer&, int&);
  using Membership = int (DeviceLink::*)(std::uint32_t qpn, const core::Gid& group);
  bool change_membership(Client&, daemon::Reader&, daemon::Writer&, Membership change);
  // MRs and MWs (daemon_memory_requests.cpp).
  bool handle_reg_mr(Client&, daemon::Reader&, daemon::Writer&, int&);
  bool handle_rereg_mr(Client&, daemon::Reader&, daemon::Writer&, int&);
  bool handle_dereg_mr(Client&, daemon::Reader&, daemon::Writer&, int&);
  bool handle_alloc_mw(Client&, daemon::Reader&, daemon::Writer&, int&);
  bool handle_dealloc_mw(Client&, daemon::Reader&, daemon::Writer&, int&);
  bool handle_bind_mw(Client&, daemon::Reader&, daemon::Writer&, int&);
  // Posts and the work ring (daemon_post_requests.cpp).
  bool handle_post_send(Client&, daemon::Reader&, daemon::Writer&, int&);
  bool handle_post_recv(Client&, daemon::Reader&, daemon::Writer&, int&);
  bool handle_post_srq_recv(Client&, daemon::Reader&, daemon::Writer&, int&);
  bool handle_attach_work_ring(Client&, daemon::Reader&, daemon::Writer&, int&);
  bool handle_queue_room(Client&, daemon::Reader&, daemon::Writer&, int&);
  // The connection manager (daemon_cm_requests.cpp).
  bool handle_cm_listen(Client&, daemon::Reader&, daemon::Writer&, int&);
  bool handle_cm_stop_listening(Client&, daemon::Reader&, daemon::Writer&, int&);
  bool handle_cm_connect(Client&, daemon::Reader&, daemon::Writer&, int&);
  bool handle_cm_resolve_service(Client&, daemon::Reader&, daemon::Writer&, int&);
  bool handle_cm_accept(Client&, daemon::Reader&, daemon::Writer&, int&);
  bool handle_cm_answer_service(Client&, daemon::Reader&, daemon::Writer&, int&);
  bool handle_cm_ready(Client&, daemon::Reader&, daemon::Writer&, int&);
  bool handle_cm_reject(Client&, daemon::Reader&, daemon::Writer&, int&);
  bool handle_cm_disconnect(Client&, daemon::Reader&, daemon::Writer&, int&);
  bool handle_cm_destroy(Client&, daemon::Reader&, daemon::Writer&, int&);
  // The iWARP connection manager (daemon_iwarp_requests.cpp).
  bool handle_iw_listen(Client&, daemon::Reader&, daemon::Writer&, int&);
  bool handle_iw_stop_listening(Client&, daemon::Reader&, daemon::Writer&, int&);
  bool handle_iw_connect(Client&, daemon::Reader&, daemon::Writer&, int&);
  bool handle_iw_accept(Client&, daemon::Reader&, daemon::Writer&, int&);
  bool handle_iw_reject(Client&, daemon::Reader&, daemon::Writer&, int&);
  bool handle_iw_disconnect(Client&, daemon::Reader&, daemon::Writer&, int&);
  bool handle_iw_destroy(Client&, daemon::Reader&, daemon::Writer&, int&);
  // Runs `step` on the iWARP CM for one of the client's connections and replies with its errno
  // (EINVAL for another's, EOPNOTSUPP on srdma0).
  template <class Step>
  bool on_iwarp_connection(Client& client, std::uint32_t id, daemon::Writer& out, Step step);
  void release_iwarp(Client& client);  // closes its iWARP connections and listeners
  // What the handlers share. Whether the client owns a handle, taking and dropping it (under
  // mutex_, as events read the sets); MRs and MWs by key, kept by key index (daemon_requests.cpp).
  using Handles = std::unordered_set<std::uint32_t> Client::*;
  using Keys = std::unordered_map<std::uint32_t, std::uint32_t> Client::*;
  bool owns(Client& client, Handles set, std::uint32_t handle);
  void adopt(Client& client, Handles set, std::uint32_t handle);
  void forget(Client& client, Handles set, std::uint32_t handle);
  bool owns(Client& client, Keys set, std::uint32_t key);
  void adopt(Client& client, Keys set, std::uint32_t key);
  void forget(Client& client, Keys set, std::uint32_t key);
  // A verb that ends one of the client's objects, named by the request's one handle or key:
  // EINVAL for one that is not the client's; on success it leaves the client's set.
  using Destroy = int (DeviceLink::*)(std::uint32_t handle);
  template <class Set>
  bool destroy_owned(Client& client, daemon::Reader& in, daemon::Writer& out, Set set, Destroy destroy);
  // The tagged address (ProcessMemory::tag) of the client's memory at `addr` when the daemon can
  // reach it, else none with `err` (daemon_memory_requests.cpp).
  std::optional<std::uint64_t> reachable(Client& client, std::uint64_t addr, std::uint64_t length, int& err);
  // Counts `n` WRs posted to `qpn`'s send (`queue` 0) or receive queue (1) in the client's `taken`
  // (daemon_post_requests.cpp).
  void count_taken(Client& client, std::uint32_t qpn, int queue, std::size_t n);
  // Runs `open` on the engine and adopts the CM handle it opens into `set`, then replies with it
  // (daemon_cm_requests.cpp).
  template <class Open>
  bool open_cm(Client& client, Handles set, daemon::Writer& out, Open open);
  // Runs `step` on one of the client's connections and replies with its errno.
  template <class Step>
  bool on_connection(Client& client, std::uint32_t id, daemon::Writer& out, Step step);
  // RTU, REJ or DREQ (`step`) on one of the client's connections, with the request's private data.
  using PrivateDataStep = int (core::ConnectionManager::*)(core::Time, std::uint32_t, std::span<const std::uint8_t>);
  bool private_data_step(Client& client, daemon::Reader& in, daemon::Writer& out, PrivateDataStep step);
  void release(Client& client);     // destroys what the client created
  void release_cm(Client& client);  // ends its connections (DREQ or REJ) and listeners
  // The client's listeners and connections, which it owns no more (under mutex_).
  struct CmHandles {
    std::unordered_set<std::uint32_t> listeners, ids;
  };
  CmHandles take_cm_handles(Client& client);
  void send_event(std::uint32_t cq);
  void send_event(const core::AsyncEvent& event);
  // To the owner of the event's listener (a request, which the owner then owns) or connection.
  void send_event(const core::CmEvent& event);
  // To the owner of the event's listener (a connect request, which the owner then owns) or
  // connection; a request no client takes is rejected.
  void send_event(const core::IwarpEvent& event);
  // To the owner of `listener` (a `request`, whose connection `id` it then owns) or of
  // connection `id`; false when no client owns it.
  bool deliver_cm(std::span<const std::uint8_t> message, std::uint32_t listener, std::uint32_t id, bool request);
  void reap_finished();
  // The completion sink (under the host's lock): new completions into the clients' CQ rings.
  void fill_rings(core::Device& device);
  // One CQ's ring, if it has one, and its owner's room slots (under the host's lock and rings_mutex_).
  void fill_ring(core::Device& device, std::uint32_t cq);
  void forget_ring(std::uint32_t cq);
  // Runs the post requests waiting in the client's work ring; whether there were any.
  bool drain_work(Client& client);
  // WorkSource, for the host's progress thread and, before each request, a client's thread.
  bool pull() override;
  bool going_to_sleep() override;
  void woke() override;

  const Host host_;
  ProcessMemory& memory_;
  const std::unique_ptr<DeviceLink> link_;  // over host_
  const DaemonOptions options_;
  int listen_fd_ = -1;
  EventOutbox outbox_;  // every event to a client goes through it
  int stop_fd_ = -1;    // an eventfd: written once, to end accept_loop
  std::thread accept_thread_;
  std::mutex mutex_;  // guards clients_ and every client's owned objects
  std::list<Client> clients_;
  std::atomic<bool> shutting_down_{false};
  // The shared CQ rings (cq_ring.hpp) by CQ handle, with the client that owns each (alive as
  // long as its rings are: release() forgets them first). Lock order: the host's lock, this,
  // then mutex_.
  struct OwnedRing {
    std::unique_ptr<CqRing> ring;
    Client* owner = nullptr;
  };
  std::mutex rings_mutex_;
  std::unordered_map<std::uint32_t, OwnedRing> rings_;
  // fill_rings' scratch, under the host's lock.
  std::vector<std::uint32_t> completed_cqs_;
  std::vector<std::uint32_t> completed_qps_;
  // Tells the owner of a ring how much room the QPs of completions just moved have now.
  void publish_room(core::Device& device, Client& owner);
  // The clients with a work ring. Lock order: this, a client's work_mutex, mutex_, the host's.
  std::mutex ring_clients_mutex_;
  std::vector<Client*> ring_clients_;
};

}  // namespace softrdma::host
