// The iWARP connection manager of one device: what the kernel's iw_cm and Linux siw's MPA code
// do for rdma_cm. Connections are TCP connections the host opens, accepts and closes; on each,
// the MPA exchange (mpa_handshake.hpp) carries the consumers' private data and settles the
// stream; then the connection carries its QP's stream (Device::stream_*), and the QP moves to
// RTS here, as iw_cm moves it, not in the consumer.
//
// Sans-I/O: the host reports what its sockets did (tcp_*), carries out next_action(), and
// writes what tcp_transmit() gives for the connections next_ready() names. The consumer calls
// listen/connect/accept/reject/disconnect and takes next_event().
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <span>
#include <vector>

#include "emulator/core/device.hpp"
#include "emulator/core/expected.hpp"
#include "emulator/core/mpa_handshake.hpp"

namespace softrdma::core {

struct TcpEndpoint {
  Gid address{};  // IPv6, or IPv4-mapped
  std::uint16_t port = 0;
  bool operator==(const TcpEndpoint&) const = default;
};

enum class IwarpEventType : std::uint8_t {
  connect_request,  // a peer's MPA Request reached a listener: accept() or reject()
  established,      // the MPA exchange is done and the QP is in RTS on the stream
  rejected,         // the peer refused: its MPA Reply had R set, or TCP was refused
  unreachable,      // TCP could not reach the peer in time
  connect_error,    // the peer's MPA frames were wrong, or the QP could not take the stream
  disconnected,     // the connection ended: either side closed it, or its QP entered ERR
};

struct IwarpEvent {
  IwarpEventType type = IwarpEventType::connect_request;
  std::uint32_t id = 0;
  std::uint32_t listener = 0;  // connect_request
  TcpEndpoint local, remote;
  int status = 0;                          // an errno value where rdma_cm reports one
  std::vector<std::uint8_t> private_data;  // the peer's Request, Reply or reject
  std::uint16_t ird = 0, ord = 0;          // connect_request: the peer's; established: settled
};

// What the host is to do with its sockets.
struct TcpAction {
  enum class Kind : std::uint8_t { listen, stop_listening, connect, close };
  Kind kind = Kind::listen;
  std::uint32_t handle = 0;  // the listener (listen, stop_listening) or connection
  TcpEndpoint endpoint;      // listen: the local one; connect: the remote one
};

class IwarpConnectionManager {
 public:
  explicit IwarpConnectionManager(Device& device) : device_(device) {}

  // Ask for MPA CRCs on every connection, whatever the consumer's offer says (as Linux siw's
  // mpa_crc_required): RFC 5044 s7.1 then has both directions carry them.
  void require_crc(bool on) { require_crc_ = on; }

  // Consumer calls: 0 or an errno value (EINVAL: an unknown ID or a call its state does not
  // take; EADDRINUSE: an endpoint already listened on).
  Expected<std::uint32_t> listen(const TcpEndpoint& local);
  int stop_listening(std::uint32_t listener);
  Expected<std::uint32_t> connect(const TcpEndpoint& remote, std::uint32_t qpn, const MpaOffer& offer);
  int accept(std::uint32_t id, std::uint32_t qpn, const MpaOffer& offer);
  int reject(std::uint32_t id, std::span<const std::uint8_t> private_data);
  // Moves the QP to ERR (its WRs flush) and closes the connection once its bytes are out.
  int disconnect(std::uint32_t id);
  void destroy(std::uint32_t id);
  std::optional<IwarpEvent> next_event();

  // The host's sockets. `mss` is the connection's maximum segment size: FPDUs fit in it.
  void tcp_connected(std::uint32_t id, const TcpEndpoint& local, std::uint32_t mss);
  void tcp_failed(std::uint32_t id, int error);  // ECONNREFUSED, ETIMEDOUT, ...
  std::uint32_t tcp_accepted(std::uint32_t listener, const TcpEndpoint& local, const TcpEndpoint& remote,
                             std::uint32_t mss);
  void tcp_received(std::uint32_t id, std::span<const std::uint8_t> bytes);
  // What the next tcp_received() should hold at most to end on an FPDU boundary; 0: no limit.
  std::size_t bytes_to_boundary(std::uint32_t id) const;
  void tcp_closed(std::uint32_t id);  // by the peer, or reset
  std::optional<TcpAction> next_action();
  // A connection with bytes to write: the host calls tcp_transmit() for it until that has
  // nothing more. A close action comes after the bytes before it: the host writes what
  // tcp_transmit() still gives, then closes.
  std::optional<std::uint32_t> next_ready();
  // Appends the connection's next bytes to `out` (an MPA frame or one FPDU); false when none.
  bool tcp_transmit(std::uint32_t id, UninitialisedBytes& out);
  // Whether what tcp_transmit() gives next is an FPDU: the MPA exchange is over, its frames
  // all taken (the host's fault injection acts on FPDUs alone).
  bool carries_fpdus(std::uint32_t id) const;

 private:
  enum class Phase : std::uint8_t { connecting, exchanging, awaiting_consumer, established, closed };
  struct Connection {
    Phase phase = Phase::connecting;
    std::uint32_t listener = 0;
    std::uint32_t qpn = 0;
    TcpEndpoint local, remote;
    std::uint32_t mss = 0;
    MpaOffer offer;  // the initiator's, until the TCP connection is up
    std::optional<MpaHandshake> mpa;
    bool queued = false;  // in ready_
  };

  Connection* find(std::uint32_t id);
  bool next_bytes(std::uint32_t id, UninitialisedBytes& out);  // tcp_transmit's, uncounted
  void count(IwarpEventType type, const Connection& c);        // in the device's IwarpCounters
  std::uint32_t open(Connection c);
  IwarpEvent event_of(IwarpEventType type, std::uint32_t id, const Connection& c) const;
  void emit(IwarpEventType type, std::uint32_t id, const Connection& c, int status = 0);
  void after_exchange(std::uint32_t id, Connection& c, std::span<const std::uint8_t> rest);
  void attach(std::uint32_t id, Connection& c, std::span<const std::uint8_t> rest);
  void close(std::uint32_t id, Connection& c);
  void mark_ready(std::uint32_t id);
  void end_qp(std::uint32_t qpn);  // to ERR, its WRs flushed
  void take_stream_events();

  Device& device_;
  bool require_crc_ = false;
  std::map<std::uint32_t, TcpEndpoint> listeners_;
  std::map<std::uint32_t, Connection> connections_;
  std::map<std::uint32_t, std::uint32_t> connection_of_qp_;
  std::uint32_t next_handle_ = 1;
  std::deque<IwarpEvent> events_;
  std::deque<TcpAction> actions_;
  std::deque<std::uint32_t> ready_;
};

}  // namespace softrdma::core
