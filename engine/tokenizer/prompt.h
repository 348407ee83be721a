// Turning user input into prompt token ids: plain text (BOS added when the tokenizer asks for it)
// or a chat rendered through the model's own chat template.
#pragma once
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/tokenizer/jinja/limits.h"
#include "engine/tokenizer/tokenizer.h"

namespace llmctl {

// messages: [{"role": ..., "content": ...}, ...], rendered with the template compiled at load.
// Throws InputError when the model has no chat template, when it did not parse, when the template
// rejects the conversation or when rendering exceeds `limits` (a server passes its request
// deadline and cancel flag there).
// extra: more template variables (a request's chat_template_kwargs, e.g. enable_thinking), set
// after the defaults; "messages" among them is refused.
std::string render_chat(const Tokenizer& tok, const nlohmann::json& messages, bool add_generation_prompt = true,
                        const RenderLimits& limits = {}, const nlohmann::json& extra = nlohmann::json::object());
// The same with messages and extra variables (e.g. `tools`) in the order they were written: a
// template that prints them (`tools | tojson`, a call's arguments) shows the client's key order.
std::string render_chat_ordered(const Tokenizer& tok, const nlohmann::ordered_json& messages, bool add_generation_prompt,
                                const RenderLimits& limits, const nlohmann::ordered_json& extra);

std::vector<int> encode_prompt(const Tokenizer& tok, const std::string& text);
std::vector<int> encode_chat(const Tokenizer& tok, const nlohmann::json& messages);

// One prompt as a JSON value: a non-empty string (encoded as above) or a non-empty array of token
// ids, each in [0, vocab). `field` names the value in errors. Throws InputError.
std::vector<int> prompt_from_json(const Tokenizer& tok, const nlohmann::json& value, int vocab,
                                  const std::string& field = "prompt");

}  // namespace llmctl
