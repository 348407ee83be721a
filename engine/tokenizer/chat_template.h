// Chat templates: a small Jinja interpreter covering what HF chat templates use, rendering
// exactly as Python jinja2 does for the same context.
#pragma once
#include <string>

#include <nlohmann/json.hpp>

namespace llmctl {

// Renders `source` (Jinja) with `context`, e.g. {"messages": [...], "add_generation_prompt": true,
// "bos_token": "<s>", "eos_token": "</s>"}. Throws InputError on syntax errors (with line) and on
// raise_exception() called by the template.
std::string render_chat_template(const std::string& source, const nlohmann::json& context);

}  // namespace llmctl
