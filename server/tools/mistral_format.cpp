// Mistral: [TOOL_CALLS] followed by a JSON list of {"name", "arguments"} objects (v3 tokenizers:
// Mistral 7B v0.3, Nemo), or by f[ARGS]{...} (v11+: Small 3.x, Devstral, Magistral), with
// [CALL_ID]id before [ARGS] as the templates render a history. Both are read whichever the model
// is; call_tag writes the one its template uses.
#include "server/tools/tool_call_formats.h"

#include "server/tools/json_scan.h"

namespace llmctl::server {

namespace {
constexpr std::string_view kOpen = "[TOOL_CALLS]", kArgs = "[ARGS]", kCallId = "[CALL_ID]";

class MistralFormat final : public ToolCallFormat {
 public:
  explicit MistralFormat(bool list_form) : list_form_(list_form) {}
  std::string_view name() const override { return list_form_ ? "mistral_v3" : "mistral"; }
  std::string trigger() const override { return std::string(kOpen); }
  std::string separator() const override { return ""; }  // each call opens with [TOOL_CALLS]
  CallTag call_tag(const std::string& tool) const override {
    if (list_form_)
      return {std::string(kOpen) + "[{\"name\": " + nlohmann::json(tool).dump() + ", \"arguments\": ", "json", "}]"};
    return {std::string(kOpen) + tool + std::string(kArgs), "json", ""};
  }
  // Mistral's templates refuse ids that are not 9 letters or digits.
  std::string call_id() const override {
    std::string id = ToolCallFormat::call_id();  // call_ + 24 letters and digits
    return id.substr(id.size() - 9);
  }

  ToolScan scan(std::string_view text, bool final, const ToolRequest&) const override {
    ToolScan s;
    size_t pos = 0;
    for (;;) {
      const size_t at = next_tag(s, text, pos, final, kOpen);
      if (at == std::string_view::npos) return s;
      size_t p = skip_space(text, at + kOpen.size());
      if (p >= text.size()) {
        if (final) append_content(s, text.substr(at), true, {});
        return s;
      }
      const size_t next = text[p] == '[' ? scan_list(text, at, p, final, s) : scan_named(text, at, p, final, s);
      if (next == std::string_view::npos) return s;
      if (next == at) {  // not a call: the tag is text
        append_content(s, kOpen, true, {});
        pos = at + kOpen.size();
        continue;
      }
      pos = next;
    }
  }

 private:
  // [{"name": ..., "arguments": ...}, ...] at text[p] == '[', after the tag at `tag`. Returns where
  // the text goes on, npos when the output ends inside the list, or `tag` when it is not a list of
  // calls.
  static size_t scan_list(std::string_view text, size_t tag, size_t p, bool final, ToolScan& s) {
    size_t i = skip_space(text, p + 1);
    for (bool first = true;; first = false) {
      if (i >= text.size()) return std::string_view::npos;
      if (text[i] != '{') return first ? tag : std::string_view::npos;
      const JsonCallScan c = scan_json_call(text.substr(i));
      if (!c.valid) {
        if (!first) return std::string_view::npos;
        return tag;
      }
      if (!c.call.done) {
        if (c.call.name_done) s.calls.push_back(c.call);
        else if (final && first) append_content(s, text.substr(tag), true, {});
        return std::string_view::npos;
      }
      s.calls.push_back(c.call);
      i = skip_space(text, i + c.end);
      if (i >= text.size()) return std::string_view::npos;
      if (text[i] == ']') return i + 1;
      if (text[i] != ',') return i;
      i = skip_space(text, i + 1);
    }
  }

  // name[CALL_ID]id[ARGS]{...} at text[p]. Returns as scan_list.
  static size_t scan_named(std::string_view text, size_t tag, size_t p, bool final, ToolScan& s) {
    const size_t args = text.find(kArgs, p), call_id = text.find(kCallId, p);
    const size_t name_end = std::min(args, call_id);
    if (name_end == std::string_view::npos) {
      if (final) append_content(s, text.substr(tag), true, {});
      return std::string_view::npos;
    }
    ScannedCall call;
    std::string_view name = text.substr(p, name_end - p);
    while (!name.empty() && (name.back() == ' ' || name.back() == '\n')) name.remove_suffix(1);
    if (name.empty() || name.find_first_of("[{\n") != std::string_view::npos) return tag;
    call.name = std::string(name);
    call.name_done = true;
    if (args == std::string_view::npos) {  // [CALL_ID] read, [ARGS] not yet
      s.calls.push_back(call);
      return std::string_view::npos;
    }
    const size_t a = skip_space(text, args + kArgs.size());
    bool bad = false;
    const auto end = json_value_end(text.substr(a), &bad);
    call.arguments = std::string(end ? text.substr(a, *end) : text.substr(a));
    call.done = end.has_value();
    s.calls.push_back(call);
    if (!end) return std::string_view::npos;
    return a + *end;
  }

  bool list_form_;
};
}  // namespace

std::unique_ptr<ToolCallFormat> make_mistral_format() { return std::make_unique<MistralFormat>(false); }
std::unique_ptr<ToolCallFormat> make_mistral_v3_format() { return std::make_unique<MistralFormat>(true); }

}  // namespace llmctl::server
