#include "server/tools/tool_constraint.h"

namespace llmctl::server {

namespace {
using ojson = nlohmann::ordered_json;

ojson tag_for(const ToolCallFormat& format, const ToolSpec& tool) {
  const CallTag t = format.call_tag(tool.name);
  // Blanks between the arguments' parts are free but short: a small model cannot wander into them.
  const ojson content = {{"type", t.style == "qwen_xml" ? "qwen_xml_parameter" : "json_schema"},
                         {"json_schema", tool.parameters},
                         {"max_whitespace_cnt", 2}};
  return {{"type", "tag"}, {"begin", t.begin}, {"content", content}, {"end", t.end}};
}
}  // namespace

bool is_special_token_text(const Tokenizer& tok, std::string_view text) {
  if (text.empty()) return false;
  const std::vector<int> ids = tok.encode(text, true);
  return ids.size() == 1 && tok.is_special(ids[0]);
}

std::optional<ConstraintSpec> tool_call_constraint(const ToolCallFormat& format, const ToolRequest& r,
                                                   bool trigger_is_special) {
  if (r.tools.empty() || r.choice == ToolChoice::none) return std::nullopt;
  if (r.choice == ToolChoice::automatic && (format.trigger().empty() || trigger_is_special)) return std::nullopt;
  ojson tags = ojson::array();
  for (const ToolSpec& t : r.tools)
    if (r.choice != ToolChoice::named || t.name == r.named) tags.push_back(tag_for(format, t));
  ojson fmt;
  if (r.choice == ToolChoice::automatic) {
    fmt = {{"type", "triggered_tags"},
           {"triggers", ojson::array({format.trigger()})},
           {"tags", tags},
           {"at_least_one", false},
           {"stop_after_first", !r.parallel}};
  } else {
    fmt = {{"type", "tags_with_separator"},
           {"tags", tags},
           {"separator", format.separator()},
           {"at_least_one", true},
           {"stop_after_first", r.choice == ToolChoice::named || !r.parallel}};
  }
  ConstraintSpec spec;
  spec.kind = ConstraintKind::structural_tag;
  spec.text = ojson{{"type", "structural_tag"}, {"format", fmt}}.dump();
  spec.field = "tools";
  return spec;
}

}  // namespace llmctl::server
