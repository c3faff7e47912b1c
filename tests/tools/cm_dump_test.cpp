// `softrdma dump` on CM MADs (tools/softrdma/frame_judge.hpp, roce_describe.hpp): the rxe
// rping capture's five CM MADs are named with their identifiers and judged sound; copies of
// its REQ, altered and rebuilt with a correct ICRC (so only the MAD can be at fault), are
// refused with the error a receiver's GSI or CM would have, or named and let through.
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "emulator/net/pcap_file.hpp"
#include "tools/softrdma/frame_judge.hpp"
#include "tools/softrdma/roce_describe.hpp"
#include "wire/cm_mad.hpp"

namespace {

using softrdma::dump::FrameKind;
using softrdma::dump::judge_roce;
using softrdma::dump::Record;
using Bytes = std::vector<std::uint8_t>;

std::vector<Bytes> rping_frames() {
  std::string error;
  auto r = softrdma::net::PcapReader::open(std::string(SOFTRDMA_TEST_DATA) + "/rxe-rping.pcap", error);
  INFO(error);
  REQUIRE(r.has_value());
  std::vector<Bytes> out;
  while (auto p = r->next()) out.emplace_back(p->data.begin(), p->data.end());
  return out;
}

softrdma::dump::RoceJudgement judge(const Bytes& frame) {
  softrdma::net::CapturedPacket pkt;
  pkt.data = frame;
  pkt.original_length = static_cast<std::uint32_t>(frame.size());
  return judge_roce(pkt);
}

std::string describe(const Bytes& frame) {
  const auto j = judge(frame);
  REQUIRE(j.kind == FrameKind::roce);
  Record r;
  softrdma::dump::describe_roce(*j.frame, r);
  return r.to_text();
}

// `frame` rebuilt with its UD payload (the MAD) and DETH changed by `edit`, every length and
// the ICRC recomputed.
template <typename Edit>
Bytes rebuilt(const Bytes& frame, Edit edit) {
  const auto f = wire::RoceFrame::check(frame);
  REQUIRE(f.ok());
  wire::RoceFrameRepr repr = wire::RoceFrameRepr::parse(*f);
  Bytes mad(repr.ib.payload.begin(), repr.ib.payload.end());
  edit(mad, repr.ib);
  repr.ib.payload = mad;
  Bytes out(repr.buffer_len());
  repr.emit(out.data());
  REQUIRE(wire::RoceFrame::check(out)->icrc_ok());
  return out;
}

constexpr std::size_t kData = wire::Mad::length;  // the attribute's first byte in the MAD

}  // namespace

TEST_CASE("dump: rxe-rping's five CM MADs are named and judged sound", "[tools][dump][cm]") {
  const auto frames = rping_frames();
  REQUIRE(frames.size() == 41);
  std::vector<std::string> cm_lines;
  for (const Bytes& f : frames) {
    const auto j = judge(f);
    REQUIRE(j.kind == FrameKind::roce);
    CHECK(j.icrc_ok);
    CHECK(j.reemit_identical);
    const bool gmp = softrdma::dump::is_gmp(j.frame->ib());
    CHECK_FALSE(softrdma::dump::judge_gmp(j.frame->ib()).has_value());
    const std::string text = describe(f);
    CHECK((text.find(" cm=") != std::string::npos) == gmp);
    if (gmp) cm_lines.push_back(text);
  }
  REQUIRE(cm_lines.size() == 5);
  CHECK(cm_lines[0].find("qkey=0x80010000 sqp=0x000001 len=256 cm=REQ method=Send tid=0x000000022a462bca "
                         "lcid=0xca2b462a svc=0x0000000001061c06 svc_ps=TCP svc_port=7174 cm_qpn=0x00001c "
                         "cm_psn=0x5813ab ipcm_src=10.99.0.3:52554 ipcm_dst=10.99.0.2:7174 icrc=ok") !=
        std::string::npos);
  CHECK(cm_lines[1].find(" cm=REP method=Send tid=0x000000022a462bca lcid=0x0740e515 rcid=0xca2b462a "
                         "cm_qpn=0x00001e cm_psn=0xbeefdf icrc=ok") != std::string::npos);
  CHECK(cm_lines[2].find(" cm=RTU method=Send tid=0x000000022a462bca lcid=0xca2b462a rcid=0x0740e515 icrc=ok") !=
        std::string::npos);
  CHECK(cm_lines[3].find(" cm=DREQ method=Send tid=0x000000022a462bca lcid=0xca2b462a rcid=0x0740e515 "
                         "cm_qpn=0x00001e icrc=ok") != std::string::npos);
  CHECK(cm_lines[4].find(" cm=DREP method=Send tid=0x000000022a462bca lcid=0x0740e515 rcid=0xca2b462a icrc=ok") !=
        std::string::npos);
}

