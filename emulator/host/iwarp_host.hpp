// The embedded iWARP host: one engine, its iWARP connection manager (core/iwarp_cm.hpp) and
// the kernel TCP sockets that carry its connections, with a progress thread that sleeps in
// ppoll() on them. TCP does reliability, so there are no engine timers to wake for.
//
// Every engine call happens under one lock. A call's FPDUs leave from the calling thread
// (post_send's data is written before call() returns, as far as the socket takes it); the
// progress thread accepts, connects, reads, writes what a full socket held back, and delivers
// the CM's events, so that they reach the handler in order. Completion-channel and async
// events go as the embedded RoCE host's do (event_delivery.hpp): from whichever thread ran the
// engine, after it lets go of the lock.
#pragma once

#include <poll.h>
#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "emulator/core/device.hpp"
#include "emulator/core/iwarp_cm.hpp"
#include "emulator/core/memory.hpp"
#include "emulator/host/event_delivery.hpp"
#include "emulator/host/host_clock.hpp"
#include "emulator/host/iwarp_faults.hpp"
#include "emulator/host/local_memory.hpp"
#include "emulator/host/poll_lease.hpp"
#include "emulator/host/spinning_mutex.hpp"
#include "emulator/net/capture_stage.hpp"
#include "emulator/net/tcp_socket.hpp"
#include "emulator/net/tcp_stream_capture.hpp"

namespace softrdma::host {

struct IwarpHostConfig {
  std::string ip;  // the device's address, IPv4 or IPv6 text: connections start and listen here
  core::DeviceConfig device;
  core::Memory* memory = nullptr;  // null: this process's memory
  // Write every connection as the frames a capture on the wire would show (TCP with the
  // MPA/DDP/RDMAP it carries; net/tcp_stream_capture.hpp) to this pcap file; none: off.
  std::optional<std::string> capture_path;
  // Ask every peer for MPA CRCs (SOFTRDMA_MPA_CRC=1), as siw's mpa_crc_required does; without
  // it they are used when the peer asks.
  bool mpa_crc = false;
  // SOFTRDMA_FAULTS: what of the plan applies to FPDUs (iwarp_faults.hpp); none: off.
  std::optional<net::FaultPlan> faults;
  // Or into a capture already open (the RoCE device's, so that one file holds both); it must
  // outlive the host.
  net::CaptureStage* shared_capture = nullptr;
};

class IwarpHost;

struct IwarpHostStart {
  std::unique_ptr<IwarpHost> host;  // null on failure
  std::string error;                // on failure: one line for a person
};

class IwarpHost {
 public:
  static IwarpHostStart start(IwarpHostConfig config);
  IwarpHost(const IwarpHost&) = delete;
  IwarpHost& operator=(const IwarpHost&) = delete;
  ~IwarpHost();

  const core::Gid& gid() const { return gid_; }
  const std::string& address() const { return address_; }  // as configured: "127.0.0.2", "::1"

  // Runs f(device, cm), or f(device, now) as EngineLink's verbs ask, under the lock; then
  // carries out the socket actions and writes the bytes it queued, on this thread.
  template <class F>
  auto call(F&& f);
  // Posting WRs: a call, as a stream socket has no batches to wait for.
  template <class F>
  auto post(F&& f) {
    return call(std::forward<F>(f));
  }
  // Device::poll_cq; when it finds nothing, the caller also reads the FPDUs its established
  // connections hold and writes what full sockets held back, and polls again if that did
  // something: an application spinning on its CQ moves its own bytes instead of competing for
  // the CPU with the progress thread that would; a run of such polls keeps the progress thread
  // off those bytes (poll_lease.hpp). Connections still open and end on the progress thread
  // alone.
  int poll_cq(std::uint32_t cq, std::span<core::Wc> out);
  int req_notify_cq(std::uint32_t cq, bool solicited_only);
  int destroy_qp(std::uint32_t qpn);
  // rdma_listen: the CM's listen, with the kernel's bind refusal as its errno. `opened` runs
  // under the lock with the new listener's handle, before any event about it can be delivered.
  core::Expected<std::uint32_t> listen(const core::TcpEndpoint& local,
                                       const std::function<void(std::uint32_t)>& opened = {});
  // The CM's events, in order, on the progress thread and never under the lock.
  void set_event_handler(IwarpEventHandler handler);
  // The engine's completion-channel and async events (EventDelivery's terms).
  void set_event_handlers(CqEventHandler on_cq, AsyncEventHandler on_async);
  // As EmbeddedHost's: under the lock after every call and pass that may have completed work,
  // with registered memory flushed, softrdmad moves new completions into its clients' CQ rings.
  void set_completion_sink(std::function<void(core::Device&)> sink);
  // What the fault plan did to the FPDUs sent (all 0 without one).
  net::FaultCounters fault_counters();

