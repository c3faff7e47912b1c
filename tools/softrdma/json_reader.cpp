#include "tools/softrdma/json_reader.hpp"

#include <cstdint>
#include <utility>

namespace softrdma::stats {

namespace {

constexpr int kMaxDepth = 64;  // deeper than any report; bounds the recursion on bad input

class Parser {
 public:
  explicit Parser(std::string_view text) : s_(text) {}

  std::optional<JsonValue> document(std::string& error) {
    JsonValue v;
    skip_space();
    if (value(v, 0)) {
      skip_space();
      if (pos_ == s_.size()) return v;
      fail("text after the value");
    }
    error = error_ + " at byte " + std::to_string(pos_);
    return std::nullopt;
  }

 private:
  bool fail(const char* what) {
    if (error_.empty()) error_ = what;
    return false;
  }
  void skip_space() {
    while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\t' || s_[pos_] == '\n' || s_[pos_] == '\r')) ++pos_;
  }
  bool eat(char c) {
    skip_space();
    if (pos_ < s_.size() && s_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  bool literal(std::string_view word) {
    if (s_.substr(pos_, word.size()) != word) return fail("an unknown word");
    pos_ += word.size();
    return true;
  }

  bool value(JsonValue& v, int depth) {
    if (depth > kMaxDepth) return fail("nesting too deep");
    skip_space();
    if (pos_ >= s_.size()) return fail("a value is missing");
    const char c = s_[pos_];
    if (c == '{') return object(v, depth);
    if (c == '[') return array(v, depth);
    if (c == '"') {
      v.kind = JsonValue::Kind::string;
      return string(v.text);
    }
    if (c == 't' || c == 'f') {
      v.kind = JsonValue::Kind::boolean;
      v.text = c == 't' ? "true" : "false";
      return literal(v.text);
    }
    if (c == 'n') return literal("null");
    return number(v);
  }

  bool object(JsonValue& v, int depth) {
    v.kind = JsonValue::Kind::object;
    ++pos_;
    if (eat('}')) return true;
    do {
      skip_space();
      std::string name;
      if (pos_ >= s_.size() || s_[pos_] != '"') return fail("a member name is missing");
      if (!string(name)) return false;
      if (!eat(':')) return fail("':' is missing");
      v.members.push_back({std::move(name), JsonValue{}});
      if (!value(v.members.back().value, depth + 1)) return false;
    } while (eat(','));
    return eat('}') || fail("'}' is missing");
  }

  bool array(JsonValue& v, int depth) {
    v.kind = JsonValue::Kind::array;
    ++pos_;
    if (eat(']')) return true;
    do {
      v.items.emplace_back();
      if (!value(v.items.back(), depth + 1)) return false;
    } while (eat(','));
    return eat(']') || fail("']' is missing");
  }

  // RFC 8259 s6: -? int frac? exp?, int without leading zeros.
  bool number(JsonValue& v) {
    const std::size_t start = pos_;
    auto digits = [&] {
      const std::size_t from = pos_;
      while (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9') ++pos_;
      return pos_ - from;
    };
    if (pos_ < s_.size() && s_[pos_] == '-') ++pos_;
    const std::size_t int_start = pos_;
    const std::size_t int_digits = digits();
    if (int_digits == 0) return fail("not a value");
    if (int_digits > 1 && s_[int_start] == '0') return fail("a number with a leading zero");
    if (pos_ < s_.size() && s_[pos_] == '.') {
      ++pos_;
      if (digits() == 0) return fail("a fraction without digits");
    }
    if (pos_ < s_.size() && (s_[pos_] == 'e' || s_[pos_] == 'E')) {
      ++pos_;
      if (pos_ < s_.size() && (s_[pos_] == '+' || s_[pos_] == '-')) ++pos_;
      if (digits() == 0) return fail("an exponent without digits");
    }
    v.kind = JsonValue::Kind::number;
    v.text = std::string(s_.substr(start, pos_ - start));
    return true;
  }

  bool hex4(std::uint32_t& out) {
    if (pos_ + 4 > s_.size()) return fail("a short \\u escape");
    out = 0;
    for (int i = 0; i < 4; ++i) {
      const char c = s_[pos_++];
      const int d = c >= '0' && c <= '9'   ? c - '0'
                    : c >= 'a' && c <= 'f' ? c - 'a' + 10
                    : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                           : -1;
      if (d < 0) return fail("a bad \\u escape");
      out = out * 16 + static_cast<std::uint32_t>(d);
    }
    return true;
  }

  static void utf8(std::uint32_t cp, std::string& out) {
    if (cp < 0x80) {
      out += static_cast<char>(cp);
    } else if (cp < 0x800) {
      out += static_cast<char>(0xC0 | (cp >> 6));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      out += static_cast<char>(0xE0 | (cp >> 12));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
      out += static_cast<char>(0xF0 | (cp >> 18));
      out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    }
  }

  // RFC 8259 s7; a lone surrogate becomes U+FFFD.
  bool string(std::string& out) {
    ++pos_;  // the opening quote
    while (pos_ < s_.size()) {
      const char c = s_[pos_++];
      if (c == '"') return true;
      if (static_cast<unsigned char>(c) < 0x20) return fail("a control character in a string");
      if (c != '\\') {
        out += c;
        continue;
      }
      if (pos_ >= s_.size()) break;
      const char e = s_[pos_++];
      switch (e) {
        case '"':
        case '\\':
        case '/':
          out += e;
          break;
        case 'b':
          out += '\b';
          break;
        case 'f':
          out += '\f';
          break;
        case 'n':
          out += '\n';
          break;
        case 'r':
          out += '\r';
          break;
        case 't':
          out += '\t';
          break;
        case 'u': {
          std::uint32_t cp = 0;
          if (!hex4(cp)) return false;
          if (cp >= 0xD800 && cp < 0xDC00 && s_.substr(pos_, 2) == "\\u") {
            pos_ += 2;
            std::uint32_t low = 0;
            if (!hex4(low)) return false;
            cp = low >= 0xDC00 && low < 0xE000 ? 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00) : 0xFFFD;
          } else if (cp >= 0xD800 && cp < 0xE000) {
            cp = 0xFFFD;
          }
          utf8(cp, out);
          break;
        }
        default:
          return fail("a bad escape");
      }
    }
    return fail("an unterminated string");
  }

  std::string_view s_;
  std::size_t pos_ = 0;
  std::string error_;
};

}  // namespace

const JsonValue* JsonValue::find(std::string_view name) const {
  for (const auto& [key, value] : members)
    if (key == name) return &value;
  return nullptr;
}

std::optional<JsonValue> parse_json(std::string_view text, std::string& error) { return Parser(text).document(error); }

}  // namespace softrdma::stats
