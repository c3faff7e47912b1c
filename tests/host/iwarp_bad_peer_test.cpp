// An iWARP host against a peer that is a raw TCP socket: what a broken or hostile peer can send
// before and after the MPA exchange, and a reset in the middle of a message. Each ends the
// connection with a clear outcome (a rejecting Reply, a Terminate, a flushed QP) and never
// hangs the host.
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "emulator/net/tcp_socket.hpp"
#include "tests/host/iwarp_fixture.hpp"
#include "wire/iwarp/mpa_stream.hpp"

namespace {

using namespace test;
using core::IwarpEventType;
using Bytes = std::vector<std::uint8_t>;

// A peer socket connected to `to`.
struct RawPeer {
  explicit RawPeer(const core::TcpEndpoint& to) {
    auto r = softrdma::net::connect_tcp(*softrdma::net::parse_gid("127.83.91.9"), to);
    REQUIRE(r.error == 0);
    fd = std::move(r.fd);
    pollfd p{fd.get(), POLLOUT, 0};
    REQUIRE(::poll(&p, 1, 5000) == 1);
    REQUIRE(softrdma::net::connect_error(fd.get()) == 0);
  }

  void send(const Bytes& b) {
    REQUIRE(::send(fd.get(), b.data(), b.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(b.size()));
  }

  // Everything the host sends until it closes (or 5 s pass).
  Bytes read_to_end() {
    Bytes all;
    for (;;) {
      pollfd p{fd.get(), POLLIN, 0};
      if (::poll(&p, 1, 5000) != 1) break;
      std::uint8_t buffer[4096];
      const ssize_t n = ::recv(fd.get(), buffer, sizeof buffer, 0);
      if (n <= 0) return all;
      all.insert(all.end(), buffer, buffer + n);
    }
    FAIL("the host did not close the connection");
    return all;
  }

  // Closes with RST instead of FIN (SO_LINGER with a zero timeout).
  void reset() {
    const linger l{1, 0};
    ::setsockopt(fd.get(), SOL_SOCKET, SO_LINGER, &l, sizeof l);
    fd = softrdma::net::SocketFd();
  }

  softrdma::net::SocketFd fd;
};

Bytes frame(bool request, std::uint8_t flags) {
  const std::string key = request ? "MPA ID Req Frame" : "MPA ID Rep Frame";
  Bytes b(key.begin(), key.end());
  const Bytes rest{flags, 0x02, 0x00, 0x04, 0x00, 0x01, 0x00, 0x01};  // revision 2, IRD 1, ORD 1
  b.insert(b.end(), rest.begin(), rest.end());
  return b;
}

// A Send of `payload` bytes (MSN 1), as one FPDU, with or without a real CRC.
Bytes send_fpdu(std::size_t payload, bool crc) {
  wire::iwarp::RdmapMessage m;
  m.opcode = wire::iwarp::RdmapOpcode::send;
  m.ddp.message_sequence_number = 1;
  const Bytes data(payload, 0x5A);
  m.payload = data;
  Bytes ulpdu(m.length());
  m.emit(ulpdu.data());
  Bytes fpdu(wire::iwarp::fpdu_length(ulpdu.size()));
  wire::iwarp::emit_fpdu(fpdu.data(), ulpdu, crc);
  return fpdu;
}

// Each test case runs in its own process, in parallel with the others, so each listens on an
// address of its own.
struct Listening {
  explicit Listening(const char* address) : server(address), service(endpoint(address, 17180)) {
    REQUIRE(server.h->listen(service).ok());
  }
  // Accepts the raw peer's Request; returns the connection's ID.
  std::uint32_t accept() {
    const core::IwarpEvent request = server.next_event();
    REQUIRE(request.type == IwarpEventType::connect_request);
    REQUIRE(server.h->call([&](core::Device&, core::IwarpConnectionManager& cm) {
      return cm.accept(request.id, server.qpn, {});
    }) == 0);
    REQUIRE(server.next_event().type == IwarpEventType::established);
    return request.id;
  }
  core::QpState qp_state() {
    return server.h->call([&](core::Device& d, core::IwarpConnectionManager&) { return d.qp(server.qpn)->state(); });
  }
  void post_recv(std::uint64_t wr_id) {
    core::RecvWr r;
    r.wr_id = wr_id;
    r.sg_list = {{server.addr(0), 4096, server.mr.lkey}};
    REQUIRE(server.h->call(
                [&](core::Device& d, core::IwarpConnectionManager&) { return d.post_recv(server.qpn, r); }) == 0);
  }

