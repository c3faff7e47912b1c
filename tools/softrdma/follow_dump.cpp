#include "tools/softrdma/follow_dump.hpp"

#include <cstdio>
#include <string>
#include <variant>

#include "tools/softrdma/conversation.hpp"
#include "tools/softrdma/frame_judge.hpp"
#include "tools/softrdma/roce_describe.hpp"

namespace softrdma::dump {
namespace {

void print(const FollowOptions& o, const Record& r) { std::puts((o.json ? r.to_json() : r.to_text()).c_str()); }

std::string lower(const char* s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
  return out;
}

}  // namespace

void describe_flags(const PacketFlags& f, Record& r) {
  if (f.gap) r.number("gap", f.gap);
  if (f.read_gap) r.number("read_gap", f.read_gap);
  r.flag("retransmission", f.retransmission);
  r.flag("late", f.late);
  r.flag("duplicate", f.duplicate);
  if (f.nak) r.text("nak", name(*f.nak));
  if (f.nak == NakKind::rnr) r.number("rnr_delay_us", f.rnr_delay_ns / 1000);
  r.flag("bad_icrc", f.bad_icrc);
}

void describe_summary(Direction d, const DirectionSummary& s, Record& r) {
  r.text("summary", name(d))
      .number("packets", s.packets)
      .number("gaps", s.gaps)
      .number("missing_psns", s.missing_psns)
      .number("read_gaps", s.read_gaps)
      .number("missing_read_psns", s.missing_read_psns)
      .number("retransmissions", s.retransmissions)
      .number("late", s.late)
      .number("duplicates", s.duplicates)
      .number("bad_icrc", s.bad_icrc);
  for (std::size_t k = 0; k < s.naks.size(); ++k) r.number("naks_" + lower(name(static_cast<NakKind>(k))), s.naks[k]);
}

int follow_dump(const FollowOptions& o, net::PcapReader& reader) {
  ConversationFinder finder(o.qpn);
  while (auto pkt = reader.next()) {
    const RoceJudgement j = judge_roce(*pkt);
    if (j.kind == FrameKind::roce) finder.add(*j.frame);
  }
  std::string error = reader.error();
  if (!error.empty()) {
    std::fprintf(stderr, "softrdma dump: %s: read error: %s\n", o.file, error.c_str());
    return 2;
  }
  const auto found = finder.result(o.peer);
  if (const auto* why = std::get_if<std::string>(&found)) {
    std::fprintf(stderr, "softrdma dump: %s: %s\n", o.file, why->c_str());
    return 2;
  }
  const Conversation& c = std::get<Conversation>(found);
  auto again = net::PcapReader::open(o.file, error);
  if (!again) {
    std::fprintf(stderr, "softrdma dump: cannot read %s again: %s\n", o.file, error.c_str());
    return 2;
  }

  Record head;
  head.text("follow", format_address(c.followed.address))
      .hex("qp", c.followed.qpn, 6)
      .text("peer", format_address(c.peer.address));
  if (c.peer_qpn_known)
    head.hex("peer_qp", c.peer.qpn, 6);
  else
    head.text("peer_qp", "unknown");
  print(o, head);

  Follower follower;
  std::uint64_t frame = 0, first_ns = 0;
  bool bad = false;
  while (auto pkt = again->next()) {
    if (++frame == 1) first_ns = pkt->time_ns;
    const RoceJudgement j = judge_roce(*pkt);
    if (j.kind != FrameKind::roce) continue;
    const std::optional<Direction> d = c.direction_of(*j.frame);
    if (!d) continue;
    char t[32];
    std::snprintf(t, sizeof t, "%.6f", static_cast<double>(pkt->time_ns - first_ns) / 1e9);
    Record r;
    r.number("frame", frame).text("time", t).text("dir", name(*d));
    describe_roce(*j.frame, r);
    describe_flags(follower.feed(*d, j.frame->ib(), j.icrc_ok), r);
    print(o, r);
    bad = bad || !j.icrc_ok;
  }
  if (!again->error().empty()) {
    std::fprintf(stderr, "softrdma dump: %s: read error after %llu packets: %s\n", o.file,
                 static_cast<unsigned long long>(frame), again->error().c_str());
    return 2;
  }
  for (const Direction d : {Direction::in, Direction::out}) {
    Record s;
    describe_summary(d, follower.summary(d), s);
    print(o, s);
  }
  return o.check && bad ? 1 : 0;
}

}  // namespace softrdma::dump
