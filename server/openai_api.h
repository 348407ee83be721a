// The OpenAI completions and chat completions protocols: request parsing (strict: a field that is
// not supported is a 400 naming it) and the response shapes, whole or as stream chunks.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/sample/sampling_params.h"
#include "server/engine_loop.h"
#include "server/reasoning_parser.h"
#include "server/tools/tool_call_format.h"
#include "server/tools/tool_call_stream.h"
#include "server/tools/tool_request.h"
#include "engine/tokenizer/jinja/limits.h"
#include "engine/tokenizer/tokenizer.h"

namespace llmctl::server {

enum class OpenAiApi { completions, chat };

struct ModelLimits {
  std::string served_name;
  int vocab_size = 0;
  int max_context = 0;
  int max_n = 16;  // n and best_of above this are refused
  bool reasoning = false;  // chat: <think> blocks become reasoning_content (server/reasoning_parser.h)
  const ToolCallFormat* tool_format = nullptr;  // chat with tools: how the model writes calls
  bool template_handles_tools = false;          // server/tools/tool_prompt.h
  bool tool_trigger_special = false;            // the format's trigger is one special token (tool_constraint.h)
};

struct OpenAiRequest {
  OpenAiApi api = OpenAiApi::completions;
  std::vector<std::vector<int>> prompts;  // completions: one per prompt given; chat: one
  std::vector<std::string> prompt_texts;  // completions: the prompts as text (for echo)
  SamplingParams params;
  bool stream = false, include_usage = false, echo = false;
  std::optional<int> logprobs;  // top-N per generated token, when asked for
  bool reasoning = false;          // chat with a reasoning parser: split <think> blocks off the content
  bool reasoning_opened = false;   // the rendered prompt ends inside a <think> block
  std::optional<ToolRequest> tools;  // chat: tools, tool_choice, parallel_tool_calls
  const ToolCallFormat* tool_format = nullptr;
  // Whether the output is read for tool calls.
  bool parses_tools() const { return tools && tools->parses() && tool_format; }
};

// Throws ApiError (400 naming the field, 404 for an unknown model). `render` bounds the chat
// template (the server passes the request's deadline and its shutdown flag). `raw_body`, the
// body's text, gives `tools` in the client's key order (without it: sorted).
OpenAiRequest parse_openai_request(OpenAiApi api, const nlohmann::json& body, const Tokenizer& tok,
                                   const ModelLimits& limits, const RenderLimits& render = {},
                                   std::string_view raw_body = {});

// Shapes one request's job events into the OpenAI response (non-streaming) or chunks (streaming).
class OpenAiResponder {
 public:
  OpenAiResponder(const OpenAiRequest& req, const Tokenizer& tok, std::string model);
  // Streaming: the chunks (JSON objects) an event produces, in order.
  std::vector<nlohmann::json> chunks(const JobEvent& e);
  // Streaming: the usage chunk (choices empty) when include_usage was asked for.
  std::optional<nlohmann::json> usage_chunk() const;
  // Non-streaming: records a finished event; response() once every prompt has finished.
  void add(const JobEvent& finished);
  nlohmann::json response() const;
  const std::string& id() const { return id_; }
  int64_t prompt_tokens() const { return prompt_tokens_; }
  int64_t completion_tokens() const { return completion_tokens_; }

 private:
  nlohmann::json chunk(nlohmann::json choice) const;
  nlohmann::json logprobs_json(const std::vector<TokenLogprobs>& lps, size_t text_offset) const;
  nlohmann::json prompt_logprobs_json(const RequestResult& r) const;

  const OpenAiRequest& req_;
  const Tokenizer& tok_;
  std::string model_, id_;
  int64_t created_ = 0;
  int64_t prompt_tokens_ = 0, completion_tokens_ = 0;
  std::vector<bool> started_;           // per choice: the first chunk (role / echo) was sent
  std::vector<size_t> text_offset_;     // per choice: characters sent so far (completions text_offset)
  std::vector<std::optional<RequestResult>> results_;
  std::vector<ReasoningParser> reasoning_;  // per choice, when req_.reasoning
  std::vector<ToolCallStream> tool_calls_;  // per choice, when req_.parses_tools()
};

}  // namespace llmctl::server
