// The text of one member of a JSON document, as the client wrote it. nlohmann::json keeps object
// keys sorted; where the order matters (a JSON schema's properties come out in the order written)
// the member's own text is parsed again as ordered JSON, and only that member: ordered objects
// look keys up linearly, so a whole hostile body must never be parsed that way.
#pragma once
#include <initializer_list>
#include <optional>
#include <string_view>

namespace llmctl {

// The raw text of doc[path[0]][path[1]]... (object members only), or nullopt when a key is absent
// or a value on the way is not an object. `doc` must already be known to be valid JSON (it is
// scanned, not validated). A duplicated key: its last value, as the parser keeps.
std::optional<std::string_view> raw_json_member(std::string_view doc, std::initializer_list<std::string_view> path);

}  // namespace llmctl
