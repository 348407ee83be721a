// The constraint a request's tools put on its output, as an xgrammar structural tag:
// - required: one or more calls (one when parallel_tool_calls is false), nothing else;
// - named: exactly one call to that tool;
// - auto: free text, in which a call, once its opening text (the format's trigger) appeared,
//   follows the called tool's schema to its end;
// - none: nothing (and `auto` for a format without a trigger).
// The arguments follow each tool's `parameters` schema strictly (no keys it does not list).
#pragma once
#include <optional>

#include "engine/structured/constraint.h"
#include "server/tools/tool_call_format.h"
#include "server/tools/tool_request.h"

namespace llmctl::server {

std::optional<ConstraintSpec> tool_call_constraint(const ToolCallFormat& format, const ToolRequest& tools);

}  // namespace llmctl::server
