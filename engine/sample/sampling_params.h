// Per-request sampling parameters (validated before a request is accepted).
//
// Field names and meanings follow vLLM / OpenAI. Logits processing order (see logits_processors.h):
// logit_bias -> min_tokens suppression -> presence/frequency -> repetition -> temperature -> top-k
// -> top-p -> min-p -> draw.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace llmctl {

class CompiledConstraint;  // engine/structured/constraint.h

struct SamplingParams {
  float temperature = 1.0f;         // >= 0; 0 = greedy (top-k/top-p/min-p then do nothing)
  int top_k = 0;                    // 0 or -1 = off
  float top_p = 1.0f;               // (0, 1]
  float min_p = 0.0f;               // [0, 1]
  float presence_penalty = 0.0f;    // [-2, 2], OpenAI: -= p if the token was generated at least once
  float frequency_penalty = 0.0f;   // [-2, 2], OpenAI: -= f * times the token was generated
  float repetition_penalty = 1.0f;  // > 0; 1 = off (HF: over prompt + generated, divides positive logits)
  std::map<int, float> logit_bias;  // token id -> added to its logit, [-100, 100]
  std::optional<uint64_t> seed;     // same seed, same output
  int max_tokens = 256;             // >= 1
  int min_tokens = 0;               // [0, max_tokens]: EOS and stop_token_ids are suppressed before it
  int n = 1;                        // sequences returned, >= 1
  std::optional<int> best_of;       // sequences generated (>= n), the n best returned; unset = n
  std::optional<int> logprobs;      // top-N logprobs per generated token, [0, 20]; unset = none
  std::optional<int> prompt_logprobs;  // top-N logprobs per prompt position, [0, 20]; unset = none
  std::vector<std::string> stop;       // stop strings, never part of the output
  std::vector<int> stop_token_ids;     // tokens that end the sequence like EOS
  bool ignore_eos = false;
  // Structured output: the tokens drawn follow this grammar (a JSON schema, regex, ...), compiled
  // for the model's vocabulary by GrammarCompiler (engine/structured/grammar_compiler.h) before the
  // request is submitted; null = unconstrained. Not read by from_json (the server parses it).
  std::shared_ptr<const CompiledConstraint> constraint;

  bool greedy() const { return temperature == 0.0f; }
  int num_generated_sequences() const { return best_of ? *best_of : n; }

  // Throws InputError naming the bad field. vocab_size > 0 also checks token ids (logit_bias,
  // stop_token_ids) against the vocabulary; 0 skips those range checks (vocabulary not known yet).
  void validate(int vocab_size = 0) const;

  // From a vLLM / OpenAI style JSON object: temperature, top_p, top_k, min_p, max_tokens, n,
  // best_of, stop (string or list), stop_token_ids, seed, presence_penalty, frequency_penalty,
  // repetition_penalty, logit_bias ({"id": bias}), logprobs, prompt_logprobs, min_tokens,
  // ignore_eos. A JSON null means "the default". Fields absent from j keep their value in base.
  // Keys listed in ignore_keys (e.g. "prompt", "messages") are skipped; any other unknown key, and
  // any value of the wrong type, throws InputError naming the field. The result is validated
  // against vocab_size (see validate).
  static SamplingParams from_json(const nlohmann::json& j, int vocab_size,
                                  const std::vector<std::string>& ignore_keys, const SamplingParams& base);
  static SamplingParams from_json(const nlohmann::json& j, int vocab_size,
                                  const std::vector<std::string>& ignore_keys = {});
};

}  // namespace llmctl
