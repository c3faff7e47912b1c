// An iWARP connection's bytes for the TcpStreamCapture tests: the MPA Request and Reply, then
// FPDUs of every RDMAP opcode both ways, built with wire/iwarp's own emitters, as the host
// would write and read them (one FPDU split over two writes, several in one write, one
// larger than many segments); and writing them through TcpStreamCapture to a pcap file.
#pragma once

#include <catch2/catch.hpp>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "emulator/net/pcap_file.hpp"
#include "emulator/net/tcp_stream_capture.hpp"
#include "tests/wire/rdmap_messages.hpp"
#include "wire/ipv6.hpp"
#include "wire/iwarp/mpa.hpp"
#include "wire/iwarp/mpa_stream.hpp"
#include "wire/iwarp/rdmap.hpp"

namespace test {

using Bytes = std::vector<std::uint8_t>;
using softrdma::net::TcpSide;
using wire::iwarp::MpaItemKind;
using wire::iwarp::RdmapOpcode;

struct StreamWrite {
  TcpSide from;
  Bytes bytes;
};

// What a decoder must find, in this order.
struct ExpectedItem {
  TcpSide from;
  MpaItemKind kind;
  RdmapOpcode opcode = RdmapOpcode::send;  // kind fpdu
  bool last = true;                        // its DDP L bit
  bool crc_ok = true;                      // false for the planted bad CRC
};

struct IwarpExchange {
  bool crc = false;
  std::vector<StreamWrite> writes;
  std::vector<ExpectedItem> items;
  std::size_t fpdus() const { return items.size() - 2; }
};

inline softrdma::net::TcpConnectionEnds ipv4_ends() {
  softrdma::net::TcpConnectionEnds e;
  e.local_address = wire::ipv4_mapped({10, 1, 2, 3});
  e.remote_address = wire::ipv4_mapped({10, 1, 2, 4});
  e.local_port = 40001;
  e.remote_port = 19875;  // no port of iWARP's: the decoders find MPA by its key
  return e;
}

inline softrdma::net::TcpConnectionEnds ipv6_ends() {
  softrdma::net::TcpConnectionEnds e = ipv4_ends();
  e.local_address = {0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 3};
  e.remote_address = {0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 4};
  return e;
}

class IwarpExchangeBuilder {
 public:
  // `crc`: what both MPA frames ask for. `corrupt`: the index among the FPDUs of one whose CRC
  // field is flipped (with `crc`), or -1.
  IwarpExchangeBuilder(bool crc, int corrupt) : corrupt_(corrupt) { x_.crc = crc; }

  void frame(TcpSide from, wire::iwarp::MpaFrameKind kind) {
    wire::iwarp::MpaRequestReply f;
    f.kind = kind;
    f.crc = x_.crc;
    f.revision = 2;
    f.enhanced = wire::iwarp::MpaEnhanced{16, 16};
    f.private_data = {'s', 'o', 'f', 't', 'r', 'd', 'm', 'a'};
    Bytes b(f.length());
    f.emit(b.data());
    write(from, std::move(b));
    x_.items.push_back({from, kind == wire::iwarp::MpaFrameKind::request ? MpaItemKind::request : MpaItemKind::reply});
  }

  // One FPDU carrying `m`, with its payload's bytes; appended to `into`.
  void fpdu(TcpSide from, const wire::iwarp::RdmapMessage& m, Bytes& into) {
    Bytes ulpdu(m.length());
    m.emit(ulpdu.data());
    const std::size_t at = into.size();
    into.resize(at + wire::iwarp::fpdu_length(ulpdu.size()));
    wire::iwarp::emit_fpdu(into.data() + at, ulpdu, x_.crc);
    const bool bad = fpdus_++ == corrupt_ && x_.crc;
    if (bad) into.back() ^= 0x01;  // the CRC field's last byte
    x_.items.push_back({from, MpaItemKind::fpdu, m.opcode, m.ddp.last, !bad});
  }

  void write(TcpSide from, Bytes bytes) { x_.writes.push_back({from, std::move(bytes)}); }

  IwarpExchange take() { return std::move(x_); }

