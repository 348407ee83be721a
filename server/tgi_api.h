// The TGI (text-generation-inference) protocol: POST /generate and /generate_stream bodies
// {"inputs": str, "parameters": {...}} and their response shapes.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "server/engine_loop.h"
#include "server/openai_api.h"

namespace llmctl::server {

struct TgiRequest {
  std::vector<int> prompt;
  std::string prompt_text;
  SamplingParams params;
  bool details = false, return_full_text = false, decoder_input_details = false;
};

// Throws ApiError (400 naming the field).
TgiRequest parse_tgi_request(const nlohmann::json& body, const Tokenizer& tok, const ModelLimits& limits);

// TGI's finish reasons: length | eos_token | stop_sequence.
std::string tgi_finish_reason(const std::string& reason, const SamplingParams& params);

// /generate: {"generated_text", "details"?}
nlohmann::json tgi_response(const TgiRequest& req, const RequestResult& r, const Tokenizer& tok);

// /generate_stream: one event per generated token; the last carries generated_text and details
// (an EOS ends the stream with an event for the EOS token itself, as TGI does).
class TgiStreamer {
 public:
  TgiStreamer(const TgiRequest& req, const Tokenizer& tok) : req_(req), tok_(tok) {}
  std::vector<nlohmann::json> events(const JobEvent& e);
  int64_t generated_tokens() const { return generated_; }

 private:
  const TgiRequest& req_;
  const Tokenizer& tok_;
  std::string text_;
  int64_t generated_ = 0;
  std::optional<nlohmann::json> pending_;  // the latest token event, held until we know if it is the last
};

}  // namespace llmctl::server
