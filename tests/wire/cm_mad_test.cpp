// CM MADs (IBTA vol. 1 ch. 12.6, 12.11, s13.4.2) and the IP CM header (annex A11): every CM
// MAD of the rxe captures in tests/data, with the values tshark shows, rebuilt byte-exactly;
// golden bytes for the messages no capture holds (MRA, SIDR_REQ, SIDR_REP; the tshark here
// does not dissect them); every refusal with its named error; and each of the nine messages
// built in code, round-tripped.
#include "wire/cm_mad.hpp"

#include <algorithm>
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "tests/wire/data_frames.hpp"
#include "wire/ipv6.hpp"
#include "wire/roce_frame.hpp"

using namespace wire;
using test::read_frames;
using Mad256 = std::array<std::uint8_t, kMadLength>;

namespace {

// The CM MADs of a capture: the UD payloads of packets to QP1, with their frame numbers.
struct CapturedMad {
  std::size_t frame;  // 1-based, as tshark numbers frames
  std::vector<std::uint8_t> bytes;
};

std::vector<CapturedMad> captured_mads(const std::string& name) {
  std::vector<CapturedMad> out;
  const auto frames = read_frames(name);
  for (std::size_t i = 0; i < frames.size(); ++i) {
    const auto f = RoceFrame::check(frames[i]);
    REQUIRE(f.ok());
    if (transport_of(f->ib().opcode()) != Transport::ud || f->ib().dest_qp() != kGsiQpn) continue;
    const auto payload = f->ib().payload();
    out.push_back({i + 1, {payload.begin(), payload.end()}});
  }
  return out;
}

Mad256 emit(const CmMad& m) {
  Mad256 out;
  out.fill(0xA5);  // poisoned: a byte emit forgets shows up
  emit_cm_mad(m, out);
  return out;
}

std::vector<std::uint8_t> as_vector(const Mad256& a) { return {a.begin(), a.end()}; }

template <typename M>
const M& message(const CmMad& m) {
  REQUIRE(std::holds_alternative<M>(m.message));
  return std::get<M>(m.message);
}

template <std::size_t N>
bool all_zero(const std::array<std::uint8_t, N>& a, std::size_t from = 0) {
  return std::all_of(a.begin() + static_cast<std::ptrdiff_t>(from), a.end(), [](std::uint8_t b) { return b == 0; });
}

Error error_of(std::span<const std::uint8_t> bytes) {
  const auto m = parse_cm_mad(bytes);
  REQUIRE_FALSE(m.ok());
  return m.error();
}

// A MAD of attribute `attr` with the CM header rxe sends (Send, transaction ID 0x42) and the
// given bytes placed at offsets of the MAD data.
Mad256 golden(std::uint16_t attr, std::initializer_list<std::pair<std::size_t, std::vector<std::uint8_t>>> data) {
  Mad256 m{};
  const std::uint8_t header[24] = {1,
                                   7,
                                   2,
                                   3,
                                   0,
                                   0,
                                   0,
                                   0,
                                   0,
                                   0,
                                   0,
                                   0,
                                   0,
                                   0,
                                   0,
                                   0x42,
                                   static_cast<std::uint8_t>(attr >> 8),
                                   static_cast<std::uint8_t>(attr),
                                   0,
                                   0,
                                   0,
                                   0,
                                   0,
                                   0};
  std::copy(std::begin(header), std::end(header), m.begin());
  for (const auto& [offset, bytes] : data)
    std::copy(bytes.begin(), bytes.end(), m.begin() + 24 + static_cast<std::ptrdiff_t>(offset));
  return m;
}

std::array<std::uint8_t, 16> counting16(std::uint8_t first) {
  std::array<std::uint8_t, 16> a{};
  for (std::size_t i = 0; i < a.size(); ++i) a[i] = static_cast<std::uint8_t>(first + i);
  return a;
}

template <std::size_t N>
std::array<std::uint8_t, N> counting(std::uint8_t first) {
  std::array<std::uint8_t, N> a{};
  for (std::size_t i = 0; i < N; ++i) a[i] = static_cast<std::uint8_t>(first + i);
  return a;
}

}  // namespace

