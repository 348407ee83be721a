// OpenAI request parsing (server/openai_api.h) without a model: valid /v1/completions and
// /v1/chat/completions bodies map to the right prompts and SamplingParams; every invalid field
// gives a 400 (404 for the model) that names it, with the message a client sees.
#include <doctest/doctest.h>

#include <optional>
#include <string>

#include "byte_tokenizer.h"
#include "server/api_error.h"
#include "server/openai_api.h"

using namespace llmctl;
using namespace llmctl::server;
using json = nlohmann::json;
using test::ByteTokenizer;

namespace {

const ByteTokenizer& tok() {
  static const ByteTokenizer t;
  return t;
}

ModelLimits limits() {
  ModelLimits l;
  l.served_name = "tiny";
  l.vocab_size = ByteTokenizer::kVocab;
  l.max_context = 128;
  l.max_n = 4;
  return l;
}

OpenAiRequest parse(OpenAiApi api, const json& body) { return parse_openai_request(api, body, tok(), limits()); }

// The ApiError a body is refused with (fails the test when it is accepted).
std::optional<ApiError> refusal(OpenAiApi api, const json& body) {
  try {
    parse(api, body);
  } catch (const ApiError& e) {
    return e;
  }
  FAIL_CHECK("accepted: " << body.dump());
  return std::nullopt;
}

// Refused with `status`, naming `param`, with `words` in the message.
void refuses(OpenAiApi api, const json& body, const std::string& param, const std::string& words, int status = 400) {
  INFO(body.dump());
  const auto e = refusal(api, body);
  if (!e) return;
  CHECK(e->status() == status);
  CHECK(e->param() == param);
  CHECK_MESSAGE(std::string(e->what()).find(words) != std::string::npos, "message: " << e->what());
}

const auto kCmpl = OpenAiApi::completions;
const auto kChat = OpenAiApi::chat;

std::vector<int> chatml(const std::vector<std::pair<std::string, std::string>>& messages) {
  std::string s;
  for (auto& [role, content] : messages) s += "<|im_start|>" + role + "\n" + content + "<|im_end|>\n";
  return tok().encode(s + "<|im_start|>assistant\n");
}

}  // namespace

TEST_CASE("openai completions: every sampling field reaches SamplingParams") {
  const OpenAiRequest r = parse(kCmpl, json::parse(R"({
      "model": "tiny", "prompt": "hi there", "max_tokens": 5, "temperature": 0.5, "top_p": 0.9, "top_k": 7,
      "min_p": 0.1, "n": 2, "best_of": 3, "seed": 42, "stop": ["x", "yz"], "stop_token_ids": [65],
      "presence_penalty": 0.5, "frequency_penalty": -0.25, "repetition_penalty": 1.1, "logit_bias": {"66": 5},
      "min_tokens": 2, "ignore_eos": true, "logprobs": 3, "user": "u1"})"));
  CHECK(r.api == kCmpl);
  REQUIRE(r.prompts.size() == 1);
  CHECK(r.prompts[0] == ByteTokenizer::bytes("hi there"));
  CHECK(r.prompt_texts == std::vector<std::string>{"hi there"});
  const SamplingParams& p = r.params;
  CHECK(p.max_tokens == 5);
  CHECK(p.temperature == 0.5f);
  CHECK(p.top_p == 0.9f);
  CHECK(p.top_k == 7);
  CHECK(p.min_p == 0.1f);
  CHECK(p.n == 2);
  CHECK(p.best_of == 3);
  CHECK(p.seed == 42u);
  CHECK(p.stop == std::vector<std::string>{"x", "yz"});
  CHECK(p.stop_token_ids == std::vector<int>{65});
  CHECK(p.presence_penalty == 0.5f);
  CHECK(p.frequency_penalty == -0.25f);
  CHECK(p.repetition_penalty == 1.1f);
  CHECK(p.logit_bias == std::map<int, float>{{66, 5.f}});
  CHECK(p.min_tokens == 2);
  CHECK(p.ignore_eos);
  CHECK(r.logprobs == 3);
  CHECK(p.logprobs == 3);
  CHECK_FALSE(p.prompt_logprobs.has_value());
  CHECK_FALSE(r.stream);
  CHECK_FALSE(r.echo);
}

