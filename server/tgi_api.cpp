#include "server/tgi_api.h"

#include "engine/core/error.h"
#include "server/api_error.h"
#include "server/token_budget.h"
#include "engine/tokenizer/prompt.h"

namespace llmctl::server {

namespace {
using json = nlohmann::json;

json token_json(const Tokenizer& tok, int id, std::optional<float> logprob) {
  return {{"id", id},
          {"text", tok.token_bytes(id)},
          {"logprob", logprob ? json(*logprob) : json(nullptr)},
          {"special", tok.is_special(id)}};
}
}  // namespace

TgiRequest parse_tgi_request(const json& body, const Tokenizer& tok, const ModelLimits& limits) {
  if (!body.is_object()) throw ApiError(400, "the request body must be a JSON object");
  for (const auto& [k, v] : body.items())
    if (k != "inputs" && k != "parameters" && k != "stream" && !v.is_null())
      throw ApiError(400, "field '" + k + "' is not supported by this server", k);
  if (!body.contains("inputs") || !body["inputs"].is_string())
    throw ApiError(400, "'inputs' must be a string", "inputs");
  TgiRequest r;
  r.prompt_text = body["inputs"].get<std::string>();
  if (r.prompt_text.empty()) throw ApiError(400, "\"inputs\" is empty", "inputs");
  // A prompt longer than the context is refused before it is all tokenized.
  const size_t cap = limits.max_context > 0 ? size_t(limits.max_context - 1) : SIZE_MAX;
  CappedTokens t = encode_capped(tok, r.prompt_text, true, true, cap);
  if (t.over)
    throw ApiError(400, "the prompt has " + (t.exact ? std::to_string(t.count) : "more than " + std::to_string(cap)) +
                            " tokens; the model's context is " + std::to_string(limits.max_context) +
                            " tokens and at least one must be left to generate", "inputs");
  r.prompt = std::move(t.ids);
  const json params = body.value("parameters", json::object());
  if (!params.is_object()) throw ApiError(400, "'parameters' must be an object", "parameters");
  json sampling = json::object();
  bool do_sample = false, sampling_given = false;
  std::optional<int64_t> max_new;
  for (const auto& [k, v] : params.items()) {
    if (v.is_null()) continue;
    auto flag = [&](const std::string& f) {
      if (!v.is_boolean()) throw ApiError(400, "parameters." + f + " must be true or false", f);
      return v.get<bool>();
    };
    if (k == "temperature" || k == "top_k" || k == "top_p") {
      sampling[k] = v;
      sampling_given = true;
    } else if (k == "repetition_penalty" || k == "frequency_penalty" || k == "seed" || k == "stop") {
      sampling[k] = v;
    } else if (k == "max_new_tokens") {
      if (!v.is_number_integer()) throw ApiError(400, "parameters.max_new_tokens must be an integer", k);
      if (v.is_number_unsigned() && v.get<uint64_t>() > uint64_t(INT64_MAX))
        throw ApiError(400, "parameters.max_new_tokens is too large: " + v.dump(), k);
      max_new = v.get<int64_t>();
    } else if (k == "do_sample") {
      do_sample = flag(k);
    } else if (k == "details") {
      r.details = flag(k);
    } else if (k == "return_full_text") {
      r.return_full_text = flag(k);
    } else if (k == "decoder_input_details") {
      r.decoder_input_details = flag(k);
    } else if (k == "grammar") {
      // parsed from the body's text by the route (constraint_from_tgi_text)
    } else if ((k == "watermark" && v == false) || (k == "best_of" && v == 1)) {
      // defaults
    } else {
      throw ApiError(400, "parameters." + k + " is not supported by this server", k);
    }
  }
  if (sampling.contains("temperature") && sampling["temperature"].is_number() && sampling["temperature"].get<double>() <= 0)
    throw ApiError(400, "parameters.temperature must be strictly positive", "temperature");
  try {
    r.params = SamplingParams::from_json(sampling, limits.vocab_size);
  } catch (const InputError& e) {
    throw to_api_error(e);
  }
  if (!do_sample && !sampling_given) r.params.temperature = 0;  // TGI: greedy unless sampling is asked for
  const int64_t P = int64_t(r.prompt.size()), C = limits.max_context;
  const int64_t m = max_new.value_or(std::min<int64_t>(100, C - P));
  if (m < 1) throw ApiError(400, "parameters.max_new_tokens must be at least 1", "max_new_tokens");
  if (m > C - P)  // not P + m > C: m may be near INT64_MAX
    throw ApiError(400, "the prompt has " + std::to_string(P) + " tokens and max_new_tokens is " + std::to_string(m) +
                            ": together over the model's context of " + std::to_string(C) + " tokens", "max_new_tokens");
  r.params.max_tokens = int(m);
  r.params.logprobs = 0;  // each token's logprob is part of TGI's answer
  if (r.decoder_input_details) r.params.prompt_logprobs = 0;
  return r;
}

std::string tgi_finish_reason(const std::string& reason, const SamplingParams& params) {
  if (reason == "length") return "length";
  if (reason == "stop") return params.stop.empty() ? "eos_token" : "stop_sequence";
  return reason;
}

json tgi_response(const TgiRequest& req, const RequestResult& r, const Tokenizer& tok) {
  const SequenceOutput& o = r.outputs.at(0);
  json out = {{"generated_text", (req.return_full_text ? req.prompt_text : std::string()) + o.text}};
  if (req.details) {
    json tokens = json::array();
    for (size_t i = 0; i < o.token_ids.size(); ++i)
      tokens.push_back(token_json(tok, o.token_ids[i], i < o.logprobs.size() ? std::optional<float>(o.logprobs[i].logprob)
                                                                              : std::nullopt));
    json prefill = json::array();
    if (req.decoder_input_details)
      for (size_t i = 0; i < r.prompt_ids.size(); ++i)
        prefill.push_back(token_json(tok, r.prompt_ids[i], i < r.prompt_logprobs.size() && r.prompt_logprobs[i]
                                                               ? std::optional<float>(r.prompt_logprobs[i]->logprob)
                                                               : std::nullopt));
    out["details"] = {{"finish_reason", tgi_finish_reason(o.finish_reason, req.params)},
                      {"generated_tokens", o.token_ids.size()},
                      {"seed", req.params.seed ? json(*req.params.seed) : json(nullptr)},
                      {"prefill", prefill},
                      {"tokens", tokens}};
  }
  return out;
}

std::vector<json> TgiStreamer::events(const JobEvent& e) {
  std::vector<json> out;
  if (e.kind != JobEvent::delta) return out;
  text_ += e.text;
  // One event per token; the piece's text rides on its last token (held-back text keeps the
  // concatenation of token texts equal to the generated text).
  for (size_t i = 0; i < e.token_ids.size(); ++i) {
    json t = token_json(tok_, e.token_ids[i], i < e.logprobs.size() ? std::optional<float>(e.logprobs[i].logprob)
                                                                    : std::nullopt);
    t["text"] = i + 1 == e.token_ids.size() ? e.text : std::string();
    ++generated_;
    if (pending_) out.push_back(std::move(*pending_));
    pending_ = json{{"index", generated_}, {"token", t}, {"generated_text", nullptr}, {"details", nullptr}};
  }
  if (e.token_ids.empty() && !e.text.empty() && pending_) (*pending_)["token"]["text"] = (*pending_)["token"]["text"].get<std::string>() + e.text;
  if (!e.done || e.finish_reason == "abort") {  // aborted: the error event that follows ends the stream
    if (e.done && pending_) {
      out.push_back(std::move(*pending_));
      pending_.reset();
    }
    return out;
  }
  const std::string reason = tgi_finish_reason(e.finish_reason, req_.params);
  if (reason == "eos_token" || !pending_) {
    if (pending_) out.push_back(std::move(*pending_));
    const int eos = tok_.eos_id();
    pending_ = json{{"index", generated_ + 1},
                    {"token", {{"id", eos}, {"text", ""}, {"logprob", nullptr}, {"special", true}}},
                    {"generated_text", nullptr},
                    {"details", nullptr}};
  }
  json last = std::move(*pending_);
  pending_.reset();
  last["generated_text"] = (req_.return_full_text ? req_.prompt_text : std::string()) + text_;
  last["details"] = {{"finish_reason", reason},
                     {"generated_tokens", generated_},
                     {"seed", req_.params.seed ? json(*req_.params.seed) : json(nullptr)}};
  out.push_back(std::move(last));
  return out;
}

}  // namespace llmctl::server