TEST_CASE("rxe-rping: the five CM MADs carry what tshark shows and rebuild byte-exactly", "[wire][cm][golden]") {
  const auto mads = captured_mads("rxe-rping.pcap");
  REQUIRE(mads.size() == 5);
  std::vector<CmMad> parsed;
  for (const auto& m : mads) {
    INFO("frame " << m.frame);
    const auto p = parse_cm_mad(m.bytes);
    REQUIRE(p.ok());
    CHECK(as_vector(emit(*p)) == m.bytes);
    parsed.push_back(*p);
  }
  CHECK(mads[0].frame == 1);
  CHECK(mads[3].frame == 40);

  // Every one: Send, transaction ID 0x000000022a462bca, attribute modifier 0.
  for (const CmMad& m : parsed) {
    CHECK(m.header.base_version == 1);
    CHECK(m.header.mgmt_class == kCmClass);
    CHECK(m.header.class_version == 2);
    CHECK(m.header.method == static_cast<std::uint8_t>(MadMethod::send));
    CHECK(m.header.status == 0);
    CHECK(m.header.class_specific == 0);
    CHECK(m.header.transaction_id == 0x000000022a462bcaull);
    CHECK(m.header.attribute_modifier == 0);
    CHECK(m.header.attribute_id == static_cast<std::uint16_t>(attribute_of(m.message)));
  }

  // Frame 1: ConnectRequest.
  const CmReq& req = message<CmReq>(parsed[0]);
  CHECK(parsed[0].header.attribute_id == 0x0010);
  CHECK(name(attribute_of(parsed[0].message)) == "REQ");
  CHECK(req.local_comm_id == 0xca2b462au);
  CHECK(req.service_id == 0x0000000001061c06ull);
  const auto svc = ip_cm_service(req.service_id);
  REQUIRE(svc.has_value());
  CHECK(svc->port_space == 0x06);
  CHECK(svc->port == 0x1c06);
  CHECK(svc->port == 7174);
  CHECK(req.local_ca_guid == 0x505400fffe990003ull);
  CHECK(req.local_qkey == 0);
  CHECK(req.local_qpn == 0x1c);
  CHECK(req.responder_resources == 1);
  CHECK(req.local_eecn == 0);
  CHECK(req.initiator_depth == 1);
  CHECK(req.remote_eecn == 0);
  CHECK(req.remote_cm_response_timeout == 20);
  CHECK(req.transport_service_type == 0);
  CHECK_FALSE(req.end_to_end_flow_control);
  CHECK(req.starting_psn == 0x5813ab);
  CHECK(req.local_cm_response_timeout == 20);
  CHECK(req.retry_count == 7);
  CHECK(req.pkey == 0xffff);
  CHECK(req.path_mtu == 3);
  CHECK_FALSE(req.rdc_exists);
  CHECK(req.rnr_retry_count == 7);
  CHECK(req.max_cm_retries == 15);
  CHECK_FALSE(req.srq);
  CHECK(req.extended_transport == 0);
  CHECK(req.primary.local_lid == 0xffff);
  CHECK(req.primary.remote_lid == 0xffff);
  CHECK(req.primary.local_gid == ipv4_mapped({10, 99, 0, 3}));
  CHECK(req.primary.remote_gid == ipv4_mapped({10, 99, 0, 2}));
  // The 32-bit word at REQ byte 88 is 8f 7f c0 00: flow label 0x8f7fc (its top 20 bits),
  // reserved 0, packet rate 0 (s12.6.5). tshark 4.x shows "0x008f7", reserved 2 and rate 0x0f:
  // it reads the word as 3 bytes under a 32-bit mask, and the rate from the word's first byte.
  CHECK(req.primary.flow_label == 0x8f7fc);
  CHECK(req.primary.packet_rate == 0);
  CHECK(req.primary.traffic_class == 0);
  CHECK(req.primary.hop_limit == 64);
  CHECK(req.primary.sl == 0);
  CHECK_FALSE(req.primary.subnet_local);
  CHECK(req.primary.local_ack_timeout == 0x11);
  CHECK(req.alternate == CmPath{0, 0, {}, {}, 0, 0, 0, 0, 0, false, 0});

  const auto ip = parse_ip_cm_header(req.private_data);
  REQUIRE(ip.ok());
  CHECK(ip->major_version == 0);
  CHECK(ip->minor_version == 0);
  CHECK(ip->ip_version == 4);
  CHECK(ip->source_port == 0xcd4a);
  CHECK(ip->source_ip == ip_cm_address({10, 99, 0, 3}));
  CHECK(ip->destination_ip == ip_cm_address({10, 99, 0, 2}));
  CHECK(ip_cm_ipv4(ip->source_ip) == std::array<std::uint8_t, 4>{10, 99, 0, 3});
  CHECK(all_zero(req.private_data, kIpCmHeaderLength));  // rping sends no private data of its own
  std::array<std::uint8_t, 92> rebuilt{};
  emit_ip_cm_header(*ip, rebuilt);
  CHECK(rebuilt == req.private_data);

  // Frame 2: ConnectReply.
  const CmRep& rep = message<CmRep>(parsed[1]);
  CHECK(name(attribute_of(parsed[1].message)) == "REP");
  CHECK(rep.local_comm_id == 0x0740e515u);
  CHECK(rep.remote_comm_id == 0xca2b462au);
  CHECK(rep.local_qkey == 0);
  CHECK(rep.local_qpn == 0x1e);
  CHECK(rep.local_eecn == 0);
  CHECK(rep.starting_psn == 0xbeefdf);
  CHECK(rep.responder_resources == 1);
  CHECK(rep.initiator_depth == 1);
  CHECK(rep.target_ack_delay == 0x0f);
  CHECK(rep.failover_accepted == 0);
  CHECK_FALSE(rep.end_to_end_flow_control);
  CHECK(rep.rnr_retry_count == 7);
  CHECK_FALSE(rep.srq);
  CHECK(rep.local_ca_guid == 0x505400fffe990002ull);
  CHECK(all_zero(rep.private_data));

  // Frame 3: ReadyToUse; frame 40: DisconnectRequest; frame 41: DisconnectReply.
  const CmRtu& rtu = message<CmRtu>(parsed[2]);
  CHECK(rtu.local_comm_id == 0xca2b462au);
  CHECK(rtu.remote_comm_id == 0x0740e515u);
  const CmDreq& dreq = message<CmDreq>(parsed[3]);
  CHECK(dreq.local_comm_id == 0xca2b462au);
  CHECK(dreq.remote_comm_id == 0x0740e515u);
  CHECK(dreq.remote_qpn_eecn == 0x1e);
  const CmDrep& drep = message<CmDrep>(parsed[4]);
  CHECK(drep.local_comm_id == 0x0740e515u);
  CHECK(drep.remote_comm_id == 0xca2b462au);
  CHECK(name(attribute_of(parsed[2].message)) == "RTU");
  CHECK(name(attribute_of(parsed[3].message)) == "DREQ");
  CHECK(name(attribute_of(parsed[4].message)) == "DREP");
}

