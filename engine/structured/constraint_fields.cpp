#include "engine/structured/constraint_fields.h"

#include <algorithm>
#include <array>
#include <string>

#include "engine/core/error.h"
#include "engine/core/json_bounded.h"
#include "engine/core/json_raw.h"

namespace llmctl {

using ojson = nlohmann::ordered_json;

namespace {

constexpr std::array<std::string_view, 6> kFields = {"response_format", "structured_outputs", "guided_json",
                                                      "guided_regex",    "guided_choice",      "guided_grammar"};

std::string need_string(const ojson& v, const std::string& field) {
  LLM_REQUIRE(v.is_string()) << "field '" << field << "' must be a string";
  return v.get<std::string>();
}

// A schema given as an object, or as a string holding one (vLLM accepts both).
std::string schema_text(const ojson& v, const std::string& field) {
  if (v.is_string()) return v.get<std::string>();
  LLM_REQUIRE(v.is_object() || v.is_boolean()) << "field '" << field << "' must be a JSON schema (an object)";
  return v.dump();
}

std::vector<std::string> choice_list(const ojson& v, const std::string& field) {
  LLM_REQUIRE(v.is_array()) << "field '" << field << "' must be a list of strings";
  std::vector<std::string> out;
  for (const ojson& c : v) out.push_back(need_string(c, field + "[]"));
  return out;
}

ConstraintSpec from_response_format(const ojson& v) {
  LLM_REQUIRE(v.is_object()) << "field 'response_format' must be an object";
  LLM_REQUIRE(v.contains("type")) << "response_format.type is required";
  const std::string type = need_string(v["type"], "response_format.type");
  for (const auto& [k, _] : v.items())
    LLM_REQUIRE(k == "type" || (k == "json_schema" && type == "json_schema"))
        << "response_format." << k << " is not supported with type \"" << type << "\"";
  ConstraintSpec s;
  s.field = "response_format";
  if (type == "json_object") {
    s.kind = ConstraintKind::json_object;
    return s;
  }
  LLM_REQUIRE(type == "json_schema") << "response_format.type must be \"text\", \"json_object\" or \"json_schema\", got \""
                                     << type << "\"";
  LLM_REQUIRE(v.contains("json_schema") && v["json_schema"].is_object())
      << "response_format.json_schema (an object with \"name\" and \"schema\") is required";
  const ojson& js = v["json_schema"];
  for (const auto& [k, _] : js.items())
    LLM_REQUIRE(k == "name" || k == "schema" || k == "strict" || k == "description")
        << "response_format.json_schema." << k << " is not supported";
  LLM_REQUIRE(js.contains("name")) << "response_format.json_schema.name is required";
  const std::string name = need_string(js["name"], "response_format.json_schema.name");
  LLM_REQUIRE(!name.empty() && name.size() <= 64) << "response_format.json_schema.name must have 1 to 64 characters";
  s.kind = ConstraintKind::json_schema;
  s.field = "response_format.json_schema.schema";
  // OpenAI's default schema, when none is given, is any JSON object.
  if (!js.contains("schema") || js["schema"].is_null()) {
    s.kind = ConstraintKind::json_object;
  } else {
    s.text = schema_text(js["schema"], s.field);
  }
  if (js.contains("strict") && !js["strict"].is_null()) {
    LLM_REQUIRE(js["strict"].is_boolean()) << "field 'response_format.json_schema.strict' must be a boolean";
    s.strict = js["strict"].get<bool>();  // false: JSON Schema's own defaults (other keys allowed)
  }
  return s;
}

ConstraintSpec from_structured_outputs(const ojson& v) {
  LLM_REQUIRE(v.is_object()) << "field 'structured_outputs' must be an object";
  std::optional<ConstraintSpec> out;
  for (const auto& [k, val] : v.items()) {
    if (val.is_null()) continue;
    const std::string field = "structured_outputs." + k;
    ConstraintSpec s;
    s.field = field;
    if (k == "json") {
      s.kind = ConstraintKind::json_schema, s.text = schema_text(val, field);
    } else if (k == "regex") {
      s.kind = ConstraintKind::regex, s.text = need_string(val, field);
    } else if (k == "choice") {
      s.kind = ConstraintKind::choice, s.choices = choice_list(val, field);
    } else if (k == "grammar") {
      s.kind = ConstraintKind::grammar, s.text = need_string(val, field);
    } else if (k == "json_object") {
      LLM_REQUIRE(val.is_boolean()) << "field '" << field << "' must be a boolean";
      if (!val.get<bool>()) continue;
      s.kind = ConstraintKind::json_object;
    } else if (k == "disable_any_whitespace" || k == "disable_additional_properties" || k == "whitespace_pattern") {
      LLM_REQUIRE(val.is_boolean() || val.is_string()) << "field '" << field << "' has the wrong type";
      continue;  // output is always compact JSON; a schema's own additionalProperties is honoured
    } else {
      throw InputError("structured_outputs." + k + " is not supported (json, regex, choice, grammar, json_object)");
    }
    LLM_REQUIRE(!out) << "structured_outputs: give one of json, regex, choice, grammar or json_object";
    out = std::move(s);
  }
  LLM_REQUIRE(out) << "structured_outputs: give one of json, regex, choice, grammar or json_object";
  return *out;
}

}  // namespace

bool is_constraint_field(std::string_view key) {
  for (std::string_view f : kFields)
    if (key == f) return true;
  return false;
}

std::optional<ConstraintSpec> constraint_from_request(const ojson& body) {
  LLM_REQUIRE(body.is_object()) << "the request must be a JSON object";
  std::optional<ConstraintSpec> out;
  std::string from;
  for (const auto& [k, v] : body.items()) {
    if (!is_constraint_field(k) || v.is_null()) continue;
    std::optional<ConstraintSpec> s;
    if (k == "response_format") {
      if (v.is_object() && v.contains("type") && v["type"] == "text" && v.size() == 1) continue;
      s = from_response_format(v);
    } else if (k == "structured_outputs") {
      s = from_structured_outputs(v);
    } else {
      ConstraintSpec g;
      g.field = k;
      if (k == "guided_json") g.kind = ConstraintKind::json_schema, g.text = schema_text(v, k);
      else if (k == "guided_regex") g.kind = ConstraintKind::regex, g.text = need_string(v, k);
      else if (k == "guided_choice") g.kind = ConstraintKind::choice, g.choices = choice_list(v, k);
      else g.kind = ConstraintKind::grammar, g.text = need_string(v, k);
      s = std::move(g);
    }
    LLM_REQUIRE(!out) << "'" << from << "' and '" << k << "' both constrain the output: give one";
    out = std::move(s);
    from = k;
  }
  return out;
}

ConstraintSpec constraint_from_tgi_grammar(const ojson& g) {
  LLM_REQUIRE(g.is_object() && g.contains("type") && g.contains("value"))
      << "parameters.grammar must be an object with \"type\" and \"value\"";
  for (const auto& [k, _] : g.items())
    LLM_REQUIRE(k == "type" || k == "value") << "parameters.grammar." << k << " is not supported";
  const std::string type = need_string(g["type"], "parameters.grammar.type");
  ConstraintSpec s;
  s.field = "parameters.grammar.value";
  if (type == "json" || type == "json_object") {
    s.kind = ConstraintKind::json_schema, s.text = schema_text(g["value"], s.field);
  } else if (type == "regex") {
    s.kind = ConstraintKind::regex, s.text = need_string(g["value"], s.field);
  } else {
    throw InputError("parameters.grammar.type must be \"json\" or \"regex\", got \"" + type + "\"");
  }
  return s;
}

namespace {

ojson ordered_member(std::string_view text, std::initializer_list<std::string_view> path, const std::string& field,
                     size_t max_bytes) {
  const std::optional<std::string_view> raw = raw_json_member(text, path);
  // (A key spelled with JSON escapes is the same key to the parser but not to the scan: refused
  // rather than read from elsewhere.)
  LLM_REQUIRE(raw) << "field '" << field << "': write the field's name without escapes";
  LLM_REQUIRE(raw->size() <= max_bytes) << "field '" << field << "' is " << raw->size() << " bytes, at most "
                                        << max_bytes;
  // (its nesting was bounded by the body's parse; the ordered parse bounds each object's keys)
  return parse_ordered_json_bounded(*raw, kRequestJsonLimits, "field '" + field + "'");
}

}  // namespace

std::optional<ConstraintSpec> constraint_from_request_text(const nlohmann::json& body, std::string_view text,
                                                           size_t max_field_bytes) {
  if (!body.is_object()) return std::nullopt;
  ojson fields = ojson::object();
  for (std::string_view f : kFields) {
    const std::string key(f);
    if (body.contains(key)) fields[key] = ordered_member(text, {f}, key, max_field_bytes);
  }
  return constraint_from_request(fields);
}

std::optional<ConstraintSpec> constraint_from_tgi_text(const nlohmann::json& body, std::string_view text,
                                                       size_t max_field_bytes) {
  if (!body.is_object() || !body.contains("parameters") || !body["parameters"].is_object()) return std::nullopt;
  const nlohmann::json& p = body["parameters"];
  if (!p.contains("grammar") || p["grammar"].is_null()) return std::nullopt;
  return constraint_from_tgi_grammar(ordered_member(text, {"parameters", "grammar"}, "parameters.grammar", max_field_bytes));
}

}  // namespace llmctl
