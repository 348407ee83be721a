// Which config.json fields llmctl knows. A field it does not know may change the math (a soft-cap,
// a partial rotary factor, a norm on q and k, experts): running without it would be a silent wrong
// answer, so it is refused by name instead of ignored.
#pragma once
#include <nlohmann/json.hpp>
#include <string>

namespace llmctl {

// Throws InputError naming every top-level field of j that is neither read by parse_hf_config nor
// known not to change a forward pass (training, output and generation settings transformers writes,
// tokenizer and loading hints). Fields starting with '_' are transformers' private bookkeeping.
// moe: the architecture is a mixture of experts (its fields are known then).
void refuse_unknown_config_fields(const nlohmann::json& j, const std::string& architecture, bool moe = false);

// config.json field readers: InputError naming the field when it has the wrong type or range.
int get_int(const nlohmann::json& j, const char* key);
int get_int_or(const nlohmann::json& j, const char* key, int def);
float get_float_or(const nlohmann::json& j, const char* key, float def);
bool get_bool_or(const nlohmann::json& j, const char* key, bool def);

}  // namespace llmctl
