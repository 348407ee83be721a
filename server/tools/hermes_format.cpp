// <tool_call>\n{"name": "f", "arguments": {...}}\n</tool_call>, any number of them, with text
// before, between and after (Hermes 2/3, Qwen2.5, Qwen3 and the fallback for other templates).
#include "server/tools/tool_call_formats.h"

namespace llmctl::server {

namespace {
constexpr std::string_view kOpen = "<tool_call>", kClose = "</tool_call>";

class HermesFormat final : public ToolCallFormat {
 public:
  std::string_view name() const override { return "hermes"; }
  std::string trigger() const override { return std::string(kOpen); }
  CallTag call_tag(const std::string& tool) const override {
    return {std::string(kOpen) + "\n{\"name\": " + nlohmann::json(tool).dump() + ", \"arguments\": ", "json",
            "}\n" + std::string(kClose)};
  }

  ToolScan scan(std::string_view text, bool final, const ToolRequest&) const override {
    ToolScan s;
    size_t pos = 0;
    for (;;) {
      const size_t at = next_tag(s, text, pos, final, kOpen);
      if (at == std::string_view::npos) return s;
      const size_t p = skip_space(text, at + kOpen.size());
      if (p >= text.size()) {  // opened, nothing more yet
        if (final) append_content(s, text.substr(at), true, {});
        return s;
      }
      JsonCallScan c;
      if (text[p] == '{') c = scan_json_call(text.substr(p));
      else c.valid = false;
      if (!c.valid) {  // not a call after all: the tag is text
        append_content(s, kOpen, true, {});
        pos = at + kOpen.size();
        continue;
      }
      if (!c.call.done) {
        if (c.call.name_done) s.calls.push_back(c.call);
        else if (final) append_content(s, text.substr(at), true, {});
        return s;
      }
      s.calls.push_back(c.call);
      const size_t q = skip_space(text, p + c.end);
      const std::string_view rest = text.substr(q);
      if (rest.starts_with(kClose)) {
        pos = q + kClose.size();
      } else if (!final && kClose.starts_with(rest)) {
        return s;  // the closing tag is on its way
      } else {
        pos = p + c.end;  // no closing tag: the call ended with its object
      }
    }
  }
};
}  // namespace

std::unique_ptr<ToolCallFormat> make_hermes_format() { return std::make_unique<HermesFormat>(); }

}  // namespace llmctl::server
