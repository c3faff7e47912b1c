#include "emulator/host/stats_report.hpp"

#include <unistd.h>

#include <cstdio>
#include <string_view>

namespace softrdma::host {

namespace {

// Appends JSON text: objects of named numbers and strings, written in one pass.
class JsonOut {
 public:
  std::string text;

  void open(std::string_view name = {}) { begin(name, '{'); }
  void close() { end('}'); }
  void open_array(std::string_view name) { begin(name, '['); }
  void close_array() { end(']'); }
  void number(std::string_view name, std::uint64_t value) { item(name), text += std::to_string(value); }
  void string(std::string_view name, std::string_view value) {
    item(name);
    quote(value);
  }

 private:
  void begin(std::string_view name, char bracket) {
    item(name);
    text += bracket;
    first_ = true;
  }
  void end(char bracket) {
    text += bracket;
    first_ = false;
  }
  // A comma before every item but the first of its object or array, then "name": if named.
  void item(std::string_view name) {
    if (!first_) text += ',';
    first_ = false;
    if (!name.empty()) {
      quote(name);
      text += ':';
    }
  }
  // RFC 8259 s7: quote, backslash and control characters are escaped; the rest passes as is.
  void quote(std::string_view s) {
    text += '"';
    for (const char c : s) {
      if (c == '"' || c == '\\') {
        text += '\\';
        text += c;
      } else if (static_cast<unsigned char>(c) < 0x20) {
        char escaped[8];
        std::snprintf(escaped, sizeof escaped, "\\u%04x", static_cast<unsigned>(c));
        text += escaped;
      } else {
        text += c;
      }
    }
    text += '"';
  }

