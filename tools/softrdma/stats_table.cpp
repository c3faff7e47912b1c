#include "tools/softrdma/stats_table.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <cstdio>
#include <stdexcept>
#include <string_view>

namespace softrdma::stats {

namespace {

constexpr std::size_t kLabelWidth = 11;
constexpr std::size_t kLineWidth = 100;
constexpr std::array<std::string_view, 8> kAlwaysShown = {"qpn",       "type",       "state",     "dest_qpn",
                                                          "sent_pkts", "sent_bytes", "rcvd_pkts", "rcvd_bytes"};

// The columns that name a QP rather than count: headed in capitals, left-aligned.
bool names_qp(std::string_view column) {
  return column == "qpn" || column == "type" || column == "state" || column == "dest_qpn";
}

std::string text_of(const JsonValue* v) { return v != nullptr ? v->text : "?"; }

// QP numbers as rdma-core's examples print them: 24 bits in hex; "-" for no peer (0).
std::string qpn_text(const JsonValue& v) {
  if (v.is_zero()) return "-";
  unsigned long long n = 0;
  try {
    n = std::stoull(v.text);
  } catch (const std::exception&) {
    return v.text;
  }
  char buf[24];
  std::snprintf(buf, sizeof buf, "0x%06llx", n);
  return buf;
}

bool all_numbers(const JsonValue& object) {
  return std::all_of(object.members.begin(), object.members.end(),
                     [](const auto& m) { return m.value.kind == JsonValue::Kind::number; });
}

// "  label      a=1 b=2 ..." wrapped under the first pair.
void group_line(std::string& out, const std::string& label, const JsonValue& counters) {
  std::string line = "  " + label;
  line.resize(2 + kLabelWidth, ' ');
  const std::size_t indent = line.size();
  bool first = true;
  for (const auto& [name, value] : counters.members) {
    const std::string pair = name + "=" + value.text;
    if (!first && line.size() + 1 + pair.size() > kLineWidth) {
      out += line + "\n";
      line.assign(indent, ' ');
      first = true;
    }
    line += (first ? "" : " ") + pair;
    first = false;
  }
  out += line + "\n";
}

void qp_table(std::string& out, const JsonValue& qps) {
  if (qps.items.empty()) {
    out += "  (no live QP)\n";
    return;
  }
  std::vector<std::string> columns;
  for (const JsonMember& member : qps.items.front().members) {
    const std::string& name = member.name;  // a plain reference: clang 14 cannot capture a structured binding
    const bool always = std::find(kAlwaysShown.begin(), kAlwaysShown.end(), name) != kAlwaysShown.end();
    const bool nonzero = std::any_of(qps.items.begin(), qps.items.end(), [&](const JsonValue& qp) {
      const JsonValue* v = qp.find(name);
      return v != nullptr && !v->is_zero();
    });
    if (always || nonzero) columns.push_back(name);
  }
  std::vector<std::vector<std::string>> rows;
  rows.emplace_back();
  for (const std::string& c : columns) {
    std::string heading = c;
    if (names_qp(c)) {
      std::transform(heading.begin(), heading.end(), heading.begin(),
                     [](char ch) { return static_cast<char>(std::toupper(ch)); });
    }
    rows.back().push_back(heading);
  }
  for (const JsonValue& qp : qps.items) {
    rows.emplace_back();
    for (const std::string& c : columns) {
      const JsonValue* v = qp.find(c);
      const bool qpn = (c == "qpn" || c == "dest_qpn") && v != nullptr && v->kind == JsonValue::Kind::number;
      rows.back().push_back(qpn ? qpn_text(*v) : text_of(v));
    }
  }
  std::vector<std::size_t> width(columns.size(), 0);
  for (const auto& row : rows)
    for (std::size_t i = 0; i < row.size(); ++i) width[i] = std::max(width[i], row[i].size());
  for (const auto& row : rows) {
    std::string line;
    for (std::size_t i = 0; i < row.size(); ++i) {
      const std::size_t pad = width[i] - row[i].size();
      const bool right = !names_qp(columns[i]);
      line += "  " + (right ? std::string(pad, ' ') + row[i] : row[i] + std::string(pad, ' '));
    }
    while (line.ends_with(' ')) line.pop_back();
    out += line + "\n";
  }
}

// A device's counter groups, then its QP table; then the device beside it (srdmaiw0 in
// "iwarp_device"), under a line naming it.
void device_body(std::string& out, const JsonValue& device) {
  const JsonValue* qps = nullptr;
  const JsonValue* beside = nullptr;
  for (const auto& [name, value] : device.members) {
    if (value.kind == JsonValue::Kind::array) {
      qps = &value;
    } else if (value.kind == JsonValue::Kind::object && all_numbers(value)) {
      group_line(out, name, value);
    } else if (value.kind == JsonValue::Kind::object && value.find("device") != nullptr) {
      beside = &value;
    } else if (value.kind == JsonValue::Kind::object) {  // faults: {"tx": {...}, "rx": {...}}
      for (const auto& [sub, counters] : value.members)
        if (counters.kind == JsonValue::Kind::object) group_line(out, name + " " + sub, counters);
    }
  }
  if (qps != nullptr) qp_table(out, *qps);
  if (beside != nullptr) {
    out += text_of(beside->find("device")) + "  " + text_of(beside->find("address")) + "\n";
    device_body(out, *beside);
  }
}

}  // namespace

std::string render_table(const JsonValue& report) {
  std::string out = "PID " + text_of(report.find("pid")) + "  " + text_of(report.find("program")) + "  " +
                    text_of(report.find("device")) + "  " + text_of(report.find("address")) + "\n";
  device_body(out, report);
  return out;
}

}  // namespace softrdma::stats
