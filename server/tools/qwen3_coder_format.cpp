// Qwen3-Coder's XML calls:
//   <tool_call>\n<function=f>\n<parameter=p>\nvalue\n</parameter>\n...</function>\n</tool_call>
// The arguments become a JSON object, parameter by parameter ({"p": value, ...}), each value read
// by the type the tool's schema gives the parameter: strings stay strings (blanks around a value
// are the format's, not the value's).
#include "server/tools/tool_call_formats.h"

#include <cctype>

#include "engine/core/error.h"
#include "engine/core/json_bounded.h"

namespace llmctl::server {

namespace {
constexpr std::string_view kOpen = "<tool_call>", kClose = "</tool_call>", kFunction = "<function=",
                           kFunctionEnd = "</function>", kParam = "<parameter=", kParamEnd = "</parameter>";

// A JSON string of text the model wrote (bytes that are not UTF-8 become U+FFFD).
std::string json_string(std::string_view text) {
  return nlohmann::json(std::string(text)).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::vector<std::string> schema_types(const ToolRequest& tools, const std::string& fn, const std::string& param) {
  const ToolSpec* t = tools.find(fn);
  if (!t || !t->parameters.is_object()) return {};
  auto props = t->parameters.find("properties");
  if (props == t->parameters.end() || !props->is_object()) return {};
  auto p = props->find(param);
  if (p == props->end() || !p->is_object()) return {};
  auto type = p->find("type");
  std::vector<std::string> out;
  if (type == p->end()) {
    if (p->contains("enum") || p->contains("const")) out.push_back("string");
    return out;
  }
  if (type->is_string()) out.push_back(type->get<std::string>());
  if (type->is_array())
    for (const auto& x : *type)
      if (x.is_string()) out.push_back(x.get<std::string>());
  return out;
}

// The JSON text of one parameter's value.
std::string param_json(std::string_view value, const std::vector<std::string>& types) {
  std::string lower(value);
  for (char& c : lower) c = char(std::tolower(static_cast<unsigned char>(c)));
  for (const std::string& t : types) {
    if (t == "string") break;
    if (t == "null" && (lower == "null" || lower == "none")) return "null";
    if (t == "boolean" && (lower == "true" || lower == "false")) return lower;
    if (t == "integer" || t == "number" || t == "object" || t == "array") {
      nlohmann::json j;  // only its type is read: the value is kept as the model wrote it
      try {
        j = parse_json_bounded(value, kRequestJsonLimits, "a parameter value");
      } catch (const InputError&) {
        continue;
      }
      if ((t == "integer" && j.is_number_integer()) || (t == "number" && j.is_number()) ||
          (t == "object" && j.is_object()) || (t == "array" && j.is_array()))
        return std::string(value);
    }
  }
  return json_string(value);
}

class Qwen3CoderFormat final : public ToolCallFormat {
 public:
  std::string_view name() const override { return "qwen3_coder"; }
  std::string trigger() const override { return std::string(kOpen); }
  CallTag call_tag(const std::string& tool) const override {
    std::string begin = "<tool_call>\n<function=";
    begin.append(tool).append(">\n");
    return {std::move(begin), "qwen_xml", "\n</function>\n</tool_call>"};
  }

  ToolScan scan(std::string_view text, bool final, const ToolRequest& tools) const override {
    ToolScan s;
    size_t pos = 0;
    for (;;) {
      const size_t at = next_tag(s, text, pos, final, kOpen);
      if (at == std::string_view::npos) return s;
      const size_t p = skip_space(text, at + kOpen.size());
      const std::string_view rest = text.substr(p);
      if (!rest.starts_with(kFunction)) {
        if (!final && kFunction.starts_with(rest)) return s;  // on its way
        if (final && rest.empty()) {
          append_content(s, text.substr(at), true, {});
          return s;
        }
        append_content(s, kOpen, true, {});  // not a call: the tag is text
        pos = at + kOpen.size();
        continue;
      }
      const size_t name_begin = p + kFunction.size();
      const size_t name_end = text.find('>', name_begin);
      if (name_end == std::string_view::npos) {
        if (final) append_content(s, text.substr(at), true, {});
        return s;
      }
      ScannedCall call;
      call.name = std::string(text.substr(name_begin, name_end - name_begin));
      call.name_done = true;
      call.arguments.assign(1, '{');
      size_t q = name_end + 1;
      bool any = false;
      for (;;) {
        q = skip_space(text, q);
        const std::string_view r = text.substr(q);
        if (r.starts_with(kFunctionEnd)) {
          call.arguments += "}";
          call.done = true;
          q = skip_space(text, q + kFunctionEnd.size());
          if (text.substr(q).starts_with(kClose)) q += kClose.size();
          else if (!final && kClose.starts_with(text.substr(q))) q = text.size();
          break;
        }
        if (!r.starts_with(kParam)) {  // incomplete, or not the format: the call ends here
          s.calls.push_back(call);
          return s;
        }
        const size_t key_begin = q + kParam.size();
        const size_t key_end = text.find('>', key_begin);
        const size_t value_end = key_end == std::string_view::npos ? key_end : text.find(kParamEnd, key_end + 1);
        if (value_end == std::string_view::npos) {
          s.calls.push_back(call);
          return s;
        }
        const std::string key(text.substr(key_begin, key_end - key_begin));
        std::string_view value = text.substr(key_end + 1, value_end - key_end - 1);
        // The format's own blanks around the value (the template writes newlines; a grammar allows
        // any blanks there) are not the value's.
        while (!value.empty() && std::isspace(static_cast<unsigned char>(value.front()))) value.remove_prefix(1);
        while (!value.empty() && std::isspace(static_cast<unsigned char>(value.back()))) value.remove_suffix(1);
        if (any) call.arguments.append(", ");
        call.arguments.append(json_string(key)).append(": ").append(param_json(value, schema_types(tools, call.name, key)));
        any = true;
        q = value_end + kParamEnd.size();
      }
      s.calls.push_back(call);
      pos = q;
    }
  }
};
}  // namespace

std::unique_ptr<ToolCallFormat> make_qwen3_coder_format() { return std::make_unique<Qwen3CoderFormat>(); }

}  // namespace llmctl::server
