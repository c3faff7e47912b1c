// The connection manager on QP1 between two engines (IBTA vol. 1 ch. 12): each test plays a
// connection's MADs through a wire the test controls, dropping or replaying some, and checks
// the events each side reports and what went on the wire.
#include <catch2/catch.hpp>
#include <cstdint>
#include <functional>
#include <vector>

#include "emulator/core/device.hpp"
#include "tests/core/direct_link.hpp"
#include "tests/core/engine_fixture.hpp"
#include "wire/cm_mad.hpp"
#include "wire/ib_packet.hpp"

namespace {

using namespace test;
using core::CmEventType;
using core::Time;

constexpr std::uint64_t kService = 0x0000000001061C06;  // RDMA_PS_TCP, port 7174
constexpr Time kSecond = 1'000'000'000;
constexpr Time kResponseTimeout = 4096ull << 18;  // what softrdma's REQ asks for (~1.07 s)

struct Wire {
  Side a{1, 4096}, b{2, 4096};
  // Packets for which this says true are lost.
  std::function<bool(const wire::CmMad&)> drop = [](const wire::CmMad&) { return false; };
  std::vector<wire::CmMad> sent;  // every MAD put on the wire, lost or not

  Side& peer_of(const core::TxPacket& p) { return p.route.dst == a.gid() ? a : b; }

  // Moves packets both ways at `now` until neither engine has more.
  void run(Time now) {
    bool moved = true;
    while (moved) {
      moved = false;
      for (Side* s : {&a, &b}) {
        s->dev->advance(now);
        while (auto p = s->dev->transmit(now)) {
          moved = true;
          const auto checked = wire::IbPacket::check(p->bytes);
          REQUIRE(checked);
          REQUIRE(checked->dest_qp() == 1);
          const auto mad = wire::parse_cm_mad(checked->payload());
          REQUIRE(mad);
          sent.push_back(*mad);
          if (!drop(*mad)) peer_of(*p).dev->receive(now, as_received(*p));
        }
      }
    }
  }

  static std::vector<core::CmEvent> events(Side& s) {
    std::vector<core::CmEvent> out;
    while (auto e = s.dev->next_cm_event()) out.push_back(*e);
    return out;
  }

  core::CmConnect request(std::vector<std::uint8_t> private_data = {}) const {
    core::CmConnect c;
    c.service_id = kService;
    c.remote_gid = b.gid();
    c.qpn = 0x11;
    c.starting_psn = 0x123456;
    c.responder_resources = 1;
    c.initiator_depth = 1;
    c.private_data = std::move(private_data);
    return c;
  }

  std::size_t count(wire::CmAttr attr) const {
    std::size_t n = 0;
    for (const auto& m : sent) n += wire::attribute_of(m.message) == attr;
    return n;
  }
};

template <class M>
const M& message(const core::CmEvent& e) {
  REQUIRE(e.mad);
  return std::get<M>(e.mad->message);
}

// a connects to b's listener; returns a's and b's connection IDs after the RTU.
std::pair<std::uint32_t, std::uint32_t> establish(Wire& w, Time now = 0) {
  REQUIRE(w.b.dev->cm().listen(kService));
  const auto active = w.a.dev->cm().connect(now, w.request());
  REQUIRE(active);
  w.run(now);
  const auto req = Wire::events(w.b);
  REQUIRE(req.size() == 1);
  REQUIRE(req[0].type == CmEventType::request);
  core::CmAccept accept;
  accept.qpn = 0x22;
  accept.starting_psn = 0x654321;
  REQUIRE(w.b.dev->cm().accept(now, req[0].id, accept) == 0);
  w.run(now);
  const auto rep = Wire::events(w.a);
  REQUIRE(rep.size() == 1);
  REQUIRE(rep[0].type == CmEventType::reply);
  REQUIRE(w.a.dev->cm().ready(now, *active, {}) == 0);
  w.run(now);
  const auto rtu = Wire::events(w.b);
  REQUIRE(rtu.size() == 1);
  REQUIRE(rtu[0].type == CmEventType::established);
  return {*active, req[0].id};
}

}  // namespace

