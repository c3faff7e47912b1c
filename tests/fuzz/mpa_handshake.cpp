// Fuzzes the MPA exchange (core::MpaHandshake) on the bytes a peer sends, in chunks. Header:
//   0: bit 0 we initiate (else we respond), bit 1 accept a Request (else reject it)
//   1..4: chunk sizes (each + 1), used in turn
// then the peer's bytes. Checks that the exchange never takes more than it is given, that
// every frame it writes parses as a frame of its own kind, and that a failure has a reason.
#include "emulator/core/mpa_handshake.hpp"

#include <algorithm>
#include <cstdint>
#include <cstdlib>

namespace {

namespace core = softrdma::core;
using State = core::MpaHandshake::State;

void check_output(core::MpaHandshake& h, wire::iwarp::MpaFrameKind kind) {
  const std::vector<std::uint8_t> out = h.take_output();
  if (out.empty()) return;
  const auto frame = wire::iwarp::MpaRequestReply::parse(out);
  if (!frame || frame->kind != kind || frame->length() != out.size()) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  constexpr std::size_t header = 5;
  if (size < header) return 0;
  const bool initiate = data[0] & 1, accept = data[0] & 2;
  core::MpaOffer offer;
  offer.private_data = {0xAB, 0xCD};
  core::MpaHandshake h = initiate ? core::MpaHandshake::initiate(offer) : core::MpaHandshake::respond();
  const auto ours = initiate ? wire::iwarp::MpaFrameKind::request : wire::iwarp::MpaFrameKind::reply;
  check_output(h, ours);
  std::span<const std::uint8_t> stream(data + header, size - header);
  for (std::size_t turn = 0; !stream.empty(); ++turn) {
    const std::size_t chunk = std::min<std::size_t>(stream.size(), data[1 + turn % 4] + 1u);
    const std::size_t used = h.receive(stream.first(chunk));
    if (used > chunk) std::abort();
    stream = stream.subspan(used == 0 ? chunk : used);
    if (h.state() == State::request_received) accept ? h.accept(offer) : h.reject(offer.private_data);
    if (h.state() == State::failed && h.failure().empty()) std::abort();
    check_output(h, wire::iwarp::MpaFrameKind::reply);  // only a responder writes after its first frame
    if (h.state() == State::established) h.settled(1460);
  }
  return 0;
}