TEST_CASE("host-probe: two REQs and the REJ (invalid service ID) that answers them", "[wire][cm][golden]") {
  const auto mads = captured_mads("host-probe.pcap");
  REQUIRE(mads.size() == 3);
  for (const auto& m : mads) {
    INFO("frame " << m.frame);
    const auto p = parse_cm_mad(m.bytes);
    REQUIRE(p.ok());
    CHECK(as_vector(emit(*p)) == m.bytes);
    CHECK(p->header.transaction_id == 0x000000022a462bcbull);
  }
  for (std::size_t i : {0, 1}) {
    const CmMad m = *parse_cm_mad(mads[i].bytes);
    const CmReq& req = message<CmReq>(m);
    CHECK(req.local_comm_id == 0xcb2b462au);
    CHECK(req.service_id == 0x0000000001061d2full);
    CHECK(ip_cm_service(req.service_id) == IpCmService{0x06, 0x1d2f});
    CHECK(req.local_qpn == 0x1b);
    CHECK(req.responder_resources == 4);
    CHECK(req.initiator_depth == 4);
    CHECK(req.starting_psn == 0x7635b8);
    CHECK(req.primary.flow_label == 0x64328);  // bytes 64 32 80 00; tshark shows 0x00643
    CHECK(req.primary.local_gid == ipv4_mapped({10, 99, 0, 3}));
    CHECK(req.primary.hop_limit == 64);
    CHECK(req.primary.local_ack_timeout == 0x11);
    const auto ip = parse_ip_cm_header(req.private_data);
    REQUIRE(ip.ok());
    CHECK(ip->source_port == 0xb6e7);
    CHECK(ip->destination_ip == ip_cm_address({10, 99, 0, 2}));
  }
  const CmMad m = *parse_cm_mad(mads[2].bytes);
  CHECK(m.header.attribute_id == 0x0012);
  const CmRej& rej = message<CmRej>(m);
  CHECK(rej.local_comm_id == 0);
  CHECK(rej.remote_comm_id == 0xcb2b462au);
  CHECK(rej.message_rejected == 0);  // the REQ
  CHECK(rej.reject_info_length == 0);
  CHECK(rej.reason == 8);
  CHECK(rej_reason_name(rej.reason) == "INVALID_SERVICE_ID");
  CHECK(all_zero(rej.additional_reject_info));
  CHECK(all_zero(rej.private_data));
}