TEST_CASE("cm: REQ, REP and RTU set up a connection, carrying each side's QP") {
  Wire w;
  REQUIRE(w.b.dev->cm().listen(kService));
  const std::vector<std::uint8_t> hello{1, 2, 3};
  const auto active = w.a.dev->cm().connect(0, w.request(hello));
  REQUIRE(active);
  w.run(0);
  const auto req_events = Wire::events(w.b);
  REQUIRE(req_events.size() == 1);
  const auto& req = message<wire::CmReq>(req_events[0]);
  CHECK(req.service_id == kService);
  CHECK(req.local_qpn == 0x11);
  CHECK(req.starting_psn == 0x123456);
  CHECK(req.local_comm_id == *active);
  CHECK(req.primary.local_gid == w.a.gid());
  CHECK(req.primary.remote_gid == w.b.gid());
  CHECK(req.private_data[2] == 3);
  CHECK(req_events[0].remote_gid == w.a.gid());

  core::CmAccept accept;
  accept.qpn = 0x22;
  accept.starting_psn = 0x654321;
  accept.private_data = {9};
  REQUIRE(w.b.dev->cm().accept(0, req_events[0].id, accept) == 0);
  w.run(0);
  const auto rep_events = Wire::events(w.a);
  REQUIRE(rep_events.size() == 1);
  CHECK(rep_events[0].type == CmEventType::reply);
  const auto& rep = message<wire::CmRep>(rep_events[0]);
  CHECK(rep.local_qpn == 0x22);
  CHECK(rep.starting_psn == 0x654321);
  CHECK(rep.remote_comm_id == *active);
  CHECK(rep.private_data[0] == 9);

  REQUIRE(w.a.dev->cm().ready(0, *active, {}) == 0);
  w.run(0);
  const auto rtu_events = Wire::events(w.b);
  REQUIRE(rtu_events.size() == 1);
  CHECK(rtu_events[0].type == CmEventType::established);
  CHECK(w.a.dev->next_deadline() == std::nullopt);  // nothing awaits an answer
  CHECK(w.b.dev->next_deadline() == std::nullopt);
  CHECK(w.a.dev->counters().cm.mads_sent == 2);
  CHECK(w.b.dev->counters().cm.mads_received == 2);
}

TEST_CASE("cm: a MAD goes to QP1 as a UD SEND with the GSI's Q_Key from QP1") {
  Wire w;
  REQUIRE(w.a.dev->cm().connect(0, w.request()));
  const auto p = w.a.dev->transmit(0);
  REQUIRE(p);
  const auto checked = wire::IbPacket::check(p->bytes);
  REQUIRE(checked);
  const wire::IbRepr h = wire::IbRepr::parse(*checked);
  CHECK(h.opcode == wire::opcode(wire::Transport::ud, wire::Operation::send_only));
  CHECK(h.dest_qp == 1);
  CHECK(h.src_qp == 1);
  CHECK(h.qkey == wire::kGsiQkey);
  CHECK(h.pkey == 0xFFFF);
  CHECK(h.payload.size() == wire::kMadLength);
  CHECK(p->route.dst == w.b.gid());
}

TEST_CASE("cm: a REQ for a service nobody listens on is rejected with reason 8") {
  Wire w;
  const auto active = w.a.dev->cm().connect(0, w.request());
  REQUIRE(active);
  w.run(0);
  const auto events = Wire::events(w.a);
  REQUIRE(events.size() == 1);
  CHECK(events[0].type == CmEventType::rejected);
  CHECK(message<wire::CmRej>(events[0]).reason == core::rej_reason::invalid_service_id);
  CHECK(message<wire::CmRej>(events[0]).remote_comm_id == *active);
  CHECK(w.a.dev->next_deadline() == std::nullopt);
  CHECK(Wire::events(w.b).empty());
}

