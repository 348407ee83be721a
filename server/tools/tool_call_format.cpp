#include "server/tools/tool_call_format.h"

#include <random>

#include "engine/core/error.h"
#include "server/tools/json_scan.h"
#include "server/tools/tool_call_formats.h"

namespace llmctl::server {

namespace {
bool all_space(std::string_view s) {
  for (char c : s)
    if (c != ' ' && c != '\t' && c != '\n' && c != '\r') return false;
  return true;
}
}  // namespace

std::string ToolCallFormat::call_id() const {
  static const char kAlnum[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  std::string id = "call_";
  for (int i = 0; i < 24; ++i) id += kAlnum[rng() % 62];
  return id;
}

size_t skip_space(std::string_view s, size_t i) {
  while (i < s.size() && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r')) ++i;
  return i;
}

void append_content(ToolScan& scan, std::string_view text, bool final, std::string_view trigger) {
  if (!final && !trigger.empty()) {
    // Hold back the longest tail that the trigger starts with.
    for (size_t k = std::min(text.size(), trigger.size() - 1); k > 0; --k) {
      if (text.substr(text.size() - k) == trigger.substr(0, k)) {
        text.remove_suffix(k);
        break;
      }
    }
  }
  if (!all_space(text)) scan.content.append(text);
}

size_t next_tag(ToolScan& s, std::string_view text, size_t pos, bool final, std::string_view open) {
  const size_t at = text.find(open, pos);
  if (at == std::string_view::npos) {
    append_content(s, text.substr(pos), final, open);
    return at;
  }
  append_content(s, text.substr(pos, at - pos), true, {});
  return at;
}

JsonCallScan scan_json_call(std::string_view text) {
  JsonCallScan out;
  const JsonObjectScan obj = scan_json_object(text);
  if (const JsonMemberScan* n = obj.find("name"); n && n->complete) {
    if (auto name = decode_json_string(n->raw)) {
      out.call.name = std::move(*name);
      out.call.name_done = true;
    }
  }
  const JsonMemberScan* a = obj.find("arguments");
  if (!a) a = obj.find("parameters");
  if (a) out.call.arguments = std::string(a->raw);
  if (!obj.valid) {
    out.valid = out.broken = out.call.name_done;
    return out;
  }
  if (obj.complete) {
    if (!out.call.name_done) {
      out.valid = false;
      return out;
    }
    if (!a) out.call.arguments = "{}";
    out.call.done = true;
    out.end = obj.end;
  }
  return out;
}

std::unique_ptr<ToolCallFormat> make_tool_call_format(std::string_view name) {
  if (name == "hermes" || name == "qwen2.5" || name == "qwen3") return make_hermes_format();
  if (name == "llama3_json" || name == "llama3") return make_llama3_json_format();
  if (name == "mistral") return make_mistral_format();
  if (name == "mistral_v3") return make_mistral_v3_format();
  if (name == "qwen3_coder") return make_qwen3_coder_format();
  std::string known;
  for (const auto& n : tool_call_format_names()) known += (known.empty() ? "" : ", ") + n;
  throw InputError("unknown tool-call format '" + std::string(name) + "' (" + known + ")");
}

const std::vector<std::string>& tool_call_format_names() {
  static const std::vector<std::string> names = {"hermes", "llama3_json", "mistral", "mistral_v3", "qwen3_coder"};
  return names;
}

std::string tool_call_format_for_template(std::string_view t) {
  auto has = [&](std::string_view s) { return t.find(s) != std::string_view::npos; };
  if (has("<function=") && has("<parameter=")) return "qwen3_coder";
  if (has("<tool_call>")) return "hermes";
  if (has("[TOOL_CALLS]")) return has("[ARGS]") ? "mistral" : "mistral_v3";
  if (has("\"parameters\": ") && has("tool_call")) return "llama3_json";
  return "hermes";
}

}  // namespace llmctl::server