TEST_CASE("rxe-rdmaops: its CM exchange parses and rebuilds byte-exactly too", "[wire][cm][golden]") {
  const auto mads = captured_mads("rxe-rdmaops.pcap");
  REQUIRE(mads.size() == 5);
  std::vector<std::string> names;
  for (const auto& m : mads) {
    const auto p = parse_cm_mad(m.bytes);
    REQUIRE(p.ok());
    CHECK(as_vector(emit(*p)) == m.bytes);
    names.emplace_back(name(attribute_of(p->message)));
  }
  CHECK(names == std::vector<std::string>{"REQ", "REP", "RTU", "DREQ", "DREP"});
}

TEST_CASE("MRA, SIDR_REQ and SIDR_REP sit at the offsets of s12.6.6, s12.11.1 and s12.11.2", "[wire][cm]") {
  // MRA: comm IDs, "message MRAed" in the top 2 bits of byte 8, service timeout in the top 5
  // of byte 9, private data from byte 10.
  CmMad mra;
  mra.header.transaction_id = 0x42;
  mra.message = CmMra{0x11223344, 0x55667788, 1, 0x13, {0xAB}};
  const Mad256 mra_bytes = golden(0x0011, {{0, {0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88, 0x40, 0x98, 0xAB}}});
  CHECK(emit(mra) == mra_bytes);
  mra.header.attribute_id = 0x0011;  // what parse reports; emit took it from the message
  CHECK(*parse_cm_mad(mra_bytes) == mra);

  // SIDR_REQ: request ID, P_Key, 2 reserved bytes, service ID at 8, private data from 16.
  CmMad sreq;
  sreq.header.transaction_id = 0x42;
  sreq.message = CmSidrReq{0x01020304, 0x8001, 0x0000000001110203, {0xCD}};
  const Mad256 sreq_bytes =
      golden(0x0017, {{0, {1, 2, 3, 4, 0x80, 0x01, 0, 0, 0, 0, 0, 0, 0x01, 0x11, 0x02, 0x03, 0xCD}}});
  CHECK(emit(sreq) == sreq_bytes);
  sreq.header.attribute_id = 0x0017;
  CHECK(*parse_cm_mad(sreq_bytes) == sreq);

  // SIDR_REP: request ID, status, additional information length, 2 reserved bytes, QPN and a
  // reserved byte, service ID at 12, Q_Key at 20, ClassPortInfo from 24, private data from 96.
  CmMad srep;
  srep.header.transaction_id = 0x42;
  CmSidrRep r;
  r.request_id = 0x0a0b0c0d;
  r.status = 2;
  r.additional_info_length = 5;
  r.qpn = 0x123456;
  r.service_id = 0x0000000001061c06;
  r.qkey = 0x80010000;
  r.class_port_info[0] = 0xEE;
  r.private_data[0] = 0xEF;
  srep.message = r;
  const Mad256 srep_bytes = golden(0x0018, {{0, {0x0a, 0x0b, 0x0c, 0x0d, 2, 5, 0, 0, 0x12, 0x34, 0x56, 0}},
                                            {12, {0, 0, 0, 0, 0x01, 0x06, 0x1c, 0x06, 0x80, 0x01, 0, 0, 0xEE}},
                                            {96, {0xEF}}});
  CHECK(emit(srep) == srep_bytes);
  srep.header.attribute_id = 0x0018;
  CHECK(*parse_cm_mad(srep_bytes) == srep);
}