TEST_CASE("cm: a REQ between two listens on one service waits for the second, not a REJ") {
  Wire w;
  const auto first = w.b.dev->cm().listen(kService);
  REQUIRE(first);
  REQUIRE(w.b.dev->cm().stop_listening(0, *first) == 0);
  REQUIRE(w.a.dev->cm().connect(0, w.request()));
  w.run(0);
  CHECK(w.count(wire::CmAttr::rej) == 0);
  CHECK(w.b.dev->counters().cm.unmatched == 1);
  REQUIRE(w.b.dev->cm().listen(kService));  // the server listens again
  w.run(kResponseTimeout);                  // and the REQ's retry finds it
  const auto events = Wire::events(w.b);
  REQUIRE(events.size() == 1);
  CHECK(events[0].type == CmEventType::request);
}

TEST_CASE("cm: a SIDR_REQ for the port of a TCP listener that just went waits for a UDP one") {
  Wire w;
  const auto tcp = w.b.dev->cm().listen(kService);  // RDMA_PS_TCP, port 7174
  REQUIRE(w.b.dev->cm().stop_listening(0, *tcp) == 0);
  core::CmServiceQuery q;
  q.service_id = 0x0000000001111C06;  // RDMA_PS_UDP, the same port
  q.remote_gid = w.b.gid();
  REQUIRE(w.a.dev->cm().resolve_service(0, q));
  w.run(0);
  CHECK(w.count(wire::CmAttr::sidr_rep) == 0);
  REQUIRE(w.b.dev->cm().listen(q.service_id));
  w.run(kResponseTimeout);
  const auto events = Wire::events(w.b);
  REQUIRE(events.size() == 1);
  CHECK(events[0].type == CmEventType::service_request);
}

TEST_CASE("cm: a service given up for longer than a response timeout is refused again") {
  Wire w;
  const auto first = w.b.dev->cm().listen(kService);
  REQUIRE(w.b.dev->cm().stop_listening(0, *first) == 0);
  REQUIRE(w.a.dev->cm().connect(kResponseTimeout, w.request()));
  w.run(kResponseTimeout);
  const auto events = Wire::events(w.a);
  REQUIRE(events.size() == 1);
  CHECK(message<wire::CmRej>(events[0]).reason == core::rej_reason::invalid_service_id);
}

TEST_CASE("cm: a lost REQ is sent again after the response timeout") {
  Wire w;
  bool lost = false;
  w.drop = [&lost](const wire::CmMad& m) {
    if (lost || wire::attribute_of(m.message) != wire::CmAttr::req) return false;
    return lost = true;
  };
  REQUIRE(w.b.dev->cm().listen(kService));
  REQUIRE(w.a.dev->cm().connect(0, w.request()));
  w.run(0);
  CHECK(Wire::events(w.b).empty());
  REQUIRE(w.a.dev->next_deadline() == kResponseTimeout);
  w.run(kResponseTimeout - 1);
  CHECK(w.count(wire::CmAttr::req) == 1);
  w.run(kResponseTimeout);
  CHECK(w.count(wire::CmAttr::req) == 2);
  const auto events = Wire::events(w.b);
  REQUIRE(events.size() == 1);
  CHECK(events[0].type == CmEventType::request);
  CHECK(w.a.dev->counters().cm.mads_resent == 1);
}

TEST_CASE("cm: a lost RTU: the passive side resends its REP, the active side answers it again") {
  Wire w;
  bool lost = false;
  w.drop = [&lost](const wire::CmMad& m) {
    if (lost || wire::attribute_of(m.message) != wire::CmAttr::rtu) return false;
    return lost = true;
  };
  REQUIRE(w.b.dev->cm().listen(kService));
  const auto active = w.a.dev->cm().connect(0, w.request());
  w.run(0);
  const auto req = Wire::events(w.b);
  REQUIRE(w.b.dev->cm().accept(0, req.at(0).id, {}) == 0);
  w.run(0);
  REQUIRE(Wire::events(w.a).size() == 1);
  REQUIRE(w.a.dev->cm().ready(0, *active, {}) == 0);
  w.run(0);
  CHECK(Wire::events(w.b).empty());
  // The REQ asked the passive side to wait 4.096 us * 2^18 for the RTU.
  w.run(kResponseTimeout);
  CHECK(w.count(wire::CmAttr::rep) == 2);
  CHECK(w.count(wire::CmAttr::rtu) == 2);
  const auto events = Wire::events(w.b);
  REQUIRE(events.size() == 1);
  CHECK(events[0].type == CmEventType::established);
  CHECK(Wire::events(w.a).empty());  // the repeated REP is not a second reply
}

