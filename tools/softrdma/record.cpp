#include "tools/softrdma/record.hpp"

#include <cstdio>

namespace softrdma::dump {

Record& Record::text(std::string_view key, std::string value) {
  items_.push_back({std::string(key), Kind::text, std::move(value), 0, 0});
  return *this;
}
Record& Record::number(std::string_view key, std::uint64_t value) {
  items_.push_back({std::string(key), Kind::number, {}, value, 0});
  return *this;
}
Record& Record::hex(std::string_view key, std::uint64_t value, int digits) {
  items_.push_back({std::string(key), Kind::hex, {}, value, digits});
  return *this;
}
Record& Record::flag(std::string_view key, bool on) {
  items_.push_back({std::string(key), Kind::flag, {}, on ? 1u : 0u, 0});
  return *this;
}

std::string Record::to_text() const {
  std::string out;
  for (const Item& i : items_) {
    if (i.kind == Kind::flag && i.number == 0) continue;
    if (!out.empty()) out += ' ';
    out += i.key;
    char buf[40];
    switch (i.kind) {
      case Kind::text:
        out += '=' + i.text;
        break;
      case Kind::number:
        std::snprintf(buf, sizeof buf, "=%llu", static_cast<unsigned long long>(i.number));
        out += buf;
        break;
      case Kind::hex:
        std::snprintf(buf, sizeof buf, "=0x%0*llx", i.digits, static_cast<unsigned long long>(i.number));
        out += buf;
        break;
      case Kind::flag:
        break;
    }
  }
  return out;
}

std::string Record::to_json() const {
  std::string out = "{";
  for (const Item& i : items_) {
    if (out.size() > 1) out += ", ";
    out += '"' + json_escape(i.key) + "\": ";
    switch (i.kind) {
      case Kind::text:
        out += '"' + json_escape(i.text) + '"';
        break;
      case Kind::number:
      case Kind::hex:
        out += std::to_string(i.number);
        break;
      case Kind::flag:
        out += i.number ? "true" : "false";
        break;
    }
  }
  return out + "}";
}

std::string json_escape(std::string_view s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out += c;
    }
  }
  return out;
}

}  // namespace softrdma::dump
