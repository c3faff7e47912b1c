#include "wire/ib_packet.hpp"

#include <algorithm>
#include <cstring>
#include <tuple>

#include "wire/icrc.hpp"

namespace wire {

Result<IbPacket> IbPacket::check(std::span<const std::uint8_t> bytes) {
  if (bytes.size() < Bth::length + kIcrcLength) return Error::truncated;
  const OpcodeInfo& oi = wire::info(wire::opcode(Bth::opcode::get(bytes.data())));
  if (!oi.valid) return Error::unknown_opcode;
  if (Bth::tver::get(bytes.data()) != 0) return Error::bad_version;
  if (bytes.size() < oi.header_length + kIcrcLength) return Error::truncated;
  const std::size_t payload_with_pad = bytes.size() - oi.header_length - kIcrcLength;
  const std::size_t pad = Bth::pad_count::get(bytes.data());
  if (!oi.is(OpFlag::payload) && payload_with_pad != 0) return Error::bad_length;
  if (pad > payload_with_pad) return Error::bad_pad_count;
  if (payload_with_pad - pad > kMaxPayload) return Error::oversized;
  if (payload_with_pad % 4 != 0) return Error::bad_length;
  return IbPacket(bytes, payload_with_pad);
}

std::uint32_t IbPacket::icrc() const { return load_icrc(bytes_.data() + bytes_.size() - kIcrcLength); }

IbRepr IbRepr::parse(const IbPacket& p) {
  IbRepr r;
  const std::uint8_t* b = p.bth();
  r.opcode = p.opcode();
  r.solicited_event = Bth::solicited_event::get(b);
  r.mig_req = Bth::mig_req::get(b);
  r.pkey = Bth::pkey::get(b);
  r.fecn = Bth::fecn::get(b);
  r.becn = Bth::becn::get(b);
  r.resv6 = Bth::resv6::get(b);
  r.dest_qp = Bth::dest_qp::get(b);
  r.ack_req = Bth::ack_req::get(b);
  r.resv7 = Bth::resv7::get(b);
  r.psn = Bth::psn::get(b);
  if (const std::uint8_t* h = p.ext(Ext::rdeth)) {
    r.reserved_rdeth = Rdeth::reserved::get(h);
    r.ee_context = Rdeth::ee_context::get(h);
  }
  if (const std::uint8_t* h = p.ext(Ext::deth)) {
    r.qkey = Deth::qkey::get(h);
    r.reserved_deth = Deth::reserved::get(h);
    r.src_qp = Deth::src_qp::get(h);
  }
  if (const std::uint8_t* h = p.ext(Ext::xrceth)) {
    r.reserved_xrceth = Xrceth::reserved::get(h);
    r.xrc_srq = Xrceth::xrc_srq::get(h);
  }
  if (const std::uint8_t* h = p.ext(Ext::reth)) {
    r.va = Reth::va::get(h);
    r.rkey = Reth::rkey::get(h);
    r.dma_length = Reth::dma_length::get(h);
  }
  if (const std::uint8_t* h = p.ext(Ext::atomiceth)) {
    r.va = AtomicEth::va::get(h);
    r.rkey = AtomicEth::rkey::get(h);
    r.swap_add = AtomicEth::swap_add::get(h);
    r.compare = AtomicEth::compare::get(h);
  }
  if (const std::uint8_t* h = p.ext(Ext::aeth)) {
    r.syndrome = Aeth::syndrome::get(h);
    r.msn = Aeth::msn::get(h);
  }
  if (const std::uint8_t* h = p.ext(Ext::atomicacketh)) r.original_data = AtomicAckEth::original_data::get(h);
  if (const std::uint8_t* h = p.ext(Ext::immdt)) r.imm = ImmDt::imm::get(h);
  if (const std::uint8_t* h = p.ext(Ext::ieth)) r.invalidate_rkey = Ieth::rkey::get(h);
  if (const std::uint8_t* h = p.ext(Ext::cnp)) std::copy_n(h, CnpReserved::length, r.cnp_reserved.begin());
  r.payload = p.payload();
  return r;
}

std::size_t IbRepr::emit(std::uint8_t* out) const {
  std::uint8_t* p = out + emit_headers(out, payload.size());
  if (!payload.empty()) std::memcpy(p, payload.data(), payload.size());
  p += payload.size();
  std::memset(p, 0, pad_count() + kIcrcLength);  // pad bytes are zero (IBTA vol. 1 s9.2.4)
  return buffer_len();
}

std::size_t IbRepr::emit_headers(std::uint8_t* out, std::size_t payload_length) const {
  const OpcodeInfo& oi = info(opcode);
  std::uint8_t* b = out;
  Bth::opcode::set(b, value(opcode));
  b[1] = 0;  // SE, M, pad count and TVer (0) are all set below
  Bth::solicited_event::set(b, solicited_event);
  Bth::mig_req::set(b, mig_req);
  Bth::pad_count::set(b, pad_for(payload_length));
  Bth::pkey::set(b, pkey);
  Bth::variant_byte::set(b, 0);
  Bth::fecn::set(b, fecn);
  Bth::becn::set(b, becn);
  Bth::resv6::set(b, resv6);
  Bth::dest_qp::set(b, dest_qp);
  Bth::ack_req::set(b, ack_req);
  Bth::resv7::set(b, resv7);
  Bth::psn::set(b, psn);
  const auto at = [&](Ext e) { return out + oi.offset[static_cast<std::size_t>(e)]; };
  if (oi.has(Ext::rdeth)) {
    Rdeth::reserved::set(at(Ext::rdeth), reserved_rdeth);
    Rdeth::ee_context::set(at(Ext::rdeth), ee_context);
  }
  if (oi.has(Ext::deth)) {
    Deth::qkey::set(at(Ext::deth), qkey);
    Deth::reserved::set(at(Ext::deth), reserved_deth);
    Deth::src_qp::set(at(Ext::deth), src_qp);
  }
  if (oi.has(Ext::xrceth)) {
    Xrceth::reserved::set(at(Ext::xrceth), reserved_xrceth);
    Xrceth::xrc_srq::set(at(Ext::xrceth), xrc_srq);
  }
  if (oi.has(Ext::reth)) {
    Reth::va::set(at(Ext::reth), va);
    Reth::rkey::set(at(Ext::reth), rkey);
    Reth::dma_length::set(at(Ext::reth), dma_length);
  }
  if (oi.has(Ext::atomiceth)) {
    AtomicEth::va::set(at(Ext::atomiceth), va);
    AtomicEth::rkey::set(at(Ext::atomiceth), rkey);
    AtomicEth::swap_add::set(at(Ext::atomiceth), swap_add);
    AtomicEth::compare::set(at(Ext::atomiceth), compare);
  }
  if (oi.has(Ext::aeth)) {
    Aeth::syndrome::set(at(Ext::aeth), syndrome);
    Aeth::msn::set(at(Ext::aeth), msn);
  }
  if (oi.has(Ext::atomicacketh)) AtomicAckEth::original_data::set(at(Ext::atomicacketh), original_data);
  if (oi.has(Ext::immdt)) ImmDt::imm::set(at(Ext::immdt), imm);
  if (oi.has(Ext::ieth)) Ieth::rkey::set(at(Ext::ieth), invalidate_rkey);
  if (oi.has(Ext::cnp)) std::copy(cnp_reserved.begin(), cnp_reserved.end(), at(Ext::cnp));
  return oi.header_length;
}

bool IbRepr::operator==(const IbRepr& o) const {
  const auto headers = [](const IbRepr& r) {
    return std::tie(r.opcode, r.solicited_event, r.mig_req, r.pkey, r.fecn, r.becn, r.resv6, r.dest_qp, r.ack_req,
                    r.resv7, r.psn, r.ee_context, r.qkey, r.src_qp, r.xrc_srq, r.va, r.rkey, r.dma_length, r.swap_add,
                    r.compare, r.syndrome, r.msn, r.original_data, r.imm, r.invalidate_rkey, r.reserved_rdeth,
                    r.reserved_deth, r.reserved_xrceth, r.cnp_reserved);
  };
  return headers(*this) == headers(o) && std::equal(payload.begin(), payload.end(), o.payload.begin(), o.payload.end());
}

}  // namespace wire