TEST_CASE("cm: DREQ and DREP take a connection down from either side") {
  const bool active_disconnects = GENERATE(true, false);
  Wire w;
  const auto [a_id, b_id] = establish(w);
  Side& from = active_disconnects ? w.a : w.b;
  Side& to = active_disconnects ? w.b : w.a;
  const std::uint32_t from_id = active_disconnects ? a_id : b_id;
  REQUIRE(from.dev->cm().disconnect(0, from_id, {}) == 0);
  w.run(0);
  const auto dreq = Wire::events(to);
  REQUIRE(dreq.size() == 1);
  CHECK(dreq[0].type == CmEventType::disconnect_request);
  CHECK(message<wire::CmDreq>(dreq[0]).remote_qpn_eecn == (active_disconnects ? 0x22u : 0x11u));
  REQUIRE(to.dev->cm().disconnect(0, dreq[0].id, {}) == 0);
  w.run(0);
  const auto drep = Wire::events(from);
  REQUIRE(drep.size() == 1);
  CHECK(drep[0].type == CmEventType::disconnected);
  CHECK(from.dev->next_deadline() == std::nullopt);
}

TEST_CASE("cm: DREQs that cross end the connection at once on both sides") {
  Wire w;
  const auto [a_id, b_id] = establish(w);
  // b's DREQ is already on its way when a's arrives: each side sees the other's DREQ while
  // waiting for a DREP, and must not wait for one any more (the peer may be gone).
  REQUIRE(w.a.dev->cm().disconnect(0, a_id, {}) == 0);
  REQUIRE(w.b.dev->cm().disconnect(0, b_id, {}) == 0);
  w.run(0);
  for (Side* s : {&w.a, &w.b}) {
    const auto events = Wire::events(*s);
    REQUIRE(events.size() == 1);
    CHECK(events[0].type == CmEventType::disconnected);
    CHECK(s->dev->next_deadline() == std::nullopt);
  }
  CHECK(w.count(wire::CmAttr::dreq) == 2);
  CHECK(w.count(wire::CmAttr::drep) == 2);
}

TEST_CASE("cm: a DREQ nobody answers still ends in disconnected, after the retries") {
  Wire w;
  const auto [a_id, b_id] = establish(w);
  w.drop = [](const wire::CmMad& m) { return wire::attribute_of(m.message) == wire::CmAttr::dreq; };
  REQUIRE(w.a.dev->cm().disconnect(0, a_id, {}) == 0);
  Time t = 0;
  std::vector<core::CmEvent> events;
  while (events.empty() && t < 60 * kSecond) {
    t = w.a.dev->next_deadline().value_or(t + kSecond);
    w.run(t);
    events = Wire::events(w.a);
  }
  REQUIRE(events.size() == 1);
  CHECK(events[0].type == CmEventType::disconnected);
  CHECK_FALSE(events[0].mad);
  CHECK(w.count(wire::CmAttr::dreq) == 16);  // the first and 15 retries (the REQ's max CM retries)
}

TEST_CASE("cm: a REQ that is never answered makes the peer unreachable, and a REJ says why") {
  Wire w;
  w.drop = [](const wire::CmMad& m) { return wire::attribute_of(m.message) != wire::CmAttr::rej; };
  REQUIRE(w.b.dev->cm().listen(kService));
  REQUIRE(w.a.dev->cm().connect(0, w.request()));
  Time t = 0;
  std::vector<core::CmEvent> events;
  while (events.empty() && t < 60 * kSecond) {
    t = w.a.dev->next_deadline().value_or(t + kSecond);
    w.run(t);
    events = Wire::events(w.a);
  }
  REQUIRE(events.size() == 1);
  CHECK(events[0].type == CmEventType::unreachable);
  CHECK(w.count(wire::CmAttr::req) == 16);
  CHECK(w.count(wire::CmAttr::rej) == 1);
  CHECK(w.a.dev->next_deadline() == std::nullopt);
}