  bool first_ = true;
};

// The field lists. A field added to one of these structs must be added here too: the size
// checks make the build say so.
static_assert(sizeof(core::QpCounters) == 13 * sizeof(std::uint64_t), "a QpCounters field is missing below");
void put(JsonOut& j, const core::QpCounters& c) {
  j.number("sent_pkts", c.sent_pkts);
  j.number("sent_bytes", c.sent_bytes);
  j.number("rcvd_pkts", c.rcvd_pkts);
  j.number("rcvd_bytes", c.rcvd_bytes);
  j.number("retransmitted_pkts", c.retransmitted_pkts);
  j.number("local_ack_timeout_err", c.local_ack_timeout_err);
  j.number("rcvd_seq_err", c.rcvd_seq_err);
  j.number("out_of_seq_request", c.out_of_seq_request);
  j.number("duplicate_request", c.duplicate_request);
  j.number("rcvd_rnr_err", c.rcvd_rnr_err);
  j.number("send_rnr_err", c.send_rnr_err);
  j.number("retry_exceeded_err", c.retry_exceeded_err);
  j.number("rnr_retry_exceeded_err", c.rnr_retry_exceeded_err);
}

static_assert(sizeof(core::CmCounters) == 6 * sizeof(std::uint64_t), "a CmCounters field is missing below");
void put(JsonOut& j, const core::CmCounters& c) {
  j.number("mads_sent", c.mads_sent);
  j.number("mads_received", c.mads_received);
  j.number("mads_resent", c.mads_resent);
  j.number("malformed", c.malformed);
  j.number("unmatched", c.unmatched);
  j.number("rejects_sent", c.rejects_sent);
}

static_assert(sizeof(core::DeviceCounters) ==
                  sizeof(core::QpCounters) + sizeof(core::CmCounters) + 7 * sizeof(std::uint64_t),
              "a DeviceCounters field is missing below");
void put(JsonOut& j, const core::DeviceCounters& c) {
  put(j, c.qps);  // c.cm: an object of its own beside "counters" (QP1's MADs)
  j.number("icrc_err", c.icrc_err);
  j.number("icrc_ipv4_id_solved", c.icrc_ipv4_id_solved);
  j.number("malformed", c.malformed);
  j.number("unknown_qp", c.unknown_qp);
  j.number("dropped", c.dropped);
  j.number("mcast_rcvd", c.mcast_rcvd);
  j.number("mcast_dropped", c.mcast_dropped);
}

static_assert(sizeof(net::UdpCounters) == 13 * sizeof(std::uint64_t), "a UdpCounters field is missing below");
void put(JsonOut& j, const net::UdpCounters& c) {
  j.number("tx_packets", c.tx_packets);
  j.number("tx_bytes", c.tx_bytes);
  j.number("tx_errors", c.tx_errors);
  j.number("tx_no_route", c.tx_no_route);
  j.number("rx_packets", c.rx_packets);
  j.number("rx_bytes", c.rx_bytes);
  j.number("rx_truncated", c.rx_truncated);
  j.number("rx_errors", c.rx_errors);
  j.number("rx_kernel_drops", c.rx_kernel_drops);
  j.number("tx_gso_datagrams", c.tx_gso_datagrams);
  j.number("rx_gro_datagrams", c.rx_gro_datagrams);
  j.number("loopback_packets", c.loopback_packets);
  j.number("last_tx_errno", static_cast<std::uint64_t>(c.last_tx_errno));
}

static_assert(sizeof(net::CaptureCounters) == 2 * sizeof(std::uint64_t), "a CaptureCounters field is missing below");
void put(JsonOut& j, const net::CaptureCounters& c) {
  j.number("frames_written", c.frames_written);
  j.number("frames_dropped", c.frames_dropped);
}

static_assert(sizeof(net::FaultCounters) == 8 * sizeof(std::uint64_t), "a FaultCounters field is missing below");
void put(JsonOut& j, const net::FaultCounters& c) {
  j.number("passed", c.passed);
  j.number("lost", c.lost);
  j.number("dropped_nth", c.dropped_nth);
  j.number("link_down", c.link_down);
  j.number("duplicated", c.duplicated);
  j.number("corrupted", c.corrupted);
  j.number("reordered", c.reordered);
  j.number("delayed", c.delayed);
}

static_assert(sizeof(core::IwarpCounters) == 12 * sizeof(std::uint64_t), "an IwarpCounters field is missing below");
void put(JsonOut& j, const core::IwarpCounters& c) {
  j.number("connections_initiated", c.connections_initiated);
  j.number("connections_accepted", c.connections_accepted);
  j.number("connects_refused", c.connects_refused);
  j.number("connects_unreachable", c.connects_unreachable);
  j.number("connect_errors", c.connect_errors);
  j.number("rejects_sent", c.rejects_sent);
  j.number("disconnects", c.disconnects);
  j.number("terminates_sent", c.terminates_sent);
  j.number("terminates_received", c.terminates_received);
  j.number("crc_err", c.crc_err);
  j.number("tcp_bytes_sent", c.tcp_bytes_sent);
  j.number("tcp_bytes_received", c.tcp_bytes_received);
}

void put(JsonOut& j, const std::vector<net::NamedCount>& counts) {
  for (const net::NamedCount& c : counts) j.number(c.name, c.value);
}

template <class Counters>
void put_object(JsonOut& j, std::string_view name, const Counters& c) {
  j.open(name);
  put(j, c);
  j.close();
}

void put_qps(JsonOut& j, const std::vector<core::QpStats>& qps);

void put(JsonOut& j, const IwarpDeviceReport& r) {
  j.string("device", r.device);
  j.string("address", r.address);
  put_object(j, "counters", r.counters);
  put_object(j, "iwarp", r.iwarp);
  j.open("faults");
  put_object(j, "tx", r.faults);
  j.close();
  put_qps(j, r.qps);
}

}  // namespace

namespace {

void put_qps(JsonOut& j, const std::vector<core::QpStats>& qps) {
  j.open_array("qps");
  for (const core::QpStats& q : qps) {
    j.open();
    j.number("qpn", q.qpn);
    j.string("type", type_name(q.type));
    j.string("state", state_name(q.state));
    j.number("dest_qpn", q.dest_qpn);
    put(j, q.counters);
    j.close();
  }
  j.close_array();
}

}  // namespace

const char* type_name(core::QpType type) {
  switch (type) {
    case core::QpType::rc:
      return "RC";
    case core::QpType::uc:
      return "UC";
    case core::QpType::ud:
      return "UD";
    case core::QpType::xrc_send:
      return "XRC_SEND";
    case core::QpType::xrc_recv:
      return "XRC_RECV";
  }
  return "?";
}

const char* state_name(core::QpState state) {
  switch (state) {
    case core::QpState::reset:
      return "RESET";
    case core::QpState::init:
      return "INIT";
    case core::QpState::rtr:
      return "RTR";
    case core::QpState::rts:
      return "RTS";
    case core::QpState::sqd:
      return "SQD";
    case core::QpState::sqe:
      return "SQE";
    case core::QpState::err:
      return "ERR";
  }
  return "?";
}

std::string to_json(const StatsReport& r) {
  JsonOut j;
  j.open();
  j.number("format", 1);
  j.number("pid", static_cast<std::uint64_t>(r.pid));
  j.string("program", r.program);
  j.string("device", r.device);
  j.string("address", r.address);
  put_object(j, "counters", r.host.device);
  put_object(j, "cm", r.host.device.cm);
  put_object(j, "udp", r.host.udp);
  put_object(j, "capture", r.host.capture);
  j.open("faults");
  put_object(j, "tx", r.host.faults.tx);
  put_object(j, "rx", r.host.faults.rx);
  j.close();
  if (!r.host.port.empty()) put_object(j, "port", r.host.port);
  if (!r.dma.empty()) put_object(j, "dma", r.dma);
  put_qps(j, r.qps);
  if (r.iwarp) put_object(j, "iwarp_device", *r.iwarp);
  j.close();
  return std::move(j.text);
}

StatsReport report_of(EmbeddedHost& host, std::string program, std::string device) {
  StatsReport r;
  r.pid = ::getpid();
  r.program = std::move(program);
  r.device = std::move(device);
  r.address = host.address();
  r.qps = host.call([](core::Device& d, core::Time) { return d.qp_stats(); });
  r.host = host.stats();  // after the QPs: the sum then covers at least what they show
  return r;
}

IwarpDeviceReport iwarp_report_of(IwarpHost& host, std::string device) {
  IwarpDeviceReport r;
  r.device = std::move(device);
  r.address = host.address();
  host.call([&r](core::Device& d, core::Time) {
    r.qps = d.qp_stats();
    r.counters = d.counters().qps;
    r.iwarp = d.iwarp_counters();
  });
  r.faults = host.fault_counters();
  return r;
}

}  // namespace softrdma::host
