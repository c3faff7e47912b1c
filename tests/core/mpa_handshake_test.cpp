// The MPA exchange (RFC 5044 s7.1, RFC 6581) between two MpaHandshakes, and against the
// frames Linux siw sends.
#include "emulator/core/mpa_handshake.hpp"

#include <catch2/catch.hpp>
#include <string>
#include <vector>

namespace {

namespace core = softrdma::core;
using State = core::MpaHandshake::State;
using Bytes = std::vector<std::uint8_t>;

Bytes text(const std::string& s) { return Bytes(s.begin(), s.end()); }

// Hands `bytes` over one at a time; returns how many the handshake took.
std::size_t trickle(core::MpaHandshake& h, const Bytes& bytes) {
  std::size_t used = 0;
  for (std::size_t i = 0; i < bytes.size(); ++i) used += h.receive({bytes.data() + i, 1});
  return used;
}

core::MpaOffer offer(bool crc, std::uint16_t ird, std::uint16_t ord, const std::string& pd) {
  core::MpaOffer o;
  o.crc = crc;
  o.ird = ird;
  o.ord = ord;
  o.private_data = text(pd);
  return o;
}

}  // namespace

TEST_CASE("an MPA exchange settles CRCs, IRD and ORD and carries both private data", "[mpa]") {
  auto initiator = core::MpaHandshake::initiate(offer(false, 4, 8, "hello"));
  auto responder = core::MpaHandshake::respond();
  const Bytes request = initiator.take_output();
  REQUIRE(request.size() == 20 + 4 + 5);
  CHECK(trickle(responder, request) == request.size());
  REQUIRE(responder.state() == State::request_received);
  CHECK(responder.peer_frame().revision == 2);
  CHECK(responder.peer_frame().enhanced->ird == 4);
  CHECK(responder.peer_frame().enhanced->ord == 8);
  CHECK(responder.peer_frame().private_data == text("hello"));

  responder.accept(offer(true, 2, 16, "world!"));
  CHECK(responder.state() == State::established);
  Bytes reply = responder.take_output();
  const Bytes fpdu_after{0x00, 0x12, 0xAB};
  reply.insert(reply.end(), fpdu_after.begin(), fpdu_after.end());
  CHECK(initiator.receive(reply) == reply.size() - fpdu_after.size());  // the FPDU bytes are the stream's
  REQUIRE(initiator.state() == State::established);
  CHECK(initiator.peer_frame().private_data == text("world!"));

  // CRCs because the responder asked; each side's ORD within the other's IRD.
  const core::StreamParams i = initiator.settled(1460), r = responder.settled(1460);
  CHECK(i.crc);
  CHECK(r.crc);
  CHECK(i.ord == 2);
  CHECK(i.ird == 4);
  CHECK(r.ord == 4);
  CHECK(r.ird == 2);
  CHECK(i.max_fpdu == 1460);
}

TEST_CASE("a rejected MPA Request reaches the initiator with the responder's private data", "[mpa]") {
  auto initiator = core::MpaHandshake::initiate(offer(false, 1, 1, ""));
  auto responder = core::MpaHandshake::respond();
  responder.receive(initiator.take_output());
  const Bytes why = text("no");
  responder.reject(why);
  CHECK(responder.state() == State::rejected);
  initiator.receive(responder.take_output());
  CHECK(initiator.state() == State::rejected);
  CHECK(initiator.peer_frame().reject);
  CHECK(initiator.peer_frame().private_data == why);
}

TEST_CASE("a Request for MPA markers is rejected with a clear reason", "[mpa]") {
  wire::iwarp::MpaRequestReply request;
  request.markers = true;
  Bytes bytes(request.length());
  request.emit(bytes.data());
  auto responder = core::MpaHandshake::respond();
  responder.receive(bytes);
  CHECK(responder.state() == State::failed);
  CHECK(std::string(responder.failure()).find("markers") != std::string::npos);
  const auto reply = wire::iwarp::MpaRequestReply::parse(responder.take_output());
  REQUIRE(reply);
  CHECK(reply->kind == wire::iwarp::MpaFrameKind::reply);
  CHECK(reply->reject);
}

TEST_CASE("bytes that are not an MPA frame fail the exchange", "[mpa]") {
  auto responder = core::MpaHandshake::respond();
  const Bytes http = text("GET / HTTP/1.1\r\nHost: x\r\n\r\n");
  responder.receive(http);
  CHECK(responder.state() == State::failed);
  CHECK(std::string(responder.failure()) == "the peer's first bytes are not an MPA frame");
  auto initiator = core::MpaHandshake::initiate(offer(false, 1, 1, ""));
  initiator.receive(initiator.take_output());  // its own Request echoed back
  CHECK(initiator.state() == State::failed);
}

TEST_CASE("a revision 1 Request is answered in revision 1, with no IRD and ORD words", "[mpa]") {
  wire::iwarp::MpaRequestReply request;
  request.revision = 1;
  request.private_data = text("v1");
  Bytes bytes(request.length());
  request.emit(bytes.data());
  auto responder = core::MpaHandshake::respond();
  responder.receive(bytes);
  REQUIRE(responder.state() == State::request_received);
  responder.accept(offer(false, 3, 3, "ok"));
  const auto reply = wire::iwarp::MpaRequestReply::parse(responder.take_output());
  REQUIRE(reply);
  CHECK(reply->revision == 1);
  CHECK_FALSE(reply->enhanced);
  CHECK(reply->private_data == text("ok"));
}

TEST_CASE("Linux siw's MPA Request (revision 2, IRD and ORD 1, no private data) is accepted", "[mpa]") {
  // As siw's rping connection sends it (siw-rping.pcap, frame 4).
  Bytes request = text("MPA ID Req Frame");
  const Bytes rest{0x10, 0x02, 0x00, 0x04, 0x00, 0x01, 0x00, 0x01};
  request.insert(request.end(), rest.begin(), rest.end());
  auto responder = core::MpaHandshake::respond();
  CHECK(responder.receive(request) == request.size());
  REQUIRE(responder.state() == State::request_received);
  CHECK(responder.peer_frame().private_data.empty());
  responder.accept(offer(false, 1, 1, ""));
  const Bytes reply = responder.take_output();
  Bytes expected = text("MPA ID Rep Frame");
  expected.insert(expected.end(), rest.begin(), rest.end());
  CHECK(reply == expected);  // what siw answers to the same Request
}