 private:
  struct Held {  // an FPDU the fault plan delays
    core::Time due = 0;
    core::UninitialisedBytes bytes;
  };
  struct Connection {
    net::SocketFd fd;
    bool connecting = false;       // waiting for the kernel's connect
    bool closing = false;          // the CM asked for the close: written out, then FIN
    bool pull_more = false;        // the CM has bytes the buffer had no room for
    bool room_awaited = false;     // the progress thread polls it for POLLOUT
    core::UninitialisedBytes out;  // taken from the CM; from out_sent on, not yet
    std::size_t out_sent = 0;      // accepted by the kernel
    std::deque<Held> held;         // delayed FPDUs, in stream order, before `out`'s next
    std::size_t held_bytes = 0;
    bool resetting = false;                          // the fault plan ends it (resets_): nothing more is taken or sent
    std::unique_ptr<net::TcpStreamCapture> capture;  // with a capture file, once connected

    // Bytes taken from the CM, or still in it, that wait for room in the socket.
    bool holds_back() const { return !out.empty() || pull_more; }
  };

  IwarpHost(const IwarpHostConfig& config, core::Gid gid);
  void run();
  // The rest runs with the lock held, but deliver() and kick().
  void after_call();
  // Actions, writes and events, until none is left; whether the progress thread must look.
  bool settle();
  bool carry_out_actions();                     // whether there were any
  bool write_ready();                           // whether anything was taken from the CM
  bool flush(std::uint32_t id, Connection& c);  // whether anything was taken from the CM
  bool read_and_write_held_back();              // read_fpdus() and flush() every connection; whether any did
  // The fault plan's verdict on the FPDU `c.out` holds from `at` on; false when it resets `c`.
  bool apply_faults(std::uint32_t id, Connection& c, std::size_t at);
  void release_held(Connection& c, core::Time now);  // due FPDUs into `out`
  void release_due();                                // and written, on every connection
  std::optional<core::Time> next_due() const;
  void carry_out_resets();  // the connections the fault plan reset
  bool pull(std::uint32_t id, Connection& c);
  bool write_out(Connection& c);
  // One recv() into read_buffer_, handed to the CM; recv()'s result.
  ssize_t receive(std::uint32_t id, Connection& c);
  bool read_fpdus(std::uint32_t id, Connection& c);  // what an established one holds; whether any
  void read(std::uint32_t id, Connection& c);        // all it holds, and its end
  void accept_all(std::uint32_t listener, int fd);
  void finish_connect(std::uint32_t id, Connection& c);
  void service(const std::vector<pollfd>& fds, const std::vector<std::uint32_t>& owners);
  void take_events();  // into pending_events_ and events_; the lock is held
  void deliver();      // pending_events_ and events_ to the handlers, without the lock
  void kick();
  std::unique_lock<SpinningMutex> lock_for_call();  // for an application thread's call
  // With a capture file: starts recording `c` (its handshake, with `opener`'s SYN).
  void capture_open(Connection& c, net::TcpSide opener);

  LocalMemory local_memory_;
  core::Memory& memory_;  // the configured one, or local_memory_
  const core::Gid gid_;
  const std::string address_;
  CqArming arming_;
  PollLease lease_;
  SpinningMutex mutex_;  // guards everything below but the handler, the eventfd and the thread
  core::Device device_;
  core::IwarpConnectionManager cm_;
  core::UninitialisedBytes read_buffer_;  // what one recv() takes, whichever thread reads
  std::optional<IwarpFaults> faults_;
  std::vector<std::uint32_t> resets_;  // connections apply_faults() reset, closed at settle()
  std::map<std::uint32_t, net::SocketFd> listeners_;
  std::map<std::uint32_t, int> listen_errors_;  // a listen action the kernel refused
  std::map<std::uint32_t, Connection> connections_;
  std::vector<core::IwarpEvent> pending_events_;  // for the progress thread to deliver
  std::vector<std::uint32_t> completed_cqs_;      // emptied each time when no sink takes them
  std::function<void(core::Device&)> completion_sink_;
  EventDelivery events_;
  std::unique_ptr<net::CaptureStage> own_capture_;  // with a capture file of its own
  net::CaptureStage* capture_ = nullptr;            // own_capture_ or a shared one; null: off
  std::mutex handler_mutex_;
  IwarpEventHandler handler_;
  net::SocketFd wake_fd_;  // an eventfd: new sockets or bytes for the progress thread
  std::atomic<bool> stopping_{false};
  std::thread thread_;
};

template <class F>
auto IwarpHost::call(F&& f) {
  const auto run = [&] {
    if constexpr (std::is_invocable_v<F&, core::Device&, core::Time>) {
      return f(device_, steady_now());
    } else {
      return f(device_, cm_);
    }
  };
  if constexpr (std::is_void_v<decltype(run())>) {
    {
      const std::unique_lock lock = lock_for_call();
      run();
      after_call();
    }
    events_.deliver();
  } else {
    std::unique_lock lock = lock_for_call();
    auto result = run();
    after_call();
    lock.unlock();
    events_.deliver();
    return result;
  }
}

}  // namespace softrdma::host