TEST_CASE("openai completions: OpenAI's defaults, nulls and harmless fields") {
  OpenAiRequest r = parse(kCmpl, {{"prompt", "abc"}});
  CHECK(r.params.max_tokens == 16);  // completions' default
  CHECK(r.params.temperature == 1.0f);
  CHECK(r.params.top_p == 1.0f);
  CHECK(r.params.n == 1);
  CHECK_FALSE(r.params.best_of.has_value());
  CHECK_FALSE(r.logprobs.has_value());
  CHECK_FALSE(r.params.logprobs.has_value());
  // Near the end of the context the default shrinks to what is left (128 - 124 = 4).
  r = parse(kCmpl, {{"prompt", std::string(124, 'a')}});
  CHECK(r.params.max_tokens == 4);
  // null means the default; response_format text and a string user are accepted
  r = parse(kCmpl, json::parse(R"({"prompt": "a", "temperature": null, "stream": null, "suffix": null,
                                    "response_format": {"type": "text"}, "user": "me"})"));
  CHECK(r.params.temperature == 1.0f);
  CHECK_FALSE(r.stream);
}

TEST_CASE("openai completions: the four prompt forms") {
  OpenAiRequest r = parse(kCmpl, {{"prompt", {"ab", "c"}}});
  CHECK(r.prompts == std::vector<std::vector<int>>{ByteTokenizer::bytes("ab"), ByteTokenizer::bytes("c")});
  CHECK(r.prompt_texts == std::vector<std::string>{"ab", "c"});
  r = parse(kCmpl, {{"prompt", {72, 105, 257}}});  // token ids, one prompt; specials allowed
  CHECK(r.prompts == std::vector<std::vector<int>>{{72, 105, 257}});
  CHECK(r.prompt_texts == std::vector<std::string>{"Hi<|im_start|>"});
  r = parse(kCmpl, {{"prompt", {{72, 105}, {33}}}});
  CHECK(r.prompts == std::vector<std::vector<int>>{{72, 105}, {33}});
  CHECK(r.prompt_texts == std::vector<std::string>{"Hi", "!"});
  // specials written in a text prompt are parsed
  r = parse(kCmpl, {{"prompt", "a<|im_end|>"}});
  CHECK(r.prompts[0] == std::vector<int>{'a', ByteTokenizer::kImEnd});
}

TEST_CASE("openai completions: streaming, usage, echo with logprobs") {
  OpenAiRequest r = parse(kCmpl, json::parse(R"({"prompt": "a", "stream": true, "stream_options": {"include_usage": true}})"));
  CHECK(r.stream);
  CHECK(r.include_usage);
  r = parse(kCmpl, json::parse(R"({"prompt": "ab", "echo": true, "logprobs": 2})"));
  CHECK(r.echo);
  CHECK(r.params.logprobs == 2);
  CHECK(r.params.prompt_logprobs == 2);  // echo + logprobs: the prompt's logprobs too
  r = parse(kCmpl, json::parse(R"({"prompt": "ab", "echo": true})"));
  CHECK_FALSE(r.params.prompt_logprobs.has_value());
}

TEST_CASE("openai chat: messages through the chat template, chat's own fields") {
  OpenAiRequest r = parse(kChat, json::parse(R"({"model": "tiny", "messages": [
      {"role": "developer", "content": "Be brief."},
      {"role": "user", "content": [{"type": "text", "text": "Hel"}, {"type": "text", "text": "lo"}], "name": "x"},
      {"role": "assistant", "content": "Hi"}, {"role": "user", "content": "Again"}],
      "logprobs": true, "top_logprobs": 4, "max_tokens": 3, "max_completion_tokens": 6, "seed": 1})"));
  REQUIRE(r.prompts.size() == 1);
  CHECK(r.prompts[0] == chatml({{"system", "Be brief."}, {"user", "Hello"}, {"assistant", "Hi"}, {"user", "Again"}}));
  CHECK(r.logprobs == 4);
  CHECK(r.params.logprobs == 4);
  CHECK(r.params.max_tokens == 6);  // max_completion_tokens wins over max_tokens
  CHECK(r.params.seed == 1u);
  // Without max_tokens a chat may use the rest of the context.
  r = parse(kChat, json::parse(R"({"messages": [{"role": "user", "content": "x"}], "logprobs": true})"));
  CHECK(r.params.max_tokens == 128 - int(chatml({{"user", "x"}}).size()));
  CHECK(r.logprobs == 0);  // logprobs true without top_logprobs: the chosen token's only
  r = parse(kChat, json::parse(R"({"messages": [{"role": "user", "content": null}]})"));
  CHECK(r.prompts[0] == chatml({{"user", ""}}));
}

