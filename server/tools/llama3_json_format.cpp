// Llama 3.x JSON tool calling: the whole output is {"name": "f", "parameters": {...}}, or several
// separated by ";", optionally after <|python_tag|>. An output that starts otherwise is content
// (the first character that is not blank decides, as in vLLM's llama3_json parser).
#include "server/tools/tool_call_formats.h"

namespace llmctl::server {

namespace {
constexpr std::string_view kPythonTag = "<|python_tag|>";

class Llama3JsonFormat final : public ToolCallFormat {
 public:
  std::string_view name() const override { return "llama3_json"; }
  // A call is known by where it starts (the output's beginning), not by a text that may appear
  // anywhere: `auto` is left unconstrained.
  std::string trigger() const override { return ""; }
  std::string separator() const override { return "; "; }
  CallTag call_tag(const std::string& tool) const override {
    return {"{\"name\": " + nlohmann::json(tool).dump() + ", \"parameters\": ", "json", "}"};
  }

  ToolScan scan(std::string_view text, bool final, const ToolRequest&) const override {
    ToolScan s;
    size_t p = skip_space(text, 0);
    if (p >= text.size()) return s;  // blank so far
    if (text.substr(p).starts_with(kPythonTag)) {
      p = skip_space(text, p + kPythonTag.size());
      if (p >= text.size()) return s;
    } else if (!final && kPythonTag.starts_with(text.substr(p))) {
      return s;
    }
    if (text[p] != '{') {
      append_content(s, text, true, {});
      return s;
    }
    for (bool first = true;; first = false) {
      const JsonCallScan c = scan_json_call(text.substr(p));
      if (!c.valid) {  // not a call: everything from here is text
        append_content(s, first ? text : text.substr(p), true, {});
        return s;
      }
      if (!c.call.done) {
        if (c.call.name_done) s.calls.push_back(c.call);
        else if (final) append_content(s, first ? text : text.substr(p), true, {});
        return s;
      }
      s.calls.push_back(c.call);
      const size_t q = skip_space(text, p + c.end);
      if (q >= text.size()) return s;
      if (text[q] != ';') {  // text after the calls
        append_content(s, text.substr(p + c.end), true, {});
        return s;
      }
      p = skip_space(text, q + 1);
      if (p >= text.size()) return s;
      if (text[p] != '{') {
        append_content(s, text.substr(q + 1), true, {});
        return s;
      }
    }
  }
};
}  // namespace

std::unique_ptr<ToolCallFormat> make_llama3_json_format() { return std::make_unique<Llama3JsonFormat>(); }

}  // namespace llmctl::server