TEST_CASE("cm: a consumer's reject reaches the active side with its private data") {
  Wire w;
  REQUIRE(w.b.dev->cm().listen(kService));
  REQUIRE(w.a.dev->cm().connect(0, w.request()));
  w.run(0);
  const auto req = Wire::events(w.b);
  const std::vector<std::uint8_t> why{0xAB, 0xCD};
  REQUIRE(w.b.dev->cm().reject(0, req.at(0).id, why) == 0);
  w.run(0);
  const auto events = Wire::events(w.a);
  REQUIRE(events.size() == 1);
  CHECK(events[0].type == CmEventType::rejected);
  const auto& rej = message<wire::CmRej>(events[0]);
  CHECK(rej.reason == core::rej_reason::consumer_reject);
  CHECK(rej.private_data[0] == 0xAB);
  CHECK(rej.private_data[1] == 0xCD);
  CHECK(w.b.dev->cm().accept(0, req.at(0).id, {}) == EINVAL);  // gone
}

TEST_CASE("cm: a REP for no connection is answered with REJ invalid communication ID") {
  Wire w;
  REQUIRE(w.b.dev->cm().listen(kService));
  REQUIRE(w.a.dev->cm().connect(0, w.request()));
  w.run(0);
  REQUIRE(w.b.dev->cm().accept(0, Wire::events(w.b).at(0).id, {}) == 0);
  const auto rep = w.b.dev->transmit(0);
  REQUIRE(rep);
  Wire fresh;  // the same addresses, and no connection on a's side
  fresh.a.dev->receive(0, as_received(*rep));
  fresh.run(0);
  REQUIRE(fresh.count(wire::CmAttr::rej) == 1);
  const auto& rej = std::get<wire::CmRej>(fresh.sent.back().message);
  CHECK(rej.reason == core::rej_reason::invalid_comm_id);
  CHECK(rej.message_rejected == 1);
  CHECK(fresh.a.dev->counters().cm.rejects_sent == 1);
  CHECK(Wire::events(fresh.a).empty());
}

TEST_CASE("cm: a new REQ from a QP that is still connected is rejected as stale") {
  Wire w;
  establish(w);
  REQUIRE(w.a.dev->cm().connect(0, w.request()));  // the same QP again
  w.run(0);
  const auto events = Wire::events(w.a);
  REQUIRE(events.size() == 1);
  CHECK(events[0].type == CmEventType::rejected);
  CHECK(message<wire::CmRej>(events[0]).reason == core::rej_reason::stale_connection);
  CHECK(Wire::events(w.b).empty());
}

TEST_CASE("cm: a flood of REQs: 1024 wait for the consumer, the rest are refused for want of resources") {
  Wire w;
  REQUIRE(w.b.dev->cm().listen(kService));
  for (int i = 0; i < 1100; ++i) REQUIRE(w.a.dev->cm().connect(0, w.request()));
  w.run(0);
  CHECK(Wire::events(w.b).size() == 1024);
  const auto refused = Wire::events(w.a);
  REQUIRE(refused.size() == 76);
  for (const auto& e : refused) CHECK(message<wire::CmRej>(e).reason == core::rej_reason::no_resources);
  CHECK(w.b.dev->counters().cm.rejects_sent == 76);
}

TEST_CASE("cm: malformed MADs and MADs for other QPs' Q_Keys are counted and dropped") {
  Wire w;
  REQUIRE(w.a.dev->cm().connect(0, w.request()));
  auto p = w.a.dev->transmit(0);
  REQUIRE(p);
  SECTION("a wrong class version") {
    p->bytes[20 + 2] = 1;  // BTH 12 + DETH 8, then the MAD header's class version
    w.a.dev->finish(*p);
    w.b.dev->receive(0, as_received(*p));
    CHECK(w.b.dev->counters().cm.malformed == 1);
  }
  SECTION("another Q_Key") {
    p->bytes[12] ^= 0x01;  // DETH's Q_Key
    w.a.dev->finish(*p);
    w.b.dev->receive(0, as_received(*p));
    CHECK(w.b.dev->counters().dropped == 1);
  }
  CHECK(w.b.dev->counters().cm.mads_received == 0);
  CHECK_FALSE(w.b.dev->transmit(0));
  CHECK(Wire::events(w.b).empty());
}