  IwarpNode server;
  core::TcpEndpoint service;
};

}  // namespace

TEST_CASE("a peer that sends garbage instead of an MPA Request is closed on, unseen by the consumer", "[iwarp]") {
  Listening l("127.83.91.11");
  RawPeer peer(l.service);
  const std::string http = "GET / HTTP/1.1\r\nHost: softrdma\r\n\r\n";
  peer.send(Bytes(http.begin(), http.end()));
  CHECK(peer.read_to_end().empty());
  CHECK(l.server.events.empty());
}

TEST_CASE("a Request for MPA markers gets a rejecting Reply, then the close", "[iwarp]") {
  Listening l("127.83.91.12");
  RawPeer peer(l.service);
  peer.send(frame(true, 0x80 | 0x10));
  const Bytes answer = peer.read_to_end();
  const auto reply = wire::iwarp::MpaRequestReply::parse(answer);
  REQUIRE(reply);
  CHECK(reply->kind == wire::iwarp::MpaFrameKind::reply);
  CHECK(reply->reject);
}

TEST_CASE("a bad CRC after the exchange is answered with an MPA Terminate and the QP ends", "[iwarp]") {
  Listening l("127.83.91.13");
  l.post_recv(1);
  RawPeer peer(l.service);
  peer.send(frame(true, 0x40 | 0x10));  // C: CRCs
  l.accept();
  Bytes bad = send_fpdu(32, true);
  bad[10] ^= 0xFF;
  peer.send(bad);
  const Bytes answer = peer.read_to_end();
  wire::iwarp::MpaStreamDecoder decoder;
  std::vector<wire::iwarp::RdmapTerminate> terminates;
  decoder.feed(answer, [&](const wire::iwarp::MpaStreamItem& item) {
    if (item.kind == wire::iwarp::MpaItemKind::fpdu &&
        item.fpdu.message.opcode == wire::iwarp::RdmapOpcode::terminate) {
      CHECK(item.fpdu.crc_ok);
      terminates.push_back(item.fpdu.message.terminate);
    }
  });
  REQUIRE(terminates.size() == 1);
  CHECK(int{terminates[0].layer} == wire::iwarp::terminate_layer::llp);
  CHECK(int{terminates[0].error_code} == wire::iwarp::terminate_cause::mpa_crc_error.error_code);
  CHECK(l.qp_state() == core::QpState::err);
  CHECK(l.server.next_wc().status == core::WcStatus::wr_flush_err);
  CHECK(l.server.next_event().type == IwarpEventType::disconnected);
}

TEST_CASE("a TCP reset in the middle of a message flushes the QP and ends the connection", "[iwarp]") {
  Listening l("127.83.91.14");
  l.post_recv(7);
  RawPeer peer(l.service);
  peer.send(frame(true, 0x10));
  l.accept();
  Bytes half = send_fpdu(1000, false);
  half.resize(half.size() / 2);
  peer.send(half);
  peer.reset();
  CHECK(l.server.next_event().type == IwarpEventType::disconnected);
  CHECK(l.qp_state() == core::QpState::err);
  const core::Wc wc = l.server.next_wc();
  CHECK(wc.wr_id == 7);
  CHECK(wc.status == core::WcStatus::wr_flush_err);
}

TEST_CASE("a peer that stops reading holds our Writes in the send queue, not in buffers", "[iwarp]") {
  // A raw server that answers the MPA Request and then reads nothing more.
  auto listener = softrdma::net::listen_tcp(endpoint("127.83.91.7", 0));
  REQUIRE(listener.error == 0);
  const core::TcpEndpoint service = softrdma::net::local_endpoint(listener.fd.get());
  IwarpNode client("127.83.91.8");
  const auto id = client.h->call(
      [&](core::Device&, core::IwarpConnectionManager& cm) { return cm.connect(service, client.qpn, {}); });
  REQUIRE(id.ok());
  pollfd p{listener.fd.get(), POLLIN, 0};
  REQUIRE(::poll(&p, 1, 5000) == 1);
  auto peer = softrdma::net::accept_tcp(listener.fd.get());
  REQUIRE(peer);
  Bytes request(24);
  pollfd q{peer->get(), POLLIN, 0};
  REQUIRE(::poll(&q, 1, 5000) == 1);
  REQUIRE(::recv(peer->get(), request.data(), request.size(), MSG_WAITALL) == 24);
  const Bytes reply = frame(false, 0x10);
  REQUIRE(::send(peer->get(), reply.data(), reply.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(reply.size()));
  REQUIRE(client.next_event().type == IwarpEventType::established);

  // 1 MiB Writes until the send queue is full (64): far more than the socket buffers and the
  // host's 256 KiB take.
  core::SendWr write;
  write.opcode = core::WrOpcode::rdma_write;
  write.flags = core::send_flags::signaled;
  write.sg_list = {{client.addr(0), 1 << 20, client.mr.lkey}};
  write.rkey = 0x100;
  while (client.post(write) == 0) {
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  const int completed = client.h->call([&](core::Device& d, core::IwarpConnectionManager&) {
    std::vector<core::Wc> wcs(4096);
    return d.poll_cq(client.cq, wcs);
  });
  // What completed went into the kernel's buffers (at most 4 MiB to send and 6 MiB to
  // receive by Linux's defaults) and the host's own 256 KiB; everything else is still a WQE.
  CHECK(completed > 0);
  CHECK(completed < 32);
  const std::size_t queued =
      client.h->call([&](core::Device& d, core::IwarpConnectionManager&) { return d.qp(client.qpn)->sq.size(); });
  CHECK(queued > 0);
}
