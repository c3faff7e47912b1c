// A decoded packet as an ordered list of named fields, rendered once as text
// ("key=value ...") and once as JSON, so the two outputs of `softrdma dump` cannot disagree.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace softrdma::dump {

class Record {
 public:
  Record& text(std::string_view key, std::string value);
  Record& number(std::string_view key, std::uint64_t value);
  Record& hex(std::string_view key, std::uint64_t value, int digits);  // text 0x..., JSON number
  Record& flag(std::string_view key, bool on);                         // text: the key alone when set

  std::string to_text() const;
  std::string to_json() const;

 private:
  enum class Kind { text, number, hex, flag };
  struct Item {
    std::string key;
    Kind kind;
    std::string text;
    std::uint64_t number;
    int digits;
  };
  std::vector<Item> items_;
};

std::string json_escape(std::string_view s);

}  // namespace softrdma::dump