TEST_CASE("each of the nine CM messages built in code round-trips through emit and parse", "[wire][cm][build]") {
  // Every field away from its default, every sub-byte field at its largest value, so a wrong
  // mask or shift shows.
  CmPath path{0x1234, 0x5678, counting16(1), counting16(0x81), 0xFFFFF, 63, 0xAB, 0xCD, 15, true, 31};
  CmReq req;
  req.local_comm_id = 0x01020304;
  req.service_id = ip_cm_service_id(0x11, 4791);
  req.local_ca_guid = 0x1122334455667788;
  req.local_qkey = 0x99AABBCC;
  req.local_qpn = 0xFFFFFF;
  req.responder_resources = 0xFE;
  req.local_eecn = 0xABCDEF;
  req.initiator_depth = 0xFD;
  req.remote_eecn = 0x123456;
  req.remote_cm_response_timeout = 31;
  req.transport_service_type = 3;
  req.end_to_end_flow_control = true;
  req.starting_psn = 0xFFFFFF;
  req.local_cm_response_timeout = 31;
  req.retry_count = 7;
  req.pkey = 0x7FFF;
  req.path_mtu = 15;
  req.rdc_exists = true;
  req.rnr_retry_count = 7;
  req.max_cm_retries = 15;
  req.srq = true;
  req.extended_transport = 1;  // XRC
  req.primary = path;
  req.alternate = path;
  req.alternate.flow_label = 0x00001;
  req.alternate.packet_rate = 1;
  req.private_data = counting<92>(7);

  CmRep rep{0xA1A2A3A4, 0xB1B2B3B4, 0xC1C2C3C4, 0xFFFFFF, 0xFFFFFE,           0xFFFFFD,        0xF1, 0xF2, 31,
            3,          true,       7,          true,     0x0102030405060708, counting<196>(3)};
  const std::vector<CmMessage> all{
      req,
      CmMra{1, 2, 2, 31, counting<222>(5)},
      CmRej{3, 4, 2, 72, 0xFFFF, counting<72>(9), counting<148>(11)},
      rep,
      CmRtu{5, 6, counting<224>(13)},
      CmDreq{7, 8, 0xFFFFFF, counting<220>(15)},
      CmDrep{9, 10, counting<224>(17)},
      CmSidrReq{0xFFFFFFFF, 0x8000, 0xFFFFFFFFFFFFFFFF, counting<216>(19)},
      CmSidrRep{0x12345678, 0xFF, 72, 0xFFFFFF, 0x0123456789ABCDEF, 0xFFFFFFFF, counting<72>(21), counting<136>(23)},
  };
  const std::vector<std::uint16_t> ids{0x10, 0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x17, 0x18};
  const std::vector<std::string> names{"REQ", "MRA", "REJ", "REP", "RTU", "DREQ", "DREP", "SIDR_REQ", "SIDR_REP"};
  for (std::size_t i = 0; i < all.size(); ++i) {
    INFO(names[i]);
    CmMad mad;
    mad.header.method = 0x03;
    mad.header.status = 0x1F00;
    mad.header.class_specific = 0xBEEF;
    mad.header.transaction_id = 0xFEDCBA9876543210;
    mad.header.attribute_id = 0;  // emit writes the message's own attribute ID
    mad.header.attribute_modifier = 0xDEADBEEF;
    mad.message = all[i];
    const Mad256 bytes = emit(mad);
    CHECK(name(attribute_of(mad.message)) == names[i]);
    CHECK(Mad::attribute_id::get(bytes.data()) == ids[i]);
    CHECK(Mad::reserved::get(bytes.data()) == 0);
    const auto back = parse_cm_mad(bytes);
    REQUIRE(back.ok());
    mad.header.attribute_id = ids[i];
    CHECK(*back == mad);
    CHECK(emit(*back) == bytes);
  }

  // The REQ's reserved bits go out as zero: bytes 4-7 and 24-27, the 6 bits between flow
  // label and packet rate, and the low 3 bits of each path's last two bytes.
  CmMad m;
  m.message = req;
  const Mad256 b = emit(m);
  const std::uint8_t* d = b.data() + Mad::length;
  for (std::size_t off : {4, 5, 6, 7, 24, 25, 26, 27}) CHECK(d[off] == 0);
  for (std::size_t path_at : {52, 96}) {
    CHECK((d[path_at + 38] & 0x0F) == 0);
    CHECK((d[path_at + 39] & 0xC0) == 0);
    CHECK((d[path_at + 42] & 0x07) == 0);
    CHECK((d[path_at + 43] & 0x07) == 0);
  }

  // Values wider than their field are cut to it.
  CmMad wide;
  wide.message = CmDreq{1, 2, 0x7ABCDEF, {}};
  CHECK(message<CmDreq>(*parse_cm_mad(emit(wide))).remote_qpn_eecn == 0xABCDEF);
}

