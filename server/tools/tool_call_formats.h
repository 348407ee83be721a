// The tool-call formats (one file each); make_tool_call_format (tool_call_format.h) picks one.
#pragma once
#include <memory>

#include "server/tools/tool_call_format.h"

namespace llmctl::server {

// <tool_call>\n{"name": "f", "arguments": {...}}\n</tool_call>  (Hermes 2/3, Qwen2.5, Qwen3)
std::unique_ptr<ToolCallFormat> make_hermes_format();
// {"name": "f", "parameters": {...}}; several separated by "; ", optionally after <|python_tag|>
// (Llama 3.1 / 3.2 / 3.3 JSON tool calling): only an output that starts with the call is one.
std::unique_ptr<ToolCallFormat> make_llama3_json_format();
// [TOOL_CALLS][{"name": "f", "arguments": {...}}, ...]  (Mistral v3 tokenizers, Nemo) or
// [TOOL_CALLS]f[ARGS]{...}  (v11+: Small 3.x, Devstral; [CALL_ID]id before [ARGS] is read too)
std::unique_ptr<ToolCallFormat> make_mistral_format();     // writes the v11+ form
std::unique_ptr<ToolCallFormat> make_mistral_v3_format();  // writes the list form
// <tool_call>\n<function=f>\n<parameter=p>\nvalue\n</parameter>\n</function>\n</tool_call>
// (Qwen3-Coder): values are converted by the tool's schema (a string stays a string).
std::unique_ptr<ToolCallFormat> make_qwen3_coder_format();

}  // namespace llmctl::server