TEST_CASE("cm: SIDR finds the QP behind a service ID, or says nobody serves it") {
  Wire w;
  core::CmServiceQuery q;
  q.service_id = 0x0000000001111C06;  // RDMA_PS_UDP
  q.remote_gid = w.b.gid();
  SECTION("a listener answers with its QP and Q_Key") {
    REQUIRE(w.b.dev->cm().listen(q.service_id));
    const auto asked = w.a.dev->cm().resolve_service(0, q);
    REQUIRE(asked);
    w.run(0);
    const auto req = Wire::events(w.b);
    REQUIRE(req.size() == 1);
    CHECK(req[0].type == CmEventType::service_request);
    REQUIRE(w.b.dev->cm().answer_service(0, req[0].id, {core::sidr_status::valid, 0x33, 0x01234567, {}}) == 0);
    w.run(0);
    const auto rep = Wire::events(w.a);
    REQUIRE(rep.size() == 1);
    CHECK(rep[0].type == CmEventType::service_reply);
    CHECK(rep[0].id == *asked);
    CHECK(message<wire::CmSidrRep>(rep[0]).qpn == 0x33);
    CHECK(message<wire::CmSidrRep>(rep[0]).qkey == 0x01234567);
    CHECK(message<wire::CmSidrRep>(rep[0]).service_id == q.service_id);
  }
  SECTION("without one, status 1") {
    REQUIRE(w.a.dev->cm().resolve_service(0, q));
    w.run(0);
    const auto rep = Wire::events(w.a);
    REQUIRE(rep.size() == 1);
    CHECK(message<wire::CmSidrRep>(rep[0]).status == core::sidr_status::service_id_not_supported);
  }
  CHECK(w.a.dev->next_deadline() == std::nullopt);
}

TEST_CASE("cm: calls out of turn and oversized private data return EINVAL") {
  Wire w;
  CHECK(w.a.dev->cm().accept(0, 1234, {}) == EINVAL);
  CHECK(w.a.dev->cm().ready(0, 1234, {}) == EINVAL);
  CHECK(w.a.dev->cm().disconnect(0, 1234, {}) == EINVAL);
  CHECK(w.a.dev->cm().connect(0, w.request(std::vector<std::uint8_t>(93))).error() == EINVAL);
  REQUIRE(w.a.dev->cm().listen(kService));
  CHECK(w.a.dev->cm().listen(kService).error() == EADDRINUSE);
  const auto active = w.a.dev->cm().connect(0, w.request());
  CHECK(w.a.dev->cm().ready(0, *active, {}) == EINVAL);  // no REP yet
}

TEST_CASE("cm: destroying a connection tells the peer: REJ before it is up, DREQ after") {
  Wire w;
  SECTION("a request the consumer drops is rejected") {
    REQUIRE(w.b.dev->cm().listen(kService));
    REQUIRE(w.a.dev->cm().connect(0, w.request()));
    w.run(0);
    const auto req = Wire::events(w.b);
    w.b.dev->cm().destroy(0, req.at(0).id);
    w.run(0);
    const auto events = Wire::events(w.a);
    REQUIRE(events.size() == 1);
    CHECK(events[0].type == CmEventType::rejected);
  }
  SECTION("an established connection is disconnected") {
    const auto [a_id, b_id] = establish(w);
    w.a.dev->cm().destroy(0, a_id);
    w.run(0);
    const auto events = Wire::events(w.b);
    REQUIRE(events.size() == 1);
    CHECK(events[0].type == CmEventType::disconnect_request);
    REQUIRE(w.b.dev->cm().disconnect(0, b_id, {}) == 0);
    w.run(0);  // the DREP finds no connection: counted, not an event
    CHECK(w.a.dev->counters().cm.unmatched == 1);
    CHECK(Wire::events(w.a).empty());
  }
}
