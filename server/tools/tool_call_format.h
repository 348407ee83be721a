// How a model writes tool calls, one class per format (Hermes / Qwen2.5 / Qwen3 `<tool_call>` JSON,
// Llama 3.x JSON with "parameters", Mistral `[TOOL_CALLS]`, Qwen3-Coder XML):
// - scan() reads an output, whole or so far, into content and calls;
// - call_tag() says how one call to a tool is written, for the structural tag that constrains
//   `required` and named calls (and, under `auto`, a call once its opening text appeared).
//
// scan() of a prefix of an output never contradicts scan() of the whole: its content is a prefix
// of the whole's content, each call's arguments a prefix of the whole's (tool_call_stream.h sends
// the differences as stream deltas). Text that may still turn out to open a call is held back.
#pragma once
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "server/tools/tool_request.h"

namespace llmctl::server {

struct ScannedCall {
  std::string name;       // valid once name_done
  bool name_done = false;
  std::string arguments;  // a JSON object's text (so far)
  bool done = false;
};

struct ToolScan {
  std::string content;  // text outside calls (whitespace-only stretches between calls dropped)
  std::vector<ScannedCall> calls;
};

// The text of one call to a tool, as a structural tag's parts: `begin` (ends with the opening
// text the trigger starts), the arguments under the tool's schema in `style` ("json" or
// "qwen_xml"), then `end`.
struct CallTag {
  std::string begin, style = "json", end;
};

class ToolCallFormat {
 public:
  virtual ~ToolCallFormat() = default;
  virtual std::string_view name() const = 0;
  // final: the output is complete (nothing is held back).
  virtual ToolScan scan(std::string_view text, bool final, const ToolRequest& tools) const = 0;
  virtual CallTag call_tag(const std::string& tool) const = 0;
  // The text every call starts with (what triggers the constraint under `auto`); empty when calls
  // cannot be told from text by a trigger (then `auto` is not constrained).
  virtual std::string trigger() const = 0;
  // Between two calls.
  virtual std::string separator() const { return "\n"; }
  // A new call's id. Mistral's templates want 9 letters and digits; OpenAI's look like call_<24>.
  virtual std::string call_id() const;
};

// By name: "hermes" (also qwen2.5, qwen3), "llama3_json", "mistral" (f[ARGS]{...}), "mistral_v3"
// ([{...}] after [TOOL_CALLS]), "qwen3_coder". Throws
// InputError on another name.
std::unique_ptr<ToolCallFormat> make_tool_call_format(std::string_view name);
// The format a chat template writes calls in (what its assistant turns with tool_calls render);
// "hermes" when the template shows none.
std::string tool_call_format_for_template(std::string_view template_source);
// The names make_tool_call_format takes, for help and errors.
const std::vector<std::string>& tool_call_format_names();

// Shared by the formats: plain text up to `end`, with whitespace-only stretches dropped and (when
// not final) a tail that could be the start of `trigger` held back.
void append_content(ToolScan& scan, std::string_view text, bool final, std::string_view trigger);
// Where the next `open` tag starts at or after pos, the text before it appended as content; npos
// when there is none (the rest is then content, a tail that may start the tag held back).
size_t next_tag(ToolScan& scan, std::string_view text, size_t pos, bool final, std::string_view open);
// An object {"name": ..., "arguments" | "parameters": {...}} read so far at text[0] == '{'.
struct JsonCallScan {
  ScannedCall call;
  bool valid = true;    // false: not a call (not an object, or complete without a string name)
  bool broken = false;  // the name was read, then the text stopped being JSON: the call ends there
  size_t end = 0;       // call.done: one past the object
};
size_t skip_space(std::string_view text, size_t i);
JsonCallScan scan_json_call(std::string_view text);

}  // namespace llmctl::server
