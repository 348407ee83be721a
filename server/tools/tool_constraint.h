// The constraint a request's tools put on its output, as an xgrammar structural tag:
// - required: one or more calls (one when parallel_tool_calls is false), nothing else;
// - named: exactly one call to that tool;
// - auto: free text, in which a call, once its opening text (the format's trigger) appeared,
//   follows the called tool's schema to its end;
// - none: nothing (and `auto` for a format without a trigger, or whose trigger the tokenizer holds
//   as one special token: the grammar engine sees no text in special tokens, so under a triggered
//   tag the model could never open a call; Mistral's [TOOL_CALLS] on Mistral's own tokenizers).
// The arguments follow each tool's `parameters` schema strictly (no keys it does not list).
#pragma once
#include <optional>
#include <string_view>

#include "engine/structured/constraint.h"
#include "engine/tokenizer/tokenizer.h"
#include "server/tools/tool_call_format.h"
#include "server/tools/tool_request.h"

namespace llmctl::server {

std::optional<ConstraintSpec> tool_call_constraint(const ToolCallFormat& format, const ToolRequest& tools,
                                                   bool trigger_is_special = false);

// Whether `text` is one special token of the tokenizer (how a tool-call trigger is checked).
bool is_special_token_text(const Tokenizer& tok, std::string_view text);

}  // namespace llmctl::server