TEST_CASE("refused CM MADs: each with its named error", "[wire][cm][errors]") {
  const auto mads = captured_mads("rxe-rping.pcap");
  REQUIRE(mads.size() == 5);
  const std::vector<std::uint8_t> req = mads[0].bytes;
  REQUIRE(parse_cm_mad(req).ok());
  const auto with = [&](std::size_t at, std::uint8_t value) {
    std::vector<std::uint8_t> b = req;
    b[at] = value;
    return b;
  };

  // s13.4.2: 256 bytes, no fewer and no more.
  CHECK(error_of(std::span(req).first(255)) == Error::truncated);
  CHECK(error_of({}) == Error::truncated);
  std::vector<std::uint8_t> longer = req;
  longer.push_back(0);
  CHECK(error_of(longer) == Error::bad_length);

  CHECK(error_of(with(0, 2)) == Error::bad_version);           // base version
  CHECK(error_of(with(2, 1)) == Error::bad_version);           // CM class version
  CHECK(error_of(with(1, 0x03)) == Error::unsupported_class);  // Subnet Administration
  CHECK(error_of(with(1, 0x01)) == Error::unsupported_class);  // Subnet Management
  for (int attr : {0x01, 0x19, 0x1A, 0x0F, 0x1B, 0xFF}) {      // ClassPortInfo, LAP, APR, undefined
    INFO("attribute " << attr);
    CHECK(error_of(with(17, static_cast<std::uint8_t>(attr))) == Error::unsupported_attribute);
  }
  // The class is judged before its version, and the version before the attribute.
  CHECK(error_of(with(1, 0x03)) == Error::unsupported_class);
  std::vector<std::uint8_t> both = with(2, 1);
  both[17] = 0x19;
  CHECK(error_of(both) == Error::bad_version);

  // Reserved code points.
  constexpr std::size_t d = Mad::length;
  CHECK(error_of(with(d + 43, 0xA6)) == Error::invalid_field);  // REQ service type 3, extended type 0
  std::vector<std::uint8_t> xrc = with(d + 43, 0xA6);
  xrc[d + 51] = 0xF1;  // extended transport type 1: XRC
  REQUIRE(parse_cm_mad(xrc).ok());
  CHECK(message<CmReq>(*parse_cm_mad(xrc)).extended_transport == 1);
  CHECK(parse_cm_mad(with(d + 43, 0xA4)).ok());  // service type 2, RD: valid, for the CM to refuse

  CmMad mad;
  mad.message = CmMra{};
  Mad256 b = emit(mad);
  b[d + 8] = 0xC0;  // MRA "message MRAed" 3
  CHECK(error_of(b) == Error::invalid_field);
  mad.message = CmRej{};
  b = emit(mad);
  b[d + 8] = 0xC0;  // REJ "message REJected" 3
  CHECK(error_of(b) == Error::invalid_field);
  b = emit(mad);
  b[d + 9] = 73 << 1;  // reject info length beyond the 72-byte ARI
  CHECK(error_of(b) == Error::invalid_field);
  b[d + 9] = 72 << 1;
  CHECK(parse_cm_mad(b).ok());
  mad.message = CmSidrRep{};
  b = emit(mad);
  b[d + 5] = 73;  // additional information length beyond the 72-byte ClassPortInfo
  CHECK(error_of(b) == Error::invalid_field);
}