TEST_CASE("openai: invalid requests are refused naming the field") {
  refuses(kCmpl, json::array({1}), "", "must be a JSON object");
  refuses(kCmpl, {{"prompt", "a"}, {"model", "other"}}, "model", "the model 'other' does not exist", 404);
  refuses(kCmpl, {{"prompt", "a"}, {"model", 3}}, "model", "field 'model' must be a string");
  refuses(kCmpl, {{"prompt", "a"}, {"tools", json::array({1})}}, "tools", "field 'tools' is not supported");
  refuses(kCmpl, {{"max_tokens", 3}}, "prompt", "'prompt' is required");
  refuses(kCmpl, {{"prompt", 5}}, "prompt", "'prompt' must be a string, a list of strings");
  refuses(kCmpl, {{"prompt", json::array()}}, "prompt", "'prompt' must be a string, a list of strings");
  refuses(kCmpl, {{"prompt", {"a", 3}}}, "prompt", "mixes strings or lists with other values");
  refuses(kCmpl, {{"prompt", {1, 259}}}, "prompt", "= 259 is not a token id");
  refuses(kCmpl, {{"prompt", {1, 2.5}}}, "prompt", "is not an integer token id");
  refuses(kCmpl, {{"prompt", ""}}, "prompt", "is empty");
  refuses(kCmpl, {{"prompt", json(std::vector<std::string>(257, "a"))}}, "prompt", "lists 257 prompts; at most 256");
  refuses(kCmpl, {{"prompt", std::string(128, 'a')}}, "prompt", "the prompt has 128 tokens; the model's context is 128");
  refuses(kCmpl, {{"prompt", std::string(124, 'a')}, {"max_tokens", 5}}, "max_tokens",
          "the prompt has 124 tokens and max_tokens is 5: together over the model's context of 128");
  refuses(kCmpl, {{"prompt", "a"}, {"max_tokens", 0}}, "max_tokens", "must be an integer from 1 to");
  refuses(kCmpl, {{"prompt", "a"}, {"max_tokens", "5"}}, "max_tokens", "must be an integer from 1 to");
  refuses(kCmpl, {{"prompt", "a"}, {"max_tokens", 1.5}}, "max_tokens", "must be an integer from 1 to");
  refuses(kCmpl, {{"prompt", "a"}, {"n", 5}}, "n", "n is 5, above this server's limit of 4");
  refuses(kCmpl, {{"prompt", "a"}, {"n", 2}, {"best_of", 5}}, "best_of", "best_of is above this server's limit of 4");
  refuses(kCmpl, {{"prompt", "a"}, {"n", 3}, {"best_of", 2}}, "best_of", "best_of");
  refuses(kCmpl, {{"prompt", "a"}, {"temperature", -1}}, "temperature", "temperature");
  refuses(kCmpl, {{"prompt", "a"}, {"top_p", 0}}, "top_p", "top_p");
  refuses(kCmpl, {{"prompt", "a"}, {"min_tokens", 20}}, "min_tokens", "min_tokens");
  refuses(kCmpl, {{"prompt", "a"}, {"stream", "yes"}}, "stream", "field 'stream' must be true or false");
  refuses(kCmpl, {{"prompt", "a"}, {"stream_options", {{"include_usage", true}}}}, "stream_options",
          "'stream_options' is only allowed with \"stream\": true");
  refuses(kCmpl, {{"prompt", "a"}, {"stream", true}, {"stream_options", {{"chunked", true}}}}, "stream_options",
          "stream_options.chunked is not supported");
  refuses(kCmpl, {{"prompt", "a"}, {"stream", true}, {"stream_options", 1}}, "stream_options", "must be an object");
  refuses(kCmpl, {{"prompt", "a"}, {"stream", true}, {"echo", true}, {"logprobs", 1}}, "echo",
          "echo with logprobs is not supported when streaming");
  refuses(kCmpl, {{"prompt", "a"}, {"logprobs", 21}}, "logprobs", "field 'logprobs' must be in [0, 20], got 21");
  refuses(kCmpl, {{"prompt", "a"}, {"logprobs", true}}, "logprobs", "field 'logprobs' must be an integer");
  refuses(kCmpl, {{"prompt", "a"}, {"echo", 1}}, "echo", "field 'echo' must be true or false");
  refuses(kCmpl, {{"prompt", "a"}, {"user", 5}}, "user", "field 'user' must be a string");
  refuses(kCmpl, {{"prompt", "a"}, {"messages", json::array()}}, "messages", "field 'messages' is not supported");
}

