// The request fields that ask for structured output, as the servers people call spell them:
//   OpenAI   response_format: {"type": "text" | "json_object" | "json_schema",
//                              "json_schema": {"name", "schema", "strict", "description"}}
//   vLLM     structured_outputs: {"json" | "regex" | "choice" | "grammar" | "json_object": ...}
//            and its older guided_json / guided_regex / guided_choice / guided_grammar
//   TGI      parameters.grammar: {"type": "json" | "regex", "value": ...}
// Parsed from an ordered JSON object, so that a schema keeps the key order the client wrote (its
// properties come out in that order).
#pragma once
#include <optional>
#include <string_view>

#include <nlohmann/json.hpp>

#include "engine/structured/constraint.h"

namespace llmctl {

// Whether key is one of the fields above at the top level of an OpenAI / vLLM request.
bool is_constraint_field(std::string_view key);

// The one constraint an OpenAI / vLLM request body asks for (nullopt: none, or response_format
// "text"). Throws InputError naming the field: malformed, unknown keys, or two fields at once.
std::optional<ConstraintSpec> constraint_from_request(const nlohmann::ordered_json& body);

// TGI's parameters.grammar object.
ConstraintSpec constraint_from_tgi_grammar(const nlohmann::ordered_json& grammar);

// The same from a request's parsed body (keys sorted) and its text: each constraint field present
// is parsed again from its own text, in order, refused past max_field_bytes.
std::optional<ConstraintSpec> constraint_from_request_text(const nlohmann::json& body, std::string_view text,
                                                           size_t max_field_bytes = size_t(512) << 10);
// TGI: body["parameters"]["grammar"], when present and not null.
std::optional<ConstraintSpec> constraint_from_tgi_text(const nlohmann::json& body, std::string_view text,
                                                       size_t max_field_bytes = size_t(512) << 10);

}  // namespace llmctl
