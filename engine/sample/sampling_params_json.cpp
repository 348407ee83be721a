// SamplingParams::from_json: vLLM / OpenAI field names, strict types, unknown fields rejected.
#include <algorithm>
#include <charconv>
#include <climits>
#include <functional>
#include <string_view>
#include <utility>

#include <nlohmann/json.hpp>

#include "engine/core/error.h"
#include "engine/sample/sampling_params.h"

namespace llmctl {

namespace {
using json = nlohmann::json;

std::string type_of(const json& v) { return v.type_name(); }

float get_float(const json& v, std::string_view field) {
  LLM_REQUIRE(v.is_number()) << "field '" << field << "' must be a number, got " << type_of(v);
  return float(v.get<double>());
}

int get_int(const json& v, std::string_view field) {
  LLM_REQUIRE(v.is_number_integer()) << "field '" << field << "' must be an integer, got "
                                     << (v.is_number_float() ? "a floating-point number" : type_of(v));
  if (v.is_number_unsigned()) {
    const uint64_t u = v.get<uint64_t>();
    LLM_REQUIRE(u <= uint64_t(INT_MAX)) << "field '" << field << "' is too large: " << u;
    return int(u);
  }
  const int64_t i = v.get<int64_t>();
  LLM_REQUIRE(i >= INT_MIN && i <= INT_MAX) << "field '" << field << "' is out of range: " << i;
  return int(i);
}

bool get_bool(const json& v, std::string_view field) {
  LLM_REQUIRE(v.is_boolean()) << "field '" << field << "' must be true or false, got " << type_of(v);
  return v.get<bool>();
}

uint64_t get_seed(const json& v) {
  LLM_REQUIRE(v.is_number_integer()) << "field 'seed' must be an integer, got "
                                     << (v.is_number_float() ? "a floating-point number" : type_of(v));
  if (v.is_number_unsigned()) return v.get<uint64_t>();
  return uint64_t(v.get<int64_t>());  // negative seeds wrap: any integer is a seed
}

std::vector<std::string> get_stop(const json& v) {
  if (v.is_string()) return {v.get<std::string>()};
  LLM_REQUIRE(v.is_array()) << "field 'stop' must be a string or a list of strings, got " << type_of(v);
  std::vector<std::string> out;
  for (const auto& s : v) {
    LLM_REQUIRE(s.is_string()) << "field 'stop' must be a string or a list of strings, found " << type_of(s);
    out.push_back(s.get<std::string>());
  }
  return out;
}

std::vector<int> get_int_list(const json& v, std::string_view field) {
  LLM_REQUIRE(v.is_array()) << "field '" << field << "' must be a list of integers, got " << type_of(v);
  std::vector<int> out;
  for (const auto& x : v) out.push_back(get_int(x, field));
  return out;
}

std::map<int, float> get_logit_bias(const json& v) {
  LLM_REQUIRE(v.is_object()) << "field 'logit_bias' must be an object of token id -> bias, got " << type_of(v);
  std::map<int, float> out;
  for (const auto& [key, bias] : v.items()) {
    int id = 0;
    const char* end = key.data() + key.size();
    auto [ptr, ec] = std::from_chars(key.data(), end, id);
    LLM_REQUIRE(!key.empty() && ec == std::errc() && ptr == end)
        << "field 'logit_bias': key '" << key << "' is not an integer token id";
    LLM_REQUIRE(bias.is_number()) << "field 'logit_bias': the bias of token " << key << " must be a number, got "
                                  << type_of(bias);
    out[id] = float(bias.get<double>());
  }
  return out;
}

using Setter = std::function<void(SamplingParams&, const json&)>;

const std::vector<std::pair<std::string_view, Setter>>& setters() {
  static const std::vector<std::pair<std::string_view, Setter>> table = {
      {"temperature", [](SamplingParams& p, const json& v) { p.temperature = get_float(v, "temperature"); }},
      {"top_p", [](SamplingParams& p, const json& v) { p.top_p = get_float(v, "top_p"); }},
      {"top_k", [](SamplingParams& p, const json& v) { p.top_k = get_int(v, "top_k"); }},
      {"min_p", [](SamplingParams& p, const json& v) { p.min_p = get_float(v, "min_p"); }},
      {"max_tokens", [](SamplingParams& p, const json& v) { p.max_tokens = get_int(v, "max_tokens"); }},
      {"min_tokens", [](SamplingParams& p, const json& v) { p.min_tokens = get_int(v, "min_tokens"); }},
      {"n", [](SamplingParams& p, const json& v) { p.n = get_int(v, "n"); }},
      {"best_of", [](SamplingParams& p, const json& v) { p.best_of = get_int(v, "best_of"); }},
      {"stop", [](SamplingParams& p, const json& v) { p.stop = get_stop(v); }},
      {"stop_token_ids", [](SamplingParams& p, const json& v) { p.stop_token_ids = get_int_list(v, "stop_token_ids"); }},
      {"seed", [](SamplingParams& p, const json& v) { p.seed = get_seed(v); }},
      {"presence_penalty", [](SamplingParams& p, const json& v) { p.presence_penalty = get_float(v, "presence_penalty"); }},
      {"frequency_penalty",
       [](SamplingParams& p, const json& v) { p.frequency_penalty = get_float(v, "frequency_penalty"); }},
      {"repetition_penalty",
       [](SamplingParams& p, const json& v) { p.repetition_penalty = get_float(v, "repetition_penalty"); }},
      {"logit_bias", [](SamplingParams& p, const json& v) { p.logit_bias = get_logit_bias(v); }},
      {"logprobs", [](SamplingParams& p, const json& v) { p.logprobs = get_int(v, "logprobs"); }},
      {"prompt_logprobs", [](SamplingParams& p, const json& v) { p.prompt_logprobs = get_int(v, "prompt_logprobs"); }},
      {"ignore_eos", [](SamplingParams& p, const json& v) { p.ignore_eos = get_bool(v, "ignore_eos"); }},
  };
  return table;
}

// The default of each field (what a JSON null means).
void reset_field(SamplingParams& p, std::string_view key, const SamplingParams& base) {
  const SamplingParams& d = base;
  if (key == "temperature") p.temperature = d.temperature;
  else if (key == "top_p") p.top_p = d.top_p;
  else if (key == "top_k") p.top_k = d.top_k;
  else if (key == "min_p") p.min_p = d.min_p;
  else if (key == "max_tokens") p.max_tokens = d.max_tokens;
  else if (key == "min_tokens") p.min_tokens = d.min_tokens;
  else if (key == "n") p.n = d.n;
  else if (key == "best_of") p.best_of = d.best_of;
  else if (key == "stop") p.stop = d.stop;
  else if (key == "stop_token_ids") p.stop_token_ids = d.stop_token_ids;
  else if (key == "seed") p.seed = d.seed;
  else if (key == "presence_penalty") p.presence_penalty = d.presence_penalty;
  else if (key == "frequency_penalty") p.frequency_penalty = d.frequency_penalty;
  else if (key == "repetition_penalty") p.repetition_penalty = d.repetition_penalty;
  else if (key == "logit_bias") p.logit_bias = d.logit_bias;
  else if (key == "logprobs") p.logprobs = d.logprobs;
  else if (key == "prompt_logprobs") p.prompt_logprobs = d.prompt_logprobs;
  else if (key == "ignore_eos") p.ignore_eos = d.ignore_eos;
}
}  // namespace

SamplingParams SamplingParams::from_json(const nlohmann::json& j, int vocab_size,
                                         const std::vector<std::string>& ignore_keys, const SamplingParams& base) {
  LLM_REQUIRE(j.is_object()) << "sampling parameters must be a JSON object, got " << type_of(j);
  SamplingParams p = base;
  const auto& table = setters();
  for (const auto& [key, value] : j.items()) {
    if (std::find(ignore_keys.begin(), ignore_keys.end(), key) != ignore_keys.end()) continue;
    auto it = std::find_if(table.begin(), table.end(), [&](const auto& e) { return e.first == key; });
    if (it == table.end()) {
      std::string allowed;
      for (const auto& e : table) allowed += (allowed.empty() ? "" : ", ") + std::string(e.first);
      LLM_THROW() << "unknown field '" << key << "' (sampling fields: " << allowed << ")";
    }
    if (value.is_null())
      reset_field(p, key, base);
    else
      it->second(p, value);
  }
  p.validate(vocab_size);
  return p;
}

SamplingParams SamplingParams::from_json(const nlohmann::json& j, int vocab_size,
                                         const std::vector<std::string>& ignore_keys) {
  return from_json(j, vocab_size, ignore_keys, SamplingParams{});
}

}  // namespace llmctl
