#include "tools/softrdma/roce_describe.hpp"

#include <arpa/inet.h>

#include <cstdio>

namespace softrdma::dump {
namespace {

using namespace wire;

std::string aeth_text(std::uint8_t syndrome) {
  static constexpr const char* nak_names[] = {"PSN_SEQUENCE_ERROR", "INVALID_REQUEST", "REMOTE_ACCESS_ERROR",
                                              "REMOTE_OPERATIONAL_ERROR", "INVALID_RD_REQUEST"};
  const std::uint8_t v = syndrome_value(syndrome);
  switch (ack_kind(syndrome)) {
    case AckKind::ack: return "ACK/credits:" + std::to_string(v);
    case AckKind::rnr_nak: return "RNR_NAK/timer:" + std::to_string(v);
    case AckKind::nak: return v < 5 ? std::string("NAK/") + nak_names[v] : "NAK/reserved:" + std::to_string(v);
    case AckKind::reserved: break;
  }
  return "reserved:" + std::to_string(syndrome);
}

}  // namespace

std::string format_address(std::span<const std::uint8_t> addr) {
  char buf[INET6_ADDRSTRLEN] = {};
  inet_ntop(addr.size() == 4 ? AF_INET : AF_INET6, addr.data(), buf, sizeof buf);
  return buf;
}

void describe_roce(const RoceFrame& f, Record& r) {
  const std::uint8_t* n = f.network_header().data();
  switch (f.encapsulation()) {
    case Encapsulation::rocev1:
      r.text("encap", "rocev1");
      r.text("src", format_address({n + Grh::sgid_offset, 16}));
      r.text("dst", format_address({n + Grh::dgid_offset, 16}));
      break;
    case Encapsulation::rocev2_ipv4:
    case Encapsulation::rocev2_ipv6: {
      const bool v4 = f.encapsulation() == Encapsulation::rocev2_ipv4;
      const std::size_t len = v4 ? 4 : 16;
      const std::size_t src = v4 ? 12 : Ipv6::src_offset;
      r.text("encap", v4 ? "rocev2" : "rocev2-ipv6");
      r.text("src", format_address({n + src, len}));
      r.text("dst", format_address({n + src + len, len}));
      r.number("sport", Udp::src_port::get(f.udp_header().data()));
      break;
    }
  }

  const IbPacket& p = f.ib();
  const std::uint8_t* bth = p.bth();
  r.text("op", opcode_name(p.opcode()));
  r.hex("dqp", p.dest_qp(), 6);
  r.number("psn", p.psn());
  r.flag("ackreq", p.ack_req());
  r.flag("se", Bth::solicited_event::get(bth));
  r.flag("mig", Bth::mig_req::get(bth));
  r.flag("fecn", Bth::fecn::get(bth));
  r.flag("becn", Bth::becn::get(bth));
  r.hex("pkey", Bth::pkey::get(bth), 4);
  r.number("pad", p.pad_count());

  if (const auto* h = p.ext(Ext::rdeth)) r.hex("eecnxt", Rdeth::ee_context::get(h), 6);
  if (const auto* h = p.ext(Ext::deth)) r.hex("qkey", Deth::qkey::get(h), 8).hex("sqp", Deth::src_qp::get(h), 6);
  if (const auto* h = p.ext(Ext::xrceth)) r.hex("xrcsrq", Xrceth::xrc_srq::get(h), 6);
  if (const auto* h = p.ext(Ext::reth))
    r.hex("va", Reth::va::get(h), 16).hex("rkey", Reth::rkey::get(h), 8).number("dmalen", Reth::dma_length::get(h));
  if (const auto* h = p.ext(Ext::atomiceth))
    r.hex("va", AtomicEth::va::get(h), 16)
        .hex("rkey", AtomicEth::rkey::get(h), 8)
        .hex("swapadd", AtomicEth::swap_add::get(h), 16)
        .hex("compare", AtomicEth::compare::get(h), 16);
  if (const auto* h = p.ext(Ext::aeth))
    r.text("aeth", aeth_text(Aeth::syndrome::get(h))).hex("syndrome", Aeth::syndrome::get(h), 2).number("msn", Aeth::msn::get(h));
  if (const auto* h = p.ext(Ext::atomicacketh)) r.hex("orig", AtomicAckEth::original_data::get(h), 16);
  if (const auto* h = p.ext(Ext::immdt)) r.hex("imm", ImmDt::imm::get(h), 8);
  if (const auto* h = p.ext(Ext::ieth)) r.hex("ieth", Ieth::rkey::get(h), 8);

  r.number("len", p.payload().size());
  const std::uint32_t want = f.computed_icrc();
  if (want == p.icrc()) {
    r.text("icrc", "ok");
  } else {
    char buf[48];
    std::snprintf(buf, sizeof buf, "bad(wire:0x%08x,computed:0x%08x)", p.icrc(), want);
    r.text("icrc", buf);
  }
}

}  // namespace softrdma::dump
