// Turning user input into prompt token ids: plain text (BOS added when the tokenizer asks for it)
// or a chat rendered through the model's own chat template.
#pragma once
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/tokenizer/tokenizer.h"

namespace llmctl {

// messages: [{"role": ..., "content": ...}, ...]. Throws InputError when the model has no chat
// template or the template rejects the conversation.
std::string render_chat(const Tokenizer& tok, const nlohmann::json& messages, bool add_generation_prompt = true);

std::vector<int> encode_prompt(const Tokenizer& tok, const std::string& text);
std::vector<int> encode_chat(const Tokenizer& tok, const nlohmann::json& messages);

}  // namespace llmctl
