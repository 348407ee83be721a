#include "cli/batch_generate.h"

#include <chrono>
#include <istream>
#include <ostream>
#include <string>

#include <nlohmann/json.hpp>

#include "engine/core/error.h"
#include "engine/core/json_bounded.h"
#include "engine/sample/detokenizer.h"
#include "engine/structured/constraint_fields.h"
#include "engine/tokenizer/prompt.h"

namespace llmctl {

namespace {
nlohmann::json logprob_json(const TokenLogprobs& lp) {
  nlohmann::json top = nlohmann::json::array();
  for (const auto& t : lp.top) top.push_back({{"token_id", t.id}, {"logprob", t.logprob}});
  return {{"token_id", lp.token}, {"logprob", lp.logprob}, {"rank", lp.rank}, {"top_logprobs", top}};
}

nlohmann::json logprobs_json(const std::vector<TokenLogprobs>& lps) {
  nlohmann::json a = nlohmann::json::array();
  for (const auto& lp : lps) a.push_back(logprob_json(lp));
  return a;
}

// Parses one line into prompt ids + sampling parameters; throws InputError naming the problem.
std::pair<std::vector<int>, SamplingParams> parse_line(const std::string& line, const Tokenizer& tok, int vocab,
                                                       const SamplingParams& defaults, const CompileConstraint& compile) {
  LLM_REQUIRE(utf8_valid(line)) << "the line is not valid UTF-8";
  // Bounded while parsing: a line nested 10,000 deep is this line's error, not a stack overflow.
  const nlohmann::json j = parse_json_bounded(line, kRequestJsonLimits, "the line");
  LLM_REQUIRE(j.is_object()) << "each line must be a JSON object";
  const bool has_prompt = j.contains("prompt"), has_messages = j.contains("messages");
  LLM_REQUIRE(has_prompt != has_messages) << "give exactly one of \"prompt\" and \"messages\"";
  std::vector<std::string> skip{"prompt", "messages"};
  for (const auto& [k, _] : j.items())
    if (is_constraint_field(k)) skip.push_back(k);
  SamplingParams sp = SamplingParams::from_json(j, vocab, skip, defaults);
  if (auto spec = constraint_from_request_text(j, line)) sp.constraint = compile(*spec);
  std::vector<int> ids;
  if (has_prompt) {
    ids = prompt_from_json(tok, j["prompt"], vocab);
  } else {
    LLM_REQUIRE(j["messages"].is_array() && !j["messages"].empty()) << "\"messages\" must be a non-empty array";
    for (const auto& m : j["messages"])
      LLM_REQUIRE(m.is_object() && m.contains("role") && m["role"].is_string() && m.contains("content") &&
                  m["content"].is_string())
          << "each message needs a string \"role\" and a string \"content\"";
    ids = encode_chat(tok, j["messages"]);
  }
  return {ids, sp};
}
}  // namespace

BatchGenerateSummary run_prompts_jsonl(Engine& engine, const Tokenizer& tok, std::istream& in, std::ostream& out,
                                       const SamplingParams& defaults, const CompileConstraint& compile) {
  const auto t0 = std::chrono::steady_clock::now();
  BatchGenerateSummary sum;
  std::vector<nlohmann::json> errors;  // per line: null, or the error object
  std::vector<int64_t> ids;            // per line: engine request id, or -1
  std::string line;
  const int vocab = tok.vocab_size();
  while (std::getline(in, line)) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;  // blank lines are not requests
    nlohmann::json err;
    int64_t id = -1;
    try {
      auto [prompt, sp] = parse_line(line, tok, vocab, defaults, compile);
      id = engine.submit(std::move(prompt), sp);
    } catch (const InputError& e) {
      err = {{"message", e.what()}, {"type", "invalid_request_error"}};
      ++sum.errors;
    }
    errors.push_back(err);
    ids.push_back(id);
  }
  engine.drain();
  for (size_t i = 0; i < ids.size(); ++i) {
    nlohmann::json o = {{"index", i}};
    if (ids[i] < 0) {
      o["error"] = errors[i];
    } else {
      RequestResult r = *engine.take_result(ids[i]);
      if (!r.error.empty()) {  // one of its sequences failed in the engine: this line alone fails
        o["error"] = {{"message", r.error}, {"type", "engine_error"}};
        ++sum.errors;
        out << o.dump() << "\n";
        ++sum.requests;
        continue;
      }
      o["prompt_tokens"] = r.prompt_ids.size();
      if (!r.prompt_logprobs.empty()) {  // [null, {token_id, logprob, rank, top_logprobs}, ...]
        nlohmann::json pl = nlohmann::json::array();
        for (const auto& lp : r.prompt_logprobs) pl.push_back(lp ? logprob_json(*lp) : nlohmann::json());
        o["prompt_logprobs"] = pl;
      }
      nlohmann::json outs = nlohmann::json::array();
      size_t completion = 0;
      for (const auto& s : r.outputs) {
        nlohmann::json so = {{"index", s.index},
                             {"text", s.text},
                             {"token_ids", s.token_ids},
                             {"finish_reason", s.finish_reason}};
        if (s.scored) so["cumulative_logprob"] = s.cumulative_logprob;
        if (!s.logprobs.empty()) so["logprobs"] = logprobs_json(s.logprobs);
        completion += s.token_ids.size();
        outs.push_back(so);
      }
      o["outputs"] = outs;
      o["completion_tokens"] = completion;
      sum.prompt_tokens += int64_t(r.prompt_ids.size());
      sum.generated_tokens += int64_t(completion);
    }
    out << o.dump() << "\n";
    ++sum.requests;
  }
  sum.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return sum;
}

}  // namespace llmctl