 private:
  int corrupt_;
  int fpdus_ = 0;  // FPDUs built so far
  IwarpExchange x_;
};

// The connection: local opens it and sends the Request.
inline IwarpExchange iwarp_exchange(bool crc, int corrupt = -1) {
  using wire::iwarp::MpaFrameKind;
  constexpr TcpSide L = TcpSide::local, R = TcpSide::remote;
  IwarpExchangeBuilder b(crc, corrupt);
  const Bytes hello{'h', 'e', 'l', 'l', 'o'}, none;
  b.frame(L, MpaFrameKind::request);
  b.frame(R, MpaFrameKind::reply);

  Bytes w;
  b.fpdu(L, untagged(RdmapOpcode::send, 1, hello), w);
  b.write(L, std::move(w));

  w = {};  // two FPDUs in one write: a Write over three segments and a Read Request
  b.fpdu(L, tagged(RdmapOpcode::write, 0x100, 0x1000, Bytes(4000, 0x57)), w);
  wire::iwarp::RdmapMessage read = untagged(RdmapOpcode::read_request, 1, none);
  read.read_request = {0x200, 0x2000, 3000, 0x300, 0x3000};
  b.fpdu(L, read, w);
  b.write(L, std::move(w));

  w = {};  // the Read Response, written in two pieces
  b.fpdu(R, tagged(RdmapOpcode::read_response, 0x200, 0x2000, Bytes(3000, 0x52)), w);
  b.write(R, Bytes(w.begin(), w.begin() + 100));
  b.write(R, Bytes(w.begin() + 100, w.end()));

  w = {};
  b.fpdu(R, untagged(RdmapOpcode::send_se, 1, Bytes(16, 0x33)), w);
  b.write(R, std::move(w));

  w = {};  // one Write message in two DDP segments
  b.fpdu(L, tagged(RdmapOpcode::write, 0x100, 0x5000, Bytes(1000, 0x11), false), w);
  b.fpdu(L, tagged(RdmapOpcode::write, 0x100, 0x5000 + 1000, Bytes(1000, 0x12)), w);
  b.write(L, std::move(w));

  w = {};                          // many segments, many ACKs
  const Bytes large(20000, 0x44);  // RdmapMessage::payload only points at it
  wire::iwarp::RdmapMessage inv = untagged(RdmapOpcode::send_invalidate, 2, large);
  inv.invalidate_stag = 0x400;
  b.fpdu(L, inv, w);
  b.write(L, std::move(w));

  w = {};
  wire::iwarp::RdmapMessage se_inv = untagged(RdmapOpcode::send_se_invalidate, 2, none);
  se_inv.invalidate_stag = 0x500;
  b.fpdu(R, se_inv, w);
  wire::iwarp::RdmapMessage term = untagged(RdmapOpcode::terminate, 1, none);
  term.terminate.layer = 0;       // RDMAP
  term.terminate.error_type = 2;  // remote operation error (RFC 5040 s7.2)
  term.terminate.error_code = 0x05;
  b.fpdu(R, term, w);
  b.write(R, std::move(w));
  return b.take();
}

// The connection through TcpStreamCapture into a pcap file at `path`: opened, every write
// 1 us after the last, then closed by local and by remote.
inline void write_capture(const std::string& path, const softrdma::net::TcpConnectionEnds& ends, const IwarpExchange& x,
                          softrdma::net::TcpCaptureOptions options = {}) {
  std::string error;
  std::optional<softrdma::net::PcapWriter> pcap =
      softrdma::net::PcapWriter::create(path, softrdma::net::kLinkEthernet, error);
  INFO(error);
  REQUIRE(pcap);
  softrdma::net::TcpStreamCapture capture(
      ends, [&](std::uint64_t t, std::span<const std::uint8_t> frame) { pcap->write(t, frame); }, options);
  std::uint64_t now = 1'700'000'000'000'000'000ull;
  capture.open(now);
  for (const StreamWrite& w : x.writes) capture.data(now += 1000, w.from, w.bytes);
  capture.close(now += 1000, TcpSide::local);
  capture.close(now += 1000, TcpSide::remote);
  REQUIRE(pcap->flush());
}

}  // namespace test