TEST_CASE("dump --check: a GMP the receiver would drop is malformed, with its error", "[tools][dump][cm]") {
  const Bytes req = rping_frames()[0];
  REQUIRE(judge(req).kind == FrameKind::roce);
  const auto malformed = [](const Bytes& frame) {
    const auto j = judge(frame);
    CHECK(j.kind == FrameKind::malformed);
    CHECK(j.claimed_opcode == 0x64);  // UD SEND only
    return j.error;
  };
  using wire::Error;
  using IbRepr = wire::IbRepr;
  const auto set_byte = [](std::size_t at, std::uint8_t v) { return [at, v](Bytes& m, IbRepr&) { m[at] = v; }; };

  // The GSI's own rules (ch. 13.5).
  CHECK(malformed(rebuilt(req, [](Bytes&, IbRepr& ib) { ib.qkey = 0x80010001; })) == Error::bad_qkey);
  CHECK(malformed(rebuilt(req, [](Bytes&, IbRepr& ib) { ib.src_qp = 2; })) == Error::bad_source_qp);
  CHECK(malformed(rebuilt(req, [](Bytes& m, IbRepr&) { m.resize(200); })) == Error::truncated);
  CHECK(malformed(rebuilt(req, [](Bytes& m, IbRepr&) { m.resize(260); })) == Error::bad_length);
  // The MAD header (s13.4.2) and the CM codec.
  CHECK(malformed(rebuilt(req, set_byte(0, 2))) == Error::bad_version);
  CHECK(malformed(rebuilt(req, set_byte(2, 1))) == Error::bad_version);
  CHECK(malformed(rebuilt(req, set_byte(17, 0x99))) == Error::unsupported_attribute);
  CHECK(malformed(rebuilt(req, set_byte(kData + 43, 0xA6))) == Error::invalid_field);  // service type 3, no XRC
  // Annex A11: the IP CM header of a REQ to an IP CM service ID.
  CHECK(malformed(rebuilt(req, set_byte(kData + 141, 0x50))) == Error::bad_version);  // IP version 5

  // Not malformed: a LAP (a CM attribute the codec leaves undecoded), a REQ to a service ID
  // outside annex A11 (its private data is the consumer's), and a MAD of another class.
  const Bytes lap = rebuilt(req, set_byte(17, 0x19));
  CHECK(judge(lap).kind == FrameKind::roce);
  CHECK(describe(lap).find(" len=256 cm=LAP method=Send tid=0x000000022a462bca icrc=ok") != std::string::npos);
  const Bytes other_service = rebuilt(req, [](Bytes& m, IbRepr&) {
    m[kData + 12] = 0x02;   // service ID 0x0000000002061c06
    m[kData + 141] = 0x50;  // and a private data that is no IP CM header
  });
  CHECK(judge(other_service).kind == FrameKind::roce);
  const std::string other_text = describe(other_service);
  CHECK(other_text.find(" svc=0x0000000002061c06 cm_qpn=0x00001c cm_psn=0x5813ab icrc=ok") != std::string::npos);
  const Bytes sa = rebuilt(req, [](Bytes& m, IbRepr&) {
    m[1] = 0x03;  // Subnet Administration
    m[2] = 2;
    m[3] = 0x01;  // Get
    m[17] = 0x35;
  });
  CHECK(judge(sa).kind == FrameKind::roce);
  CHECK(describe(sa).find(" len=256 mad_class=0x03 mad_attr=0x0035 method=Get tid=0x000000022a462bca icrc=ok") !=
        std::string::npos);
}

TEST_CASE("dump: REJ, MRA and SIDR messages show their own fields", "[tools][dump][cm]") {
  const Bytes req = rping_frames()[0];
  const auto as = [&](const wire::CmMessage& message) {
    return rebuilt(req, [&](Bytes& m, wire::IbRepr&) {
      wire::CmMad mad;
      mad.header.transaction_id = 7;
      mad.message = message;
      wire::emit_cm_mad(mad, std::span<std::uint8_t, wire::kMadLength>(m.data(), wire::kMadLength));
    });
  };
  wire::CmRej rej;
  rej.local_comm_id = 0x11;
  rej.remote_comm_id = 0x22;
  rej.message_rejected = 1;
  rej.reason = 28;
  CHECK(describe(as(rej)).find(" cm=REJ method=Send tid=0x0000000000000007 lcid=0x00000011 rcid=0x00000022 "
                               "rejected=REP reason=28 reason_name=CONSUMER_REJECT icrc=ok") != std::string::npos);
  rej.reason = 99;  // not in table 103: the number alone
  CHECK(describe(as(rej)).find(" rejected=REP reason=99 icrc=ok") != std::string::npos);
  CHECK(describe(as(wire::CmMra{0x11, 0x22, 2, 17, {}}))
            .find(" cm=MRA method=Send tid=0x0000000000000007 lcid=0x00000011 "
                  "rcid=0x00000022 mraed=LAP service_timeout=17 icrc=ok") != std::string::npos);
  CHECK(describe(as(wire::CmSidrReq{0x33, 0xFFFF, wire::ip_cm_service_id(0x11, 4791), {}}))
            .find(" cm=SIDR_REQ method=Send tid=0x0000000000000007 request_id=0x00000033 svc=0x00000000011112b7 "
                  "svc_ps=UDP svc_port=4791 icrc=ok") != std::string::npos);
  wire::CmSidrRep rep;
  rep.request_id = 0x33;
  rep.qpn = 0x45;
  rep.qkey = 0x1234;
  rep.service_id = wire::ip_cm_service_id(0x11, 4791);
  CHECK(describe(as(rep)).find(" cm=SIDR_REP method=Send tid=0x0000000000000007 request_id=0x00000033 "
                               "svc=0x00000000011112b7 svc_ps=UDP svc_port=4791 status=0 cm_qpn=0x000045 "
                               "cm_qkey=0x00001234 icrc=ok") != std::string::npos);
}
