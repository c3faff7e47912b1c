// A small JSON reader (RFC 8259) for what `softrdma stats` receives from stats endpoints:
// objects keep their members' order, and numbers keep their text, so 64-bit counters are
// shown exactly (a double would round them above 2^53).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace softrdma::stats {

struct JsonMember;

struct JsonValue {
  enum class Kind { null, boolean, number, string, array, object };
  Kind kind = Kind::null;
  std::string text;              // number: as written; string: decoded; boolean: "true" or "false"
  std::vector<JsonValue> items;  // array
  // Object members, in order. Not std::pair: a pair may not hold the still-incomplete
  // JsonValue (clang's libstdc++ checks refuse it), a vector may (C++17).
  std::vector<JsonMember> members;

  const JsonValue* find(std::string_view name) const;  // an object's member, or null
  bool is_zero() const { return kind == Kind::number && text == "0"; }
};

struct JsonMember {
  std::string name;
  JsonValue value;
};

// The value that is all of `text` (surrounding white space allowed); nullopt and `error` set
// (with the byte offset) otherwise.
std::optional<JsonValue> parse_json(std::string_view text, std::string& error);

}  // namespace softrdma::stats
