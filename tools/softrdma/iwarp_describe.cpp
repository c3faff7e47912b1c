#include "tools/softrdma/iwarp_describe.hpp"

#include <cctype>
#include <cstdio>

namespace softrdma::dump {

using namespace wire::iwarp;

void describe_iwarp(const IwarpCaptureFrame& f, Record& r) {
  const MpaStreamItem& it = f.item;
  r.text("encap", "iwarp")
      .text("src", to_string(f.source))
      .text("dst", to_string(f.destination))
      .number("stream", f.tcp_stream);
  switch (it.kind) {
    case MpaItemKind::request:
    case MpaItemKind::reply: {
      const MpaRequestReply& m = it.frame;
      r.text("op", it.kind == MpaItemKind::request ? "MPA_REQUEST" : "MPA_REPLY").number("rev", m.revision);
      r.flag("markers", m.markers).flag("crc", m.crc).flag("reject", m.reject);
      if (m.enhanced) {
        r.number("ird", m.enhanced->ird).number("ord", m.enhanced->ord).flag("p2p", m.enhanced->peer_to_peer);
        r.flag("send_rtr", m.enhanced->send_rtr)
            .flag("write_rtr", m.enhanced->write_rtr)
            .flag("read_rtr", m.enhanced->read_rtr);
      }
      r.number("pdlen", m.pd_length());
      return;
    }
    case MpaItemKind::error:
      r.text("kind", "malformed").text("error", std::string(wire::name(it.error)));
      return;
    case MpaItemKind::fpdu:
      break;
  }
  const MpaFpduInfo& p = it.fpdu;
  const RdmapMessage& m = p.message;
  std::string op(m.info().name);
  for (char& c : op) c = c == ' ' ? '_' : static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  r.text("op", op).flag("last", m.ddp.last);
  if (m.ddp.tagged) {
    r.hex("stag", m.ddp.stag, 8).hex("to", m.ddp.tagged_offset, 16);
  } else {
    r.number("qn", m.ddp.queue_number).number("msn", m.ddp.message_sequence_number).number("mo", m.ddp.message_offset);
  }
  if (m.info().invalidates) r.hex("inval_stag", m.invalidate_stag, 8);
  if (m.opcode == RdmapOpcode::read_request) {
    const RdmapReadRequest& q = m.read_request;
    r.hex("sink_stag", q.sink_stag, 8).hex("sink_to", q.sink_tagged_offset, 16).number("size", q.size);
    r.hex("src_stag", q.source_stag, 8).hex("src_to", q.source_tagged_offset, 16);
  }
  if (m.opcode == RdmapOpcode::terminate) {
    const RdmapTerminate& t = m.terminate;
    r.number("layer", t.layer).number("etype", t.error_type).hex("ecode", t.error_code, 2);
    if (t.siw_bit_order) r.text("control", "siw_bit_order");
  }
  r.number("len", p.payload_length).number("ulpdu", p.ulpdu_length);
  if (p.markers) r.number("markers", p.markers);
  if (!p.crc_checked) {
    r.text("mpa_crc", "off");
  } else if (p.crc_ok) {
    r.text("mpa_crc", "ok");
  } else {
    char buf[48];
    std::snprintf(buf, sizeof buf, "bad(wire:0x%08x,computed:0x%08x)", p.crc_received, p.crc_computed);
    r.text("mpa_crc", buf);
  }
}

}  // namespace softrdma::dump
