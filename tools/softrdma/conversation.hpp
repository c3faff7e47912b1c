// Which packets of a capture belong to one QP's conversation, for `softrdma dump --follow`.
// A QP is named by its address and QPN. The peer is found from the traffic: for UD the DETH
// source QP (IBTA vol. 1 s9.3.3) of what the followed QP receives, or the destination of what
// it sends (DETH source QP = the followed QPN); for RC/UC, the destination QP of the packets
// going from the followed QP's address back to the address that sent to it; when that address
// has several QPs talking to the sender, the one whose responses carry the PSNs of the
// followed QP's requests (or the other way round).
// When both ends have the same QPN (each device's first QP, say), the followed one is the end
// that sent the conversation's first packet.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <variant>
#include <vector>

#include "tools/softrdma/follow.hpp"
#include "wire/roce_frame.hpp"

namespace softrdma::dump {

struct QpEndpoint {
  std::vector<std::uint8_t> address;  // 4 bytes IPv4, 16 bytes IPv6 or a RoCEv1 GID
  std::uint32_t qpn = 0;
  auto operator<=>(const QpEndpoint&) const = default;
};

struct Conversation {
  QpEndpoint followed;
  QpEndpoint peer;
  bool peer_qpn_known = true;  // false: the capture holds nothing the followed QP's side sent to the peer
  bool ud = false;
  std::string peer_text() const;  // "127.0.0.2 QP 0x000012", "127.0.0.2 QP ?"
  // Which way `f` travels in this conversation; nothing when it belongs to another.
  std::optional<Direction> direction_of(const wire::RoceFrame& f) const;
};

class ConversationFinder {
 public:
  explicit ConversationFinder(std::uint32_t qpn) : qpn_(qpn) {}
  void add(const wire::RoceFrame& f);
  // The conversation of the followed QP (with peer QPN `peer` when given); or one line saying
  // why there is none: no packet to or from the QP, no such peer, or several peers to choose from.
  std::variant<Conversation, std::string> result(std::optional<std::uint32_t> peer) const;

 private:
  struct Flow {  // packets from `src` to `dst` QP `dqp`; UD ones name their source QP
    std::vector<std::uint8_t> src, dst;
    std::uint32_t dqp;
    std::optional<std::uint32_t> sqp;
    auto operator<=>(const Flow&) const = default;
  };
  struct Psns {  // the first PSNs a flow's requests and responses carried
    std::set<std::uint32_t> requests, responses;
  };
  // Whether `back` answers `to`'s requests or is answered by `to`: an ACK or response PSN of
  // one is a request PSN of the other (s9.7.1: responses carry their request's PSN).
  bool answers(const Flow& back, const Flow& to) const;

  std::uint32_t qpn_;
  std::vector<Flow> flows_;  // every distinct one of the capture, in the order first seen
  std::map<Flow, Psns> psns_;
};

}  // namespace softrdma::dump
