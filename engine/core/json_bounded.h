// The one JSON entry point for untrusted text (request bodies, JSONL lines, tokenizer.json,
// config.json, tokenizer_config.json, safetensors headers): size and nesting depth are enforced
// while parsing, so no recursive walk later (template values, dumps, converters) ever sees deep
// input. Excess is an InputError that names the input and the limit.
#pragma once
#include <cstddef>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace llmctl {

struct JsonLimits {
  size_t max_bytes;
  int max_depth;  // nesting levels of arrays/objects: `[]` is 1, `[[]]` is 2
};

// Request bodies and JSONL request lines: tool schemas and content parts nest, but not this deep.
inline constexpr JsonLimits kRequestJsonLimits{size_t(64) << 20, 64};
// Files that arrive with a model: tokenizer.json of large vocabularies runs to tens of MB.
inline constexpr JsonLimits kModelJsonLimits{size_t(256) << 20, 64};

// Parses `text` as JSON; `what` names it in errors ("the request body", "'dir/config.json'").
// Throws InputError on invalid JSON, on more than limits.max_bytes or on deeper nesting.
nlohmann::json parse_json_bounded(std::string_view text, const JsonLimits& limits, const std::string& what);
// The same keeping each object's key order (what a template prints, a schema's property order).
// Ordered objects find keys by a linear search, so an object of more than kMaxOrderedObjectKeys keys
// is refused while it is parsed: an InputError "<what> has an object with over N keys".
inline constexpr size_t kMaxOrderedObjectKeys = 4096;
nlohmann::ordered_json parse_ordered_json_bounded(std::string_view text, const JsonLimits& limits,
                                                  const std::string& what);

// The most keys any object in v holds (walked without recursion). For input parsed again as
// ordered JSON, whose objects find keys by a linear search.
size_t widest_object(const nlohmann::json& v);

// Reads a whole file (refusing one over limits.max_bytes before reading it) and parses it.
nlohmann::json read_json_file_bounded(const std::string& path, const JsonLimits& limits = kModelJsonLimits);

}  // namespace llmctl
