// The MPA exchange that opens an iWARP connection (RFC 5044 s7.1, with RFC 6581's revision 2
// IRD/ORD words), sans-I/O: the host writes what take_output() gives to the TCP connection and
// feeds receive() what arrives, until the exchange is settled and the QP can be attached to
// the stream (Device::stream_attach with settled()).
//
// The initiator sends a Request and waits for the Reply; the responder waits for the Request,
// and its consumer accepts or rejects it. Markers are refused (the responder rejects a Request
// that asks for them; the initiator fails on a Reply that does), as Linux siw refuses them;
// CRCs are used when either side asks; the peer-to-peer ready-to-receive modes are declined.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "emulator/core/iwarp_stream.hpp"
#include "wire/iwarp/mpa.hpp"

namespace softrdma::core {

// What one side asks of the exchange.
struct MpaOffer {
  bool crc = false;       // ask for CRCs in both directions
  std::uint16_t ird = 1;  // Read Requests we accept in flight (RFC 6581 s5)
  std::uint16_t ord = 1;  // Read Requests we want to have in flight
  std::vector<std::uint8_t> private_data;
  // RFC 5044 s7.1 allows 512 bytes of private data; revision 2 takes 4 for IRD and ORD.
  static constexpr std::size_t max_private_data = wire::iwarp::MpaFrame::max_private_data - 4;
};

class MpaHandshake {
 public:
  enum class State : std::uint8_t { awaiting_request, request_received, awaiting_reply, established, rejected, failed };

  static MpaHandshake initiate(const MpaOffer& offer);  // take_output(): the Request
  static MpaHandshake respond();                        // waits for the Request

  // Takes bytes from the peer and returns how many belong to the exchange; what follows the
  // peer's frame is the stream in full operation (Device::stream_receive).
  std::size_t receive(std::span<const std::uint8_t> bytes);
  // The responder's answer to the Request, in request_received.
  void accept(const MpaOffer& offer);
  void reject(std::span<const std::uint8_t> private_data);

  std::vector<std::uint8_t> take_output();
  bool has_output() const { return !output_.empty(); }
  State state() const { return state_; }
  // The peer's Request or Reply, once received.
  const wire::iwarp::MpaRequestReply& peer_frame() const { return peer_; }
  // Why the exchange failed, in one line.
  std::string_view failure() const { return failure_; }
  // What the exchange settled, once established: CRCs, our IRD and ORD after the peer's.
  StreamParams settled(std::uint32_t max_fpdu) const;

 private:
  explicit MpaHandshake(State s) : state_(s) {}
  // Appends the first bytes of `bytes` until the peer's frame holds `up_to`; returns how many.
  std::size_t take(std::span<const std::uint8_t> bytes, std::size_t up_to);
  void on_frame(wire::iwarp::MpaRequestReply frame);
  void on_request();
  void on_reply();
  void send_frame(const wire::iwarp::MpaRequestReply& frame);
  void fail(std::string_view why);

  State state_;
  MpaOffer offer_;
  wire::iwarp::MpaRequestReply peer_;
  std::vector<std::uint8_t> inbound_;  // the peer's frame, as it arrives
  std::vector<std::uint8_t> output_;
  std::string_view failure_;
  std::uint16_t settled_ord_ = 0;
};

}  // namespace softrdma::core
