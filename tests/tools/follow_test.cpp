// `softrdma dump --follow`'s analysis (tools/softrdma/follow.hpp) fed hand-built packet
// sequences, one flag at a time; the conversation finder on hand-built frames; and the clean
// rxe capture, where nothing may be flagged.
#include "tools/softrdma/follow.hpp"

#include <array>
#include <catch2/catch.hpp>
#include <string>
#include <variant>
#include <vector>

#include "emulator/net/pcap_file.hpp"
#include "tools/softrdma/conversation.hpp"
#include "tools/softrdma/frame_judge.hpp"

namespace {

using softrdma::dump::Conversation;
using softrdma::dump::ConversationFinder;
using softrdma::dump::Direction;
using softrdma::dump::DirectionSummary;
using softrdma::dump::Follower;
using softrdma::dump::NakKind;
using softrdma::dump::PacketFlags;
using wire::Operation;
using wire::Transport;

constexpr Direction kIn = Direction::in, kOut = Direction::out;
const std::array<std::uint8_t, 4096> kZeros{};

wire::IbRepr packet(Transport t, Operation op, std::uint32_t psn, std::size_t payload = 0) {
  wire::IbRepr r;
  r.opcode = wire::opcode(t, op);
  r.dest_qp = 0x12;
  r.psn = psn;
  r.payload = std::span(kZeros).first(payload);
  return r;
}
wire::IbRepr rc(Operation op, std::uint32_t psn, std::size_t payload = 0) {
  return packet(Transport::rc, op, psn, payload);
}
wire::IbRepr read_request(std::uint32_t psn, std::uint32_t length) {
  wire::IbRepr r = rc(Operation::read_request, psn);
  r.dma_length = length;
  return r;
}
wire::IbRepr ack(std::uint32_t psn, wire::AckKind kind = wire::AckKind::ack, std::uint8_t value = 31) {
  wire::IbRepr r = rc(Operation::ack, psn);
  r.syndrome = wire::make_syndrome(kind, value);
  return r;
}

PacketFlags feed(Follower& f, Direction d, const wire::IbRepr& r, bool icrc_ok = true) {
  std::vector<std::uint8_t> bytes(r.buffer_len());
  r.emit(bytes.data());
  const auto p = wire::IbPacket::check(bytes);
  REQUIRE(p);
  return f.feed(d, *p, icrc_ok);
}

bool clean(const PacketFlags& f) {
  return f.gap == 0 && f.read_gap == 0 && !f.retransmission && !f.late && !f.duplicate && !f.nak && !f.bad_icrc;
}
bool clean(const DirectionSummary& s) {
  std::uint64_t naks = 0;
  for (const std::uint64_t n : s.naks) naks += n;
  return s.gaps == 0 && s.missing_psns == 0 && s.read_gaps == 0 && s.missing_read_psns == 0 && s.retransmissions == 0 &&
         s.late == 0 && s.duplicates == 0 && s.bad_icrc == 0 && naks == 0;
}

TEST_CASE("follow: requests in order and coalesced ACKs carry no flag", "[follow]") {
  Follower f;
  for (std::uint32_t psn = 10; psn < 16; ++psn) CHECK(clean(feed(f, kOut, rc(Operation::write_middle, psn, 1024))));
  CHECK(clean(feed(f, kIn, ack(12))));  // one ACK for three packets
  CHECK(clean(feed(f, kIn, ack(15))));
  CHECK(f.summary(kOut).packets == 6);
  CHECK(f.summary(kIn).packets == 2);
  CHECK(clean(f.summary(kOut)));
  CHECK(clean(f.summary(kIn)));
}

TEST_CASE("follow: a gap says how many PSNs are missing, they come late, and the rewind resends the rest", "[follow]") {
  Follower f;
  CHECK(clean(feed(f, kOut, rc(Operation::send_first, 100, 256))));
  CHECK(clean(feed(f, kOut, rc(Operation::send_middle, 101, 256))));
  const PacketFlags jump = feed(f, kOut, rc(Operation::send_middle, 104, 256));
  CHECK(jump.gap == 2);
  CHECK_FALSE(jump.retransmission);
  const PacketFlags nak = feed(f, kIn, ack(102, wire::AckKind::nak, 0));
  CHECK(nak.nak == NakKind::psn_sequence_error);
  CHECK(feed(f, kOut, rc(Operation::send_middle, 102, 256)).late);
  CHECK(feed(f, kOut, rc(Operation::send_middle, 103, 256)).late);
  const PacketFlags again = feed(f, kOut, rc(Operation::send_middle, 104, 256));
  CHECK(again.retransmission);
  CHECK(again.gap == 0);
  CHECK(clean(feed(f, kOut, rc(Operation::send_last, 105, 10))));

  const DirectionSummary& out = f.summary(kOut);
  CHECK(out.packets == 7);
  CHECK(out.gaps == 1);
  CHECK(out.missing_psns == 2);
  CHECK(out.late == 2);
  CHECK(out.retransmissions == 1);
  CHECK(f.summary(kIn).nak_count(NakKind::psn_sequence_error) == 1);
}

TEST_CASE("follow: the same packet twice in a row is a duplicate, once the peer answered a retransmission",
          "[follow]") {
  Follower f;
  CHECK(clean(feed(f, kOut, rc(Operation::send_only, 7, 40))));
  const PacketFlags copy = feed(f, kOut, rc(Operation::send_only, 7, 40));
  CHECK(copy.duplicate);
  CHECK_FALSE(copy.retransmission);  // a duplicate is not judged again as a resend
  CHECK(clean(feed(f, kIn, ack(7))));
  const PacketFlags resend = feed(f, kOut, rc(Operation::send_only, 7, 40));
  CHECK(resend.retransmission);
  CHECK_FALSE(resend.duplicate);
  CHECK(f.summary(kOut).duplicates == 1);
  CHECK(f.summary(kOut).retransmissions == 1);
  // A different packet at the same PSN right after is no copy: it is a resend.
  const PacketFlags changed = feed(f, kOut, rc(Operation::send_only, 7, 44));
  CHECK_FALSE(changed.duplicate);
  CHECK(changed.retransmission);
}

TEST_CASE("follow: every NAK kind of the AETH syndrome, and the RNR timer's delay", "[follow]") {
  Follower f;
  const PacketFlags rnr = feed(f, kIn, ack(1, wire::AckKind::rnr_nak, 14));
  CHECK(rnr.nak == NakKind::rnr);
  CHECK(rnr.rnr_delay_ns == 1'280'000);  // IBTA vol. 1 table 45: code 14 is 1.28 ms
  CHECK(feed(f, kIn, ack(2, wire::AckKind::rnr_nak, 0)).rnr_delay_ns == 655'360'000);  // code 0 is the longest
  CHECK(feed(f, kIn, ack(3, wire::AckKind::nak, 1)).nak == NakKind::invalid_request);
  CHECK(feed(f, kIn, ack(4, wire::AckKind::nak, 2)).nak == NakKind::remote_access_error);
  CHECK(feed(f, kIn, ack(5, wire::AckKind::nak, 3)).nak == NakKind::remote_operational_error);
  CHECK(feed(f, kIn, ack(6, wire::AckKind::nak, 4)).nak == NakKind::other);       // invalid RD request
  CHECK(feed(f, kIn, ack(7, wire::AckKind::reserved, 0)).nak == NakKind::other);  // reserved syndrome
  CHECK_FALSE(feed(f, kIn, ack(8)).nak);
  const DirectionSummary& in = f.summary(kIn);
  CHECK(in.nak_count(NakKind::rnr) == 2);
  CHECK(in.nak_count(NakKind::invalid_request) == 1);
  CHECK(in.nak_count(NakKind::remote_access_error) == 1);
  CHECK(in.nak_count(NakKind::remote_operational_error) == 1);
  CHECK(in.nak_count(NakKind::other) == 2);
  CHECK(in.nak_count(NakKind::psn_sequence_error) == 0);
}

TEST_CASE("follow: PSNs wrap at 2^24 without a flag, gaps and resends across the wrap are counted", "[follow]") {
  Follower f;
  for (const std::uint32_t psn : {0xFFFFFDu, 0xFFFFFEu, 0xFFFFFFu, 0u, 1u})
    CHECK(clean(feed(f, kOut, rc(Operation::write_middle, psn, 512))));
  CHECK(feed(f, kOut, rc(Operation::write_middle, 4, 512)).gap == 2);
  CHECK(feed(f, kOut, rc(Operation::write_middle, 0xFFFFFF, 512)).retransmission);
  CHECK(feed(f, kOut, rc(Operation::write_middle, 0, 512)).retransmission);
  CHECK(feed(f, kOut, rc(Operation::write_middle, 2, 512)).late);

  Follower g;  // the first PSN just before the wrap, the gap over it
  CHECK(clean(feed(g, kOut, rc(Operation::send_only, 0xFFFFFE, 8))));
  CHECK(feed(g, kOut, rc(Operation::send_only, 3, 8)).gap == 4);  // 0xFFFFFF, 0, 1, 2
}

TEST_CASE("follow: a READ takes one PSN per response packet, and missing READ responses are read gaps", "[follow]") {
  Follower f;
  // The path MTU is not known yet: a 4 KiB READ takes 1 to 16 PSNs, so 54 is no gap.
  CHECK(clean(feed(f, kOut, read_request(50, 4096))));
  CHECK(clean(feed(f, kOut, rc(Operation::send_only, 54, 16))));
  CHECK(clean(feed(f, kIn, rc(Operation::read_response_first, 50, 1024))));  // the MTU is 1024
  CHECK(clean(feed(f, kIn, rc(Operation::read_response_middle, 51, 1024))));
  CHECK(feed(f, kIn, rc(Operation::read_response_last, 53, 1024)).read_gap == 1);  // 52 missing
  CHECK(clean(feed(f, kIn, ack(54))));

  // Now the MTU is known: a 2 KiB READ takes exactly 2 PSNs, and a request at 58 skips 57.
  CHECK(clean(feed(f, kOut, read_request(55, 2048))));
  CHECK(feed(f, kOut, rc(Operation::send_only, 58, 16)).gap == 1);
  CHECK(feed(f, kIn, rc(Operation::read_response_last, 56, 1024)).read_gap == 1);  // its FIRST, 55, never came

  // A READ's responses cut short by the next READ's.
  CHECK(clean(feed(f, kOut, read_request(59, 3072))));
  CHECK(clean(feed(f, kOut, read_request(62, 100))));
  CHECK(clean(feed(f, kIn, rc(Operation::read_response_first, 59, 1024))));
  CHECK(clean(feed(f, kIn, rc(Operation::read_response_middle, 60, 1024))));
  CHECK(feed(f, kIn, rc(Operation::read_response_only, 62, 100)).read_gap == 1);  // 61 missing

  // The responder executes a duplicate READ again: its responses are retransmissions.
  CHECK(feed(f, kIn, rc(Operation::read_response_first, 50, 1024)).retransmission);
  CHECK(feed(f, kIn, rc(Operation::read_response_middle, 51, 1024)).retransmission);
  CHECK(feed(f, kIn, rc(Operation::read_response_middle, 52, 1024)).late);

  const DirectionSummary& in = f.summary(kIn);
  CHECK(in.read_gaps == 3);
  CHECK(in.missing_read_psns == 3);
  CHECK(in.retransmissions == 2);
  CHECK(f.summary(kOut).gaps == 1);
}

TEST_CASE("follow: a replayed atomic result is a retransmission", "[follow]") {
  Follower f;
  CHECK(clean(feed(f, kOut, rc(Operation::fetch_add, 9))));
  CHECK(clean(feed(f, kIn, rc(Operation::atomic_ack, 9))));
  CHECK(feed(f, kOut, rc(Operation::fetch_add, 9)).retransmission);
  CHECK(feed(f, kIn, rc(Operation::atomic_ack, 9)).retransmission);
}

TEST_CASE("follow: a bad ICRC is flagged and, dropped by the receiver, leaves a gap", "[follow]") {
  Follower f;
  CHECK(clean(feed(f, kOut, rc(Operation::send_only, 1, 8))));
  const PacketFlags bad = feed(f, kOut, rc(Operation::send_only, 2, 8), false);
  CHECK(bad.bad_icrc);
  CHECK(bad.gap == 0);
  CHECK(feed(f, kOut, rc(Operation::send_only, 3, 8)).gap == 1);
  CHECK(feed(f, kOut, rc(Operation::send_only, 2, 8)).late);
  CHECK(f.summary(kOut).bad_icrc == 1);
}

TEST_CASE("follow: UC and UD PSNs have gaps too", "[follow]") {
  Follower f;
  CHECK(clean(feed(f, kIn, packet(Transport::ud, Operation::send_only, 0, 64))));
  CHECK(feed(f, kIn, packet(Transport::ud, Operation::send_only, 5, 64)).gap == 4);
  CHECK(clean(feed(f, kOut, packet(Transport::uc, Operation::write_only, 70, 64))));
  CHECK(feed(f, kOut, packet(Transport::uc, Operation::write_only, 72, 64)).gap == 1);
}

// Frames between addresses 10.0.0.<from> and 10.0.0.<to>.
std::vector<std::uint8_t> frame(std::uint8_t from, std::uint8_t to, wire::IbRepr ib) {
  wire::RoceFrameRepr r;
  wire::Ipv4Repr ip;
  ip.src = {10, 0, 0, from};
  ip.dst = {10, 0, 0, to};
  r.network = ip;
  r.ib = ib;
  std::vector<std::uint8_t> b(r.buffer_len());
  r.emit(b.data());
  return b;
}
wire::IbRepr to_qp(std::uint32_t qpn, wire::IbRepr r) {
  r.dest_qp = qpn;
  return r;
}
wire::IbRepr ud_send(std::uint32_t dqp, std::uint32_t sqp) {
  wire::IbRepr r = packet(Transport::ud, Operation::send_only, 0, 8);
  r.dest_qp = dqp;
  r.src_qp = sqp;
  return r;
}

struct Capture {
  std::vector<std::vector<std::uint8_t>> frames;
  void add(std::uint8_t from, std::uint8_t to, const wire::IbRepr& ib) { frames.push_back(frame(from, to, ib)); }
  std::variant<Conversation, std::string> find(std::uint32_t qpn, std::optional<std::uint32_t> peer = {}) const {
    ConversationFinder finder(qpn);
    for (const auto& b : frames) finder.add(*wire::RoceFrame::check(b));
    return finder.result(peer);
  }
  std::optional<Direction> direction(const Conversation& c, std::size_t i) const {
    return c.direction_of(*wire::RoceFrame::check(frames.at(i)));
  }
};

TEST_CASE("follow: an RC QP's peer is the QP its address answers, and several peers need --peer", "[follow]") {
  Capture cap;
  cap.add(1, 2, to_qp(0x20, rc(Operation::send_only, 1, 4)));  // 10.0.0.1 -> QP 0x20 at .2
  cap.add(2, 1, to_qp(0x30, ack(1)));                          // its answer goes to QP 0x30
  cap.add(2, 3, to_qp(0x44, rc(Operation::send_only, 9, 4)));  // another conversation of .2
  auto found = cap.find(0x20);
  REQUIRE(std::holds_alternative<Conversation>(found));
  const Conversation& c = std::get<Conversation>(found);
  CHECK(c.peer.qpn == 0x30);
  CHECK(c.peer_text() == "10.0.0.1 QP 0x000030");
  CHECK(cap.direction(c, 0) == Direction::in);
  CHECK(cap.direction(c, 1) == Direction::out);
  CHECK_FALSE(cap.direction(c, 2));

  cap.add(4, 2, to_qp(0x20, rc(Operation::send_only, 1, 4)));  // a second sender to QP 0x20
  cap.add(2, 4, to_qp(0x31, ack(1)));
  const auto two = cap.find(0x20);
  REQUIRE(std::holds_alternative<std::string>(two));
  CHECK(std::get<std::string>(two) ==
        "QP 0x000020 talks to several peers (10.0.0.1 QP 0x000030, 10.0.0.4 QP 0x000031): choose one with --peer QPN");
  const auto chosen = cap.find(0x20, 0x31);
  REQUIRE(std::holds_alternative<Conversation>(chosen));
  CHECK(cap.direction(std::get<Conversation>(chosen), 3) == Direction::in);
  CHECK(std::get<std::string>(cap.find(0x20, 0x99)) == "QP 0x000020 has no peer QP 0x000099");
  CHECK(std::get<std::string>(cap.find(0x77)) == "no RoCE packet to or from QP 0x000077");
}

TEST_CASE("follow: of several QPs between two addresses, the peer is the one whose ACKs carry the request PSNs",
          "[follow]") {
  Capture cap;
  cap.add(1, 2, to_qp(0x20, rc(Operation::send_only, 100, 4)));
  cap.add(1, 2, to_qp(0x21, rc(Operation::send_only, 500, 4)));
  cap.add(2, 1, to_qp(0x31, ack(500)));
  cap.add(2, 1, to_qp(0x30, ack(100)));
  for (const auto& [followed, peer] : {std::pair{0x20u, 0x30u}, std::pair{0x21u, 0x31u}}) {
    const auto found = cap.find(followed);
    REQUIRE(std::holds_alternative<Conversation>(found));
    CHECK(std::get<Conversation>(found).peer.qpn == peer);
  }
  cap.add(2, 1, to_qp(0x32, ack(7)));  // a third QP's PSNs match nothing: no change
  CHECK(std::get<Conversation>(cap.find(0x20)).peer.qpn == 0x30);
  CHECK(std::get<Conversation>(cap.find(0x20, 0x32)).peer.qpn == 0x32);  // unless --peer says otherwise

  Capture unmatched;  // no PSN to tell them apart: ask
  unmatched.add(1, 2, to_qp(0x20, rc(Operation::send_only, 100, 4)));
  unmatched.add(2, 1, to_qp(0x30, ack(1)));
  unmatched.add(2, 1, to_qp(0x31, ack(2)));
  CHECK(std::holds_alternative<std::string>(unmatched.find(0x20)));
}

TEST_CASE("follow: a UD QP's peer is the DETH source QP, and two QPs of one number are one conversation", "[follow]") {
  Capture cap;
  cap.add(1, 2, ud_send(0x50, 0x60));
  cap.add(2, 1, ud_send(0x60, 0x50));
  cap.add(2, 1, ud_send(0x61, 0x55));  // another QP of .2 to another of .1
  const auto found = cap.find(0x50);
  REQUIRE(std::holds_alternative<Conversation>(found));
  const Conversation& c = std::get<Conversation>(found);
  CHECK(c.ud);
  CHECK(c.peer.qpn == 0x60);
  CHECK(cap.direction(c, 0) == Direction::in);
  CHECK(cap.direction(c, 1) == Direction::out);
  CHECK_FALSE(cap.direction(c, 2));

  // Each device's first QP has the same number: RC QP 0x11 of .1 connected to QP 0x11 of .2.
  // The followed one is the end that spoke first.
  Capture same;
  same.add(1, 2, to_qp(0x11, rc(Operation::send_only, 1, 4)));
  same.add(2, 1, to_qp(0x11, ack(1)));
  const auto one = same.find(0x11);
  REQUIRE(std::holds_alternative<Conversation>(one));
  const Conversation& rc11 = std::get<Conversation>(one);
  CHECK(rc11.followed.address == std::vector<std::uint8_t>{10, 0, 0, 1});
  CHECK(same.direction(rc11, 0) == Direction::out);
  CHECK(same.direction(rc11, 1) == Direction::in);
}

TEST_CASE("follow: a clean rxe run of every RDMA operation has no flag at all", "[follow][golden]") {
  const std::string path = std::string(SOFTRDMA_TEST_DATA) + "/rxe-rdmaops.pcap";
  const auto read_roce = [&] {
    std::string error;
    auto r = softrdma::net::PcapReader::open(path, error);
    REQUIRE(r);
    std::vector<std::vector<std::uint8_t>> out;
    while (auto p = r->next())
      if (softrdma::dump::judge_roce(*p).kind == softrdma::dump::FrameKind::roce)
        out.emplace_back(p->data.begin(), p->data.end());
    return out;
  };
  const auto frames = read_roce();
  // RC QP 0x1d (SEND, WRITE, READ, atomics from 0x1b) and the UD QP 1 of each side (CM).
  for (const auto& [qpn, packets] :
       std::vector<std::pair<std::uint32_t, std::uint64_t>>{{0x1d, 23}, {0x1b, 23}, {1, 5}}) {
    INFO("QP " << qpn);
    ConversationFinder finder(qpn);
    for (const auto& b : frames) finder.add(*wire::RoceFrame::check(b));
    const auto found = finder.result(std::nullopt);
    REQUIRE(std::holds_alternative<Conversation>(found));
    const Conversation& c = std::get<Conversation>(found);
    Follower f;
    for (const auto& b : frames) {
      const auto frame = wire::RoceFrame::check(b);
      if (const auto d = c.direction_of(*frame)) CHECK(clean(f.feed(*d, frame->ib(), frame->icrc_ok())));
    }
    CHECK(f.summary(kIn).packets + f.summary(kOut).packets == packets);
    CHECK(clean(f.summary(kIn)));
    CHECK(clean(f.summary(kOut)));
  }
}

}  // namespace
