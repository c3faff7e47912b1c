// iWARP in a capture: Ethernet -> IPv4/IPv6 -> TCP -> reassembly -> one MpaStreamDecoder per
// direction, with the markers/CRC negotiated by the connection's MPA Request and Reply.
//
// Items are numbered like tshark numbers them: by the capture frame that carries the item's
// last byte. TCP streams that do not start with an MPA key are not iWARP and are skipped
// silently (a stream whose peer did send an MPA frame gets an error item instead).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "emulator/net/pcap_file.hpp"
#include "tools/dump/tcp_reassembly.hpp"
#include "wire/iwarp/mpa_stream.hpp"

namespace softrdma::dump {

struct IwarpCaptureFrame {
  std::uint64_t frame_number = 0;  // 1-based capture frame holding the item's last byte
  std::size_t tcp_stream = 0;      // connection, numbered in order of first appearance
  TcpEndpoint source;
  TcpEndpoint destination;
  wire::iwarp::MpaStreamItem item;  // an MPA frame, an FPDU, or the error that stopped the stream
};

// Feed it the frames of a capture in order.
class IwarpCaptureDecoder {
 public:
  // Called once per item; item.fpdu.message.payload is valid during the call only.
  using Sink = std::function<void(const IwarpCaptureFrame&)>;

  // Follows `packet` if it is an Ethernet frame carrying TCP (IPv4 unfragmented, or IPv6
  // without extension headers) and calls `sink` for each item it completes. Returns whether
  // it was such a TCP segment.
  bool add_frame(std::uint64_t frame_number, const net::CapturedPacket& packet, const Sink& sink);

  // What could not be followed: snaplen-cut segments, bytes left behind a gap that never
  // filled. One line each, for humans.
  std::vector<std::string> notes() const;

 private:
  enum class SideState : std::uint8_t {
    unknown,  // nothing decoded yet
    mpa,      // its MPA Request or Reply was decoded
    not_mpa,  // does not start with an MPA key: ignored
    stopped,  // an error item ended it: the rest is ignored
  };
  struct Side {
    SideState state = SideState::unknown;
    std::unique_ptr<wire::iwarp::MpaStreamDecoder> decoder;  // made once the key prefix matches
    std::optional<wire::iwarp::MpaRequestReply> frame;       // its Request or Reply
  };
  struct Connection {
    std::array<Side, 2> sides;  // by TcpDirection::side
  };

  Connection& connection(std::size_t index);
  void deliver(TcpDirection d, std::span<const std::uint8_t> bytes, std::uint64_t frame_number, const Sink& sink);
  void on_item(TcpDirection d, const wire::iwarp::MpaStreamItem& item, std::uint64_t frame_number, const Sink& sink);
  static void negotiate(Connection& c);

  TcpReassembler tcp_;
  std::vector<Connection> connections_;  // by TcpDirection::connection
  std::vector<std::uint64_t> cut_frames_;
};

struct IwarpCaptureResult {
  std::vector<IwarpCaptureFrame> frames;  // item.fpdu.message.payload is empty: the bytes are gone
  std::vector<std::string> errors;        // the file could not be read, plus notes()
  std::uint64_t packets = 0;
};

IwarpCaptureResult decode_iwarp_capture(const std::string& path);

}  // namespace softrdma::dump
