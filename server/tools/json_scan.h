// Reading a JSON object while it is still being generated: which members are there so far, each
// member's raw value text (as the model wrote it) and whether it is complete. Tool-call parsers use
// it to stream a call's name and arguments before the object closes. Nothing is allocated per
// character and nesting depth costs no stack.
#pragma once
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace llmctl::server {

struct JsonMemberScan {
  std::string key;       // decoded
  std::string_view raw;  // the value's text so far (from its first character)
  bool complete = false;
};

struct JsonObjectScan {
  std::vector<JsonMemberScan> members;
  bool complete = false;  // the closing brace was read
  bool valid = true;      // false: the text cannot be the start of a JSON object
  size_t end = 0;         // complete: one past the closing brace
  // The first member named `key` (complete or still being read). The first, not the last as a
  // parser keeps: what a stream announced from it must not change when a duplicate key follows.
  const JsonMemberScan* find(std::string_view key) const;
};

// text[0] must be '{'.
JsonObjectScan scan_json_object(std::string_view text);

// Where the JSON value starting at text[0] ends (one past it); nullopt while it is incomplete.
// A number at the very end is incomplete (more digits may follow). Sets *bad on text that cannot
// be a JSON value's start.
std::optional<size_t> json_value_end(std::string_view text, bool* bad = nullptr);

// A complete JSON string's value ("\"a\\nb\"" -> "a\nb"); nullopt when it is not a valid string.
std::optional<std::string> decode_json_string(std::string_view raw);

}  // namespace llmctl::server
