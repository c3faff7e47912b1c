#include "tools/softrdma/roce_describe.hpp"

#include <arpa/inet.h>

#include <cstdio>
#include <type_traits>
#include <variant>

#include "tools/softrdma/frame_judge.hpp"
#include "wire/cm_mad.hpp"

namespace softrdma::dump {
namespace {

using namespace wire;

std::string aeth_text(std::uint8_t syndrome) {
  static constexpr const char* nak_names[] = {"PSN_SEQUENCE_ERROR", "INVALID_REQUEST", "REMOTE_ACCESS_ERROR",
                                              "REMOTE_OPERATIONAL_ERROR", "INVALID_RD_REQUEST"};
  const std::uint8_t v = syndrome_value(syndrome);
  switch (ack_kind(syndrome)) {
    case AckKind::ack:
      return "ACK/credits:" + std::to_string(v);
    case AckKind::rnr_nak:
      return "RNR_NAK/timer:" + std::to_string(v);
    case AckKind::nak:
      return v < 5 ? std::string("NAK/") + nak_names[v] : "NAK/reserved:" + std::to_string(v);
    case AckKind::reserved:
      break;
  }
  return "reserved:" + std::to_string(syndrome);
}

std::string hex_text(std::uint64_t v, int digits) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "0x%0*llx", digits, static_cast<unsigned long long>(v));
  return buf;
}

// The common MAD methods, IBTA vol. 1 s13.4.5; the R bit (0x80) marks a response.
std::string method_name(std::uint8_t method) {
  switch (method) {
    case 0x01:
      return "Get";
    case 0x02:
      return "Set";
    case 0x03:
      return "Send";
    case 0x05:
      return "Trap";
    case 0x06:
      return "Report";
    case 0x07:
      return "TrapRepress";
    case 0x81:
      return "GetResp";
    case 0x86:
      return "ReportResp";
    default:
      return hex_text(method, 2);
  }
}

// Annex A11: the port space is the IP protocol number.
std::string port_space_name(std::uint8_t ps) {
  switch (ps) {
    case 0x06:
      return "TCP";
    case 0x11:
      return "UDP";
    case 0x84:
      return "SCTP";
    default:
      return hex_text(ps, 2);
  }
}

void describe_service(std::uint64_t service_id, Record& r) {
  r.hex("svc", service_id, 16);
  if (const auto s = ip_cm_service(service_id))
    r.text("svc_ps", port_space_name(s->port_space)).number("svc_port", s->port);
}

std::string ip_cm_endpoint(const IpCmHeader& h, const Gid16& addr, std::uint16_t port) {
  if (h.ip_version == 4) {
    const auto v4 = ip_cm_ipv4(addr);
    return format_address(v4) + ":" + std::to_string(port);
  }
  return "[" + format_address(addr) + "]:" + std::to_string(port);
}

void describe_cm(const CmMad& mad, Record& r) {
  std::visit(
      [&r](const auto& m) {
        using M = std::decay_t<decltype(m)>;
        if constexpr (std::is_same_v<M, CmSidrReq> || std::is_same_v<M, CmSidrRep>) {
          r.hex("request_id", m.request_id, 8);
        } else {
          r.hex("lcid", m.local_comm_id, 8);
          if constexpr (!std::is_same_v<M, CmReq>) r.hex("rcid", m.remote_comm_id, 8);
        }
        if constexpr (std::is_same_v<M, CmReq>) {
          describe_service(m.service_id, r);
          r.hex("cm_qpn", m.local_qpn, 6).hex("cm_psn", m.starting_psn, 6);
          if (ip_cm_service(m.service_id)) {
            if (const auto h = parse_ip_cm_header(m.private_data)) {
              const auto port = ip_cm_service(m.service_id)->port;
              r.text("ipcm_src", ip_cm_endpoint(*h, h->source_ip, h->source_port));
              r.text("ipcm_dst", ip_cm_endpoint(*h, h->destination_ip, port));
            }
          }
        } else if constexpr (std::is_same_v<M, CmRep>) {
          r.hex("cm_qpn", m.local_qpn, 6).hex("cm_psn", m.starting_psn, 6);
        } else if constexpr (std::is_same_v<M, CmDreq>) {
          r.hex("cm_qpn", m.remote_qpn_eecn, 6);
        } else if constexpr (std::is_same_v<M, CmRej>) {
          static constexpr const char* rejected[] = {"REQ", "REP", "other", "reserved"};
          r.text("rejected", rejected[m.message_rejected & 3]).number("reason", m.reason);
          if (const auto n = rej_reason_name(m.reason); !n.empty()) r.text("reason_name", std::string(n));
        } else if constexpr (std::is_same_v<M, CmMra>) {
          static constexpr const char* mraed[] = {"REQ", "REP", "LAP", "reserved"};
          r.text("mraed", mraed[m.message_mraed & 3]).number("service_timeout", m.service_timeout);
        } else if constexpr (std::is_same_v<M, CmSidrReq>) {
          describe_service(m.service_id, r);
        } else if constexpr (std::is_same_v<M, CmSidrRep>) {
          describe_service(m.service_id, r);
          r.number("status", m.status).hex("cm_qpn", m.qpn, 6).hex("cm_qkey", m.qkey, 8);
        }
      },
      mad.message);
}

// A MAD's class, method and attribute; for the CM class (0x07) the message's identifiers
// too. Nothing for a payload that is not a whole MAD: judge_gmp() names that.
void describe_mad(std::span<const std::uint8_t> mad, Record& r) {
  if (mad.size() != kMadLength) return;
  const std::uint8_t* p = mad.data();
  const std::uint8_t cls = Mad::mgmt_class::get(p);
  const std::uint16_t attr = Mad::attribute_id::get(p);
  if (cls == kCmClass) {
    const std::string_view n = name(static_cast<CmAttr>(attr));
    r.text("cm", n.empty() ? hex_text(attr, 4) : std::string(n));
  } else {
    r.hex("mad_class", cls, 2).hex("mad_attr", attr, 4);
  }
  r.text("method", method_name(Mad::method::get(p))).hex("tid", Mad::transaction_id::get(p), 16);
  if (cls != kCmClass) return;
  if (const auto cm = parse_cm_mad(mad)) describe_cm(*cm, r);
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
    r.text("aeth", aeth_text(Aeth::syndrome::get(h)))
        .hex("syndrome", Aeth::syndrome::get(h), 2)
        .number("msn", Aeth::msn::get(h));
  if (const auto* h = p.ext(Ext::atomicacketh)) r.hex("orig", AtomicAckEth::original_data::get(h), 16);
  if (const auto* h = p.ext(Ext::immdt)) r.hex("imm", ImmDt::imm::get(h), 8);
  if (const auto* h = p.ext(Ext::ieth)) r.hex("ieth", Ieth::rkey::get(h), 8);

  r.number("len", p.payload().size());
  if (is_gmp(p)) describe_mad(p.payload(), r);
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
