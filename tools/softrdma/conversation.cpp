#include "tools/softrdma/conversation.hpp"

#include <algorithm>
#include <cstdio>

#include "tools/softrdma/roce_describe.hpp"

namespace softrdma::dump {
namespace {

struct Addresses {
  std::vector<std::uint8_t> src, dst;
};

Addresses addresses_of(const wire::RoceFrame& f) {
  const std::uint8_t* n = f.network_header().data();
  switch (f.encapsulation()) {
    case wire::Encapsulation::rocev1:
      return {{n + wire::Grh::sgid_offset, n + wire::Grh::sgid_offset + 16},
              {n + wire::Grh::dgid_offset, n + wire::Grh::dgid_offset + 16}};
    case wire::Encapsulation::rocev2_ipv4:
      return {{n + 12, n + 16}, {n + 16, n + 20}};
    case wire::Encapsulation::rocev2_ipv6:
      return {{n + wire::Ipv6::src_offset, n + wire::Ipv6::src_offset + 16},
              {n + wire::Ipv6::src_offset + 16, n + wire::Ipv6::src_offset + 32}};
  }
  return {};
}

std::optional<std::uint32_t> source_qp(const wire::IbPacket& p) {
  if (const std::uint8_t* deth = p.ext(wire::Ext::deth)) return wire::Deth::src_qp::get(deth);
  return std::nullopt;
}

std::string qp_text(std::uint32_t qpn) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%06x", qpn);
  return buf;
}

std::string endpoint_text(const std::vector<std::uint8_t>& address, const std::string& qpn) {
  return format_address(address) + " QP " + qpn;
}

}  // namespace

std::string Conversation::peer_text() const {
  return endpoint_text(peer.address, peer_qpn_known ? qp_text(peer.qpn) : "?");
}

std::optional<Direction> Conversation::direction_of(const wire::RoceFrame& f) const {
  const Addresses a = addresses_of(f);
  const wire::IbPacket& p = f.ib();
  const std::optional<std::uint32_t> sqp = source_qp(p);
  if (sqp.has_value() != ud) return std::nullopt;
  if (a.dst == followed.address && p.dest_qp() == followed.qpn && a.src == peer.address && (!ud || sqp == peer.qpn))
    return Direction::in;
  if (peer_qpn_known && a.src == followed.address && a.dst == peer.address && p.dest_qp() == peer.qpn &&
      (!ud || sqp == followed.qpn))
    return Direction::out;
  return std::nullopt;
}

void ConversationFinder::add(const wire::RoceFrame& f) {
  const wire::IbPacket& p = f.ib();
  const std::optional<std::uint32_t> sqp = source_qp(p);
  Addresses a = addresses_of(f);
  Flow flow{std::move(a.src), std::move(a.dst), p.dest_qp(), sqp};
  auto [it, added] = psns_.try_emplace(flow);
  if (added) flows_.push_back(std::move(flow));
  // A few thousand PSNs of each are plenty to match two flows, and bound the memory.
  constexpr std::size_t kKept = 4096;
  std::set<std::uint32_t>& kept = p.info().is(wire::OpFlag::request) ? it->second.requests : it->second.responses;
  if (kept.size() < kKept) kept.insert(p.psn());
}

bool ConversationFinder::answers(const Flow& back, const Flow& to) const {
  const Psns& b = psns_.at(back);
  const Psns& t = psns_.at(to);
  const auto meet = [](const std::set<std::uint32_t>& x, const std::set<std::uint32_t>& y) {
    return std::any_of(x.begin(), x.end(), [&](std::uint32_t psn) { return y.contains(psn); });
  };
  return meet(b.responses, t.requests) || meet(t.responses, b.requests);
}

std::variant<Conversation, std::string> ConversationFinder::result(std::optional<std::uint32_t> peer) const {
  std::vector<Conversation> found;
  const auto add = [&](Conversation c) {
    if (peer && c.peer_qpn_known && c.peer.qpn != *peer) return;
    if (peer && !c.peer_qpn_known) {
      c.peer.qpn = *peer;
      c.peer_qpn_known = true;
    }
    // The two ends of one conversation, found once from each side, are one candidate.
    const auto same = [&](const Conversation& o) {
      return o.ud == c.ud && o.peer_qpn_known == c.peer_qpn_known &&
             ((o.followed == c.followed && o.peer == c.peer) || (o.followed == c.peer && o.peer == c.followed));
    };
    if (std::none_of(found.begin(), found.end(), same)) found.push_back(std::move(c));
  };
  for (const Flow& f : flows_) {
    if (f.sqp) {  // UD: both ends are in every packet
      if (*f.sqp == qpn_) add({{f.src, qpn_}, {f.dst, f.dqp}, true, true});
      if (f.dqp == qpn_) add({{f.dst, qpn_}, {f.src, *f.sqp}, true, true});
      continue;
    }
    if (f.dqp != qpn_) continue;
    std::vector<const Flow*> backs;
    for (const Flow& back : flows_) {
      const bool is_followed = back.dst == f.dst && back.dqp == qpn_;
      if (!back.sqp && back.src == f.dst && back.dst == f.src && !is_followed) backs.push_back(&back);
    }
    // Several QPs of the followed address talk to f's sender: keep those whose PSNs match,
    // unless --peer names one.
    if (!peer && backs.size() > 1 &&
        std::any_of(backs.begin(), backs.end(), [&](const Flow* b) { return answers(*b, f); }))
      std::erase_if(backs, [&](const Flow* b) { return !answers(*b, f); });
    bool answered = false;
    for (const Flow* back : backs) {
      if (back->dqp == qpn_)
        add({{f.src, qpn_}, {f.dst, qpn_}, true, false});  // the same QPN both ends: f's sender spoke first
      else
        add({{f.dst, qpn_}, {f.src, back->dqp}, true, false});
      answered = true;
    }
    if (!answered) add({{f.dst, qpn_}, {f.src, 0}, false, false});
  }

  if (found.size() == 1) return found.front();
  std::string peers;
  for (const Conversation& c : found) peers += (peers.empty() ? "" : ", ") + c.peer_text();
  if (found.empty() && peer) return "QP " + qp_text(qpn_) + " has no peer QP " + qp_text(*peer);
  if (found.empty()) return "no RoCE packet to or from QP " + qp_text(qpn_);
  return "QP " + qp_text(qpn_) + " talks to several peers (" + peers + "): choose one with --peer QPN";
}

}  // namespace softrdma::dump
