// Event messages (daemon_protocol.hpp) to clients' event sockets, without ever blocking the
// engine's thread that raises them and without losing one: an event a socket has no room for
// waits here, in order behind any before it, and the outbox's own thread sends it as the
// client reads. A lost CQ event would leave a client in ibv_get_cq_event forever; a socket fills
// when a client's event thread is descheduled through a burst (hundreds of QPs failing at once,
// or a shutdown's flush).
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <mutex>
#include <span>
#include <thread>
#include <unordered_map>
#include <vector>

#include "emulator/host/daemon_protocol.hpp"

namespace softrdma::host {

class EventOutbox {
 public:
  // Events one client may have waiting; beyond, a client that does not read them loses the
  // newest (counted, and said once), rather than the daemon growing without bound.
  static constexpr std::size_t kMaxWaiting = 1 << 16;

  EventOutbox();
  EventOutbox(const EventOutbox&) = delete;
  EventOutbox& operator=(const EventOutbox&) = delete;
  ~EventOutbox();  // what still waits is dropped: its clients are gone

  bool ok() const { return wake_fd_ >= 0; }
  // Sends the message on the SOCK_SEQPACKET socket `fd` now if nothing waits for it and it has
  // room, else queues a copy.
  void send(int fd, std::span<const std::uint8_t> message);
  void send(int fd, const daemon::Event& e) {
    send(fd, std::span<const std::uint8_t>(reinterpret_cast<const std::uint8_t*>(&e), sizeof e));
  }
  // The socket is about to be closed: its waiting events are dropped (its number may come back).
  void forget(int fd);
  std::size_t waiting_total();  // events waiting, over every socket
  std::uint64_t dropped();

 private:
  void run();
  void send_waiting();  // under mutex_

  std::mutex mutex_;
  std::unordered_map<int, std::deque<std::vector<std::uint8_t>>> waiting_;
  std::uint64_t dropped_ = 0;
  bool stopping_ = false;
  int wake_fd_ = -1;  // an eventfd: new events wait, or stop
  std::thread thread_;
};

}  // namespace softrdma::host