TEST_CASE("openai chat: invalid messages and chat-only rules") {
  const json user = {{"role", "user"}, {"content", "x"}};
  refuses(kChat, {{"max_tokens", 3}}, "messages", "'messages' is required");
  refuses(kChat, {{"messages", json::array()}}, "messages", "'messages' must be a non-empty list of messages");
  refuses(kChat, {{"messages", "hi"}}, "messages", "'messages' must be a non-empty list of messages");
  refuses(kChat, {{"messages", {{{"content", "x"}}}}}, "messages", "must be an object with a string \"role\"");
  refuses(kChat, {{"messages", {{{"role", "tool"}, {"content", "x"}}}}}, "messages",
          ".tool_call_id must be the id of the call this message answers");
  refuses(kChat, {{"messages", {{{"role", "function"}, {"content", "x"}}}}}, "messages",
          ".role 'function' is not supported (system, developer, user, assistant, tool)");
  refuses(kChat, {{"messages", {{{"role", "user"}}}}}, "messages", "has no \"content\"");
  refuses(kChat, {{"messages", {{{"role", "user"}, {"content", "x"}, {"tool_calls", json::array({1})}}}}}, "messages",
          ".tool_calls is not supported");
  refuses(kChat, {{"messages", {{{"role", "user"}, {"content", {{{"type", "image_url"}, {"image_url", "u"}}}}}}}},
          "messages", "only parts of type \"text\" with a string \"text\" are supported");
  refuses(kChat, {{"messages", {{{"role", "user"}, {"content", 5}}}}}, "messages", "must be a string or a list of text parts");
  refuses(kChat, {{"messages", {user}}, {"top_logprobs", 2}}, "top_logprobs", "'top_logprobs' needs \"logprobs\": true");
  json wide = json::object();
  for (int i = 0; i < 5000; ++i) wide["k" + std::to_string(i)] = i;
  refuses(kChat, {{"messages", {user}}, {"chat_template_kwargs", {{"x", wide}}}}, "chat_template_kwargs",
          "has an object with over 4096 keys");
  refuses(kChat, {{"messages", {user}}, {"logprobs", true}, {"top_logprobs", 21}}, "top_logprobs", "must be in [0, 20]");
  refuses(kChat, {{"messages", {user}}, {"logprobs", 2}}, "logprobs", "field 'logprobs' must be true or false");
  refuses(kChat, {{"messages", {user}}, {"best_of", 2}}, "best_of", "field 'best_of' is not supported");
  refuses(kChat, {{"messages", {user}}, {"echo", true}}, "echo", "field 'echo' is not supported");
  refuses(kChat, {{"messages", {user}}, {"prompt", "a"}}, "prompt", "field 'prompt' is not supported");
  refuses(kChat, {{"messages", {user}}, {"max_completion_tokens", 0}}, "max_completion_tokens", "must be an integer from 1");
  refuses(kChat, {{"messages", {{{"role", "user"}, {"content", std::string(125, 'a')}}}}}, "messages",
          "tokens; the model's context is 128 tokens");
}

// A "field: ..." message (sampling_params.cpp's token id and bias checks) names its field too.
TEST_CASE("openai: a bad token id or bias in logit_bias or stop_token_ids names its field") {
  refuses(kCmpl, {{"prompt", "a"}, {"logit_bias", {{"5", 101}}}}, "logit_bias", "must be in [-100, 100]");
  refuses(kCmpl, {{"prompt", "a"}, {"logit_bias", {{"300", 1}}}}, "logit_bias", "logit_bias: token id 300 is outside the vocabulary");
  refuses(kCmpl, {{"prompt", "a"}, {"stop_token_ids", {259}}}, "stop_token_ids",
          "stop_token_ids: token id 259 is outside the vocabulary");
}
