// A whole RoCE Ethernet frame: RoCEv2 (IPv4 or IPv6, UDP port 4791; IBTA vol. 1 annex A17)
// or RoCEv1 (ethertype 0x8915 and a GRH; annex A16).
//
// RoceFrame::check() finds and validates every layer of untrusted bytes and computes the
// ICRC verdict. RoceFrameRepr builds frames: lengths, the IPv4 header checksum, the UDP
// checksum (IPv6, or IPv4 when asked) and the ICRC are all computed by emit().
#pragma once

#include <cstdint>
#include <span>
#include <variant>

#include "wire/error.hpp"
#include "wire/ethernet.hpp"
#include "wire/ib_packet.hpp"
#include "wire/icrc.hpp"
#include "wire/ipv4.hpp"
#include "wire/ipv6.hpp"
#include "wire/udp.hpp"

namespace wire {

enum class Encapsulation : std::uint8_t { rocev1, rocev2_ipv4, rocev2_ipv6 };

// The layers of a RoCE frame down to the start of the BTH, found and length-checked but with
// the IB part not yet judged.
struct RoceLayers {
  EthernetView ethernet;
  Encapsulation encapsulation;
  std::span<const std::uint8_t> network;  // IPv4 header, IPv6 fixed header or GRH
  std::span<const std::uint8_t> udp;      // empty for RoCEv1
  std::span<const std::uint8_t> ib;       // BTH through ICRC

  static Result<RoceLayers> locate(std::span<const std::uint8_t> frame);
};

class RoceFrame {
 public:
  // RoceLayers::locate() and then IbPacket::check() on what it found.
  static Result<RoceFrame> check(std::span<const std::uint8_t> frame);

  Encapsulation encapsulation() const { return encap_; }
  const EthernetView& ethernet() const { return eth_; }
  // The IPv4 header, the IPv6 fixed header or the GRH.
  std::span<const std::uint8_t> network_header() const { return network_; }
  // The UDP header (8 bytes); empty for RoCEv1.
  std::span<const std::uint8_t> udp_header() const { return udp_; }
  const IbPacket& ib() const { return ib_; }

  std::uint32_t computed_icrc() const;
  bool icrc_ok() const { return computed_icrc() == ib_.icrc(); }

 private:
  RoceFrame(EthernetView e, Encapsulation c, std::span<const std::uint8_t> n, std::span<const std::uint8_t> u,
            IbPacket i)
      : eth_(e), encap_(c), network_(n), udp_(u), ib_(i) {}
  EthernetView eth_;
  Encapsulation encap_;
  std::span<const std::uint8_t> network_;
  std::span<const std::uint8_t> udp_;
  IbPacket ib_;
};

// The GRH of RoCEv1, as values. Its payload length is derived on emit.
struct GrhRepr {
  std::uint8_t traffic_class = 0;
  std::uint32_t flow_label = 0;
  std::uint8_t hop_limit = 64;
  Ipv6Address sgid{};
  Ipv6Address dgid{};
  bool operator==(const GrhRepr&) const = default;
};

struct RoceFrameRepr {
  EthernetRepr ethernet;
  std::variant<Ipv4Repr, Ipv6Repr, GrhRepr> network = Ipv4Repr{};
  std::uint16_t src_port = 0xC000;
  std::uint16_t dst_port = kRoceV2Port;
  // IPv4 may send a zero UDP checksum, as Linux rxe does; IPv6 requires one (RFC 8200
  // s8.1), so `zero` is only honoured over IPv4. `verbatim` writes `udp_checksum_value` as
  // it is: captures taken on a sending host hold partial checksums (offload artefacts), and
  // rebuilding such a frame byte-exactly needs them.
  enum class UdpChecksum : std::uint8_t { zero, computed, verbatim };
  UdpChecksum udp_checksum = UdpChecksum::zero;
  std::uint16_t udp_checksum_value = 0;
  IbRepr ib;

  Encapsulation encapsulation() const {
    return static_cast<Encapsulation>(network.index() == 2 ? 0 : network.index() + 1);
  }
  std::size_t buffer_len() const;
  // Writes buffer_len() bytes, every length and checksum computed; returns that length.
  std::size_t emit(std::uint8_t* out) const;

  static RoceFrameRepr parse(const RoceFrame& f);
};

}  // namespace wire
