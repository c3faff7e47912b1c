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
#include <vector>

#include "emulator/host/cq_ring.hpp"
#include "emulator/host/daemon_protocol.hpp"
#include "emulator/host/embedded_host.hpp"
#include "emulator/host/embedded_link.hpp"
#include "emulator/host/event_outbox.hpp"
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
  // starts accepting. `host` must have been started with `memory` as its HostConfig::memory.
  static DaemonStart start(EmbeddedHost& host, ProcessMemory& memory, DaemonOptions options);

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
    std::unordered_set<std::uint32_t> pds, cqs, srqs, ahs, qps;
    std::unordered_map<std::uint32_t, std::uint32_t> mrs, mws;  // index -> key
    // Its connection manager listeners and connections (communication IDs): those it opened,
    // and those a peer's REQ or SIDR_REQ opened for one of its listeners.
    std::unordered_set<std::uint32_t> cm_listeners, cm_ids;
    // WRs posted so far per QP, {send, recv} (free-running), for the room slots (work_ring.hpp).
    std::unordered_map<std::uint32_t, std::array<std::uint32_t, 2>> taken;
    std::thread thread;
    std::atomic<bool> finished{false};
    // Its work ring (work_ring.hpp), set once by attach_work_ring; one consumer at a time.
    std::mutex work_mutex;
    std::unique_ptr<WorkRing> work;
  };
  DaemonServer(EmbeddedHost& host, ProcessMemory& memory, DaemonOptions options, int listen_fd, int stop_fd);

  void accept_loop();
  void admit(int fd);
  void serve(Client& client);
  // Handles one request, with the descriptor that came with it (a request that keeps it sets
  // `passed` to -1); false when the message is malformed (the client is dropped).
  bool handle(Client& client, std::span<const std::uint8_t> request, int& passed, std::vector<std::uint8_t>& reply);
  // The connection manager's requests (daemon_cm_requests.cpp), on the same terms as handle().
  bool handle_cm(Client& client, daemon::Op op, daemon::Reader& in, daemon::Writer& out);
  void release(Client& client);  // destroys what the client created
  void release_cm(Client& client);  // ends its connections (DREQ or REJ) and listeners
  void send_event(std::uint32_t cq);
  void send_event(const core::AsyncEvent& event);
  // To the owner of the event's listener (a request, which the owner then owns) or connection.
  void send_event(const core::CmEvent& event);
  bool deliver_cm(std::span<const std::uint8_t> message, const core::CmEvent& event, bool request);  // false: no owner
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

  EmbeddedHost& host_;
  ProcessMemory& memory_;
  EmbeddedLink link_;
  const DaemonOptions options_;
  int listen_fd_ = -1;
  EventOutbox outbox_;  // every event to a client goes through it
  int stop_fd_ = -1;  // an eventfd: written once, to end accept_loop
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