TEST_CASE("IP CM header: refusals, IPv6, and the service ID helpers (annex A11)", "[wire][cm]") {
  IpCmHeader h;
  h.ip_version = 6;
  h.minor_version = 3;
  h.source_port = 0xC000;
  h.source_ip = counting16(0x20);
  h.destination_ip = counting16(0x40);
  std::array<std::uint8_t, 92> pd;
  pd.fill(0x77);
  emit_ip_cm_header(h, pd);
  CHECK(pd[0] == 0x03);
  CHECK(pd[1] == 0x60);
  CHECK(pd[kIpCmHeaderLength] == 0x77);  // only the 36 header bytes are written
  const auto back = parse_ip_cm_header(pd);
  REQUIRE(back.ok());
  CHECK(*back == h);

  CHECK(parse_ip_cm_header(std::span(pd).first(35)).error() == Error::truncated);
  pd[0] = 0x10;  // major version 1
  CHECK(parse_ip_cm_header(pd).error() == Error::bad_version);
  pd[0] = 0;
  pd[1] = 0x50;  // IP version 5
  CHECK(parse_ip_cm_header(pd).error() == Error::bad_version);

  CHECK(ip_cm_service_id(0x06, 7174) == 0x0000000001061c06ull);
  CHECK(ip_cm_service(0x0000000001061c06) == IpCmService{0x06, 7174});
  CHECK(ip_cm_service(0x0000000001110000) == IpCmService{0x11, 0});
  CHECK_FALSE(ip_cm_service(0x0000000002061c06).has_value());
  CHECK_FALSE(ip_cm_service(0x1000000001061c06).has_value());
  CHECK_FALSE(ip_cm_service(0).has_value());
  CHECK(ip_cm_address({192, 168, 1, 2}) == Gid16{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 192, 168, 1, 2});
}

TEST_CASE("REJ reason names follow table 103", "[wire][cm]") {
  CHECK(rej_reason_name(1) == "NO_QP");
  CHECK(rej_reason_name(8) == "INVALID_SERVICE_ID");
  CHECK(rej_reason_name(28) == "CONSUMER_REJECT");
  CHECK(rej_reason_name(33) == "INVALID_ALTERNATE_FLOW_LABEL");
  CHECK(rej_reason_name(0).empty());
  CHECK(rej_reason_name(34).empty());
  CHECK(name(CmAttr::lap) == "LAP");
  CHECK(name(static_cast<CmAttr>(0x0099)).empty());
}
