#include "server/openai_api.h"

#include <chrono>
#include <cstdint>
#include <random>
#include <set>

#include "engine/core/error.h"
#include "engine/core/json_bounded.h"
#include "engine/structured/constraint_fields.h"
#include "server/api_error.h"
#include "server/chat_prompt.h"
#include "server/token_budget.h"
#include "engine/tokenizer/prompt.h"

namespace llmctl::server {

namespace {
using json = nlohmann::json;

// Fields passed to SamplingParams::from_json as they are.
const std::set<std::string>& sampling_fields() {
  static const std::set<std::string> s = {"temperature",      "top_p",             "top_k",      "min_p",
                                          "n",                "best_of",           "stop",       "stop_token_ids",
                                          "seed",             "presence_penalty",  "frequency_penalty",
                                          "repetition_penalty", "logit_bias",      "min_tokens", "ignore_eos"};
  return s;
}

std::string random_id(const char* prefix) {
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  char buf[20];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(rng()));
  return std::string(prefix) + buf;
}

bool require_bool(const json& v, const std::string& field) {
  if (!v.is_boolean()) throw ApiError(400, "field '" + field + "' must be true or false, got " + v.type_name(), field);
  return v.get<bool>();
}

std::optional<int> optional_int(const json& v, const std::string& field) {
  if (v.is_null()) return std::nullopt;
  if (!v.is_number_integer())
    throw ApiError(400, "field '" + field + "' must be an integer, got " + std::string(v.type_name()), field);
  const int64_t i = v.get<int64_t>();
  if (i < 0 || i > 20) throw ApiError(400, "field '" + field + "' must be in [0, 20], got " + std::to_string(i), field);
  return int(i);
}

// A prompt of more than C - 1 tokens (C: the model's context), found before it is all tokenized.
ApiError prompt_too_long(const CappedTokens& t, int64_t C, const std::string& field) {
  return ApiError(400, "the prompt has " + (t.exact ? std::to_string(t.count) : "more than " + std::to_string(C - 1)) +
                           " tokens; the model's context is " + std::to_string(C) +
                           " tokens and at least one must be left to generate", field);
}

// The most tokens a prompt may have: one less than the context (SIZE_MAX when there is none).
size_t prompt_cap(const ModelLimits& limits) { return limits.max_context > 0 ? size_t(limits.max_context - 1) : SIZE_MAX; }

// completions "prompt": a string, a list of strings, a list of token ids, or a list of lists. A
// prompt longer than the context is refused before it is all tokenized (or its ids copied).
void parse_prompts(const json& prompt, const Tokenizer& tok, const ModelLimits& limits, OpenAiRequest& r,
                   std::vector<std::string>& texts) {
  const size_t cap = prompt_cap(limits);
  auto one = [&](const json& p) {
    if (p.is_string() && !p.get_ref<const std::string&>().empty()) {
      CappedTokens t = encode_capped(tok, p.get_ref<const std::string&>(), true, true, cap);
      if (t.over) throw prompt_too_long(t, limits.max_context, "prompt");
      r.prompts.push_back(std::move(t.ids));
    } else if (p.is_array() && p.size() > cap) {
      throw prompt_too_long(CappedTokens{.ids = {}, .over = true, .count = p.size(), .exact = true}, limits.max_context, "prompt");
    } else {
      try {
        r.prompts.push_back(prompt_from_json(tok, p, limits.vocab_size));
      } catch (const InputError& e) {
        throw ApiError(400, e.what(), "prompt");
      }
    }
    texts.push_back(p.is_string() ? p.get<std::string>() : tok.decode(r.prompts.back()));
  };
  if (prompt.is_string()) return one(prompt);
  if (!prompt.is_array() || prompt.empty())
    throw ApiError(400, "'prompt' must be a string, a list of strings, a list of token ids or a list of lists of token ids",
                   "prompt");
  if (prompt[0].is_number()) return one(prompt);
  if (prompt.size() > 256) throw ApiError(400, "'prompt' lists " + std::to_string(prompt.size()) + " prompts; at most 256 per request", "prompt");
  for (const auto& p : prompt) {
    if (!p.is_string() && !p.is_array())
      throw ApiError(400, "'prompt' mixes strings or lists with other values", "prompt");
    one(p);
  }
}

std::string token_string(const Tokenizer& tok, int id) { return tok.token_bytes(id); }

// Stream deltas of tool calls as OpenAI sends them: a call's first names it, later ones carry
// argument text only.
json tool_call_deltas_json(const std::vector<ToolCallDelta>& calls) {
  json list = json::array();
  for (const auto& d : calls) {
    if (!d.id.empty())
      list.push_back({{"index", d.index}, {"id", d.id}, {"type", "function"},
                      {"function", {{"name", d.name}, {"arguments", d.arguments}}}});
    else
      list.push_back({{"index", d.index}, {"function", {{"arguments", d.arguments}}}});
  }
  return list;
}

json bytes_of(const std::string& s) {
  json a = json::array();
  for (unsigned char c : s) a.push_back(int(c));
  return a;
}
}  // namespace

OpenAiRequest parse_openai_request(OpenAiApi api, const json& body, const Tokenizer& tok, const ModelLimits& limits,
                                   const RenderLimits& render, std::string_view raw_body) {
  if (!body.is_object()) throw ApiError(400, "the request body must be a JSON object");
  const bool chat = api == OpenAiApi::chat;
  OpenAiRequest r;
  r.api = api;
  json sampling = json::object();
  bool chat_logprobs = false, has_stream_options = false;
  std::optional<int> top_logprobs;
  std::optional<json> max_tokens;
  nlohmann::ordered_json template_kwargs = nlohmann::ordered_json::object();  // chat_template_kwargs, ordered
  for (const auto& [k, v] : body.items()) {
    if (sampling_fields().count(k) && !(chat && k == "best_of")) {
      sampling[k] = v;
    } else if (k == "model") {
      if (!v.is_string()) throw ApiError(400, "field 'model' must be a string", "model");
      if (v.get<std::string>() != limits.served_name)
        throw ApiError(404, "the model " + quoted_value(v.get<std::string>()) + " does not exist; this server serves " +
                                quoted_value(limits.served_name), "model", "invalid_request_error");
    } else if ((k == "prompt" && !chat) || (k == "messages" && chat)) {
      // below
    } else if (k == "max_tokens" || (chat && k == "max_completion_tokens")) {
      // Each is validated on its own; max_completion_tokens (OpenAI's current name) wins when both
      // are given, as in vLLM. json objects iterate keys sorted: max_completion_tokens comes first.
      if (!v.is_null()) {
        const bool in_range = v.is_number_unsigned() ? v.get<uint64_t>() >= 1 && v.get<uint64_t>() <= uint64_t(INT32_MAX)
                                                     : v.is_number_integer() && v.get<int64_t>() >= 1 && v.get<int64_t>() <= INT32_MAX;
        if (!in_range)
          throw ApiError(400, "field '" + k + "' must be an integer from 1 to " + std::to_string(INT32_MAX) + ", got " +
                                  v.dump(), k);
        if (k == "max_completion_tokens" || !max_tokens) {
          max_tokens = v;
          sampling["max_tokens"] = v;  // checked with min_tokens; the context check is below
        }
      }
    } else if (k == "stream") {
      r.stream = v.is_null() ? false : require_bool(v, k);
    } else if (k == "stream_options") {
      if (v.is_null()) continue;
      if (!v.is_object()) throw ApiError(400, "field 'stream_options' must be an object", k);
      for (const auto& [ok, ov] : v.items()) {
        if (ok != "include_usage") throw ApiError(400, "stream_options." + ok + " is not supported", k);
        r.include_usage = require_bool(ov, "stream_options.include_usage");
      }
      has_stream_options = true;
    } else if (k == "echo" && !chat) {
      r.echo = v.is_null() ? false : require_bool(v, k);
    } else if (k == "logprobs") {
      if (chat)
        chat_logprobs = v.is_null() ? false : require_bool(v, k);
      else
        r.logprobs = optional_int(v, k);
    } else if (k == "top_logprobs" && chat) {
      top_logprobs = optional_int(v, k);
    } else if (k == "user") {
      if (!v.is_null() && !v.is_string()) throw ApiError(400, "field 'user' must be a string", k);
    } else if (k == "chat_template_kwargs" && chat) {
      template_kwargs = parse_template_kwargs(v);
    } else if (chat && is_tool_field(k)) {
      // below, with the messages
    } else if (is_constraint_field(k)) {
      // response_format, structured_outputs, guided_*: parsed from the body's text by the route
      // (constraint_from_request_text keeps a schema's key order)
    } else if (v.is_null()) {
      // an unsupported field left at its default
    } else {
      throw ApiError(400, "field '" + k + "' is not supported by this server", k);
    }
  }
  if (has_stream_options && !r.stream) throw ApiError(400, "'stream_options' is only allowed with \"stream\": true", "stream_options");
  if (chat) {
    if (top_logprobs && !chat_logprobs) throw ApiError(400, "'top_logprobs' needs \"logprobs\": true", "top_logprobs");
    if (chat_logprobs) r.logprobs = top_logprobs.value_or(0);
  }

  // Sampling fields; OpenAI's defaults (temperature 1, top_p 1, completions max_tokens 16).
  SamplingParams base;
  base.max_tokens = 16;
  try {
    r.params = SamplingParams::from_json(sampling, limits.vocab_size, {}, base);
  } catch (const InputError& e) {
    throw to_api_error(e);
  }
  if (r.params.n > limits.max_n) throw ApiError(400, "n is " + std::to_string(r.params.n) + ", above this server's limit of " + std::to_string(limits.max_n), "n");
  if (r.params.best_of && *r.params.best_of > limits.max_n)
    throw ApiError(400, "best_of is above this server's limit of " + std::to_string(limits.max_n), "best_of");
  r.params.logprobs = r.logprobs;
  if (r.echo && r.logprobs) {
    if (r.stream) throw ApiError(400, "echo with logprobs is not supported when streaming", "echo");
    r.params.prompt_logprobs = r.logprobs;
  }

  std::vector<std::string> texts;
  if (chat) {
    if (!body.contains("messages")) throw ApiError(400, "'messages' is required", "messages");
    r.tools = parse_tool_request(body, raw_body);
    r.tool_format = limits.tool_format;
    const std::string text = render_chat_request(tok, body["messages"], r.tools ? &*r.tools : nullptr,
                                                 limits.template_handles_tools, std::move(template_kwargs), true, render);
    r.reasoning = limits.reasoning;
    r.reasoning_opened = limits.reasoning && prompt_opens_reasoning(text);
    // The template writes BOS itself where the model wants it (as encode_chat does).
    try {
      CappedTokens t = encode_capped(tok, text, true, false, prompt_cap(limits));
      if (t.over) throw prompt_too_long(t, limits.max_context, "messages");
      r.prompts.push_back(std::move(t.ids));
    } catch (const InputError& e) {
      throw ApiError(400, e.what(), "messages");
    }
  } else {
    if (!body.contains("prompt")) throw ApiError(400, "'prompt' is required", "prompt");
    parse_prompts(body["prompt"], tok, limits, r, texts);
  }
  r.prompt_texts = std::move(texts);

  size_t longest = 0;
  for (const auto& p : r.prompts) longest = std::max(longest, p.size());
  const int64_t P = int64_t(longest), C = limits.max_context;
  if (P >= C)
    throw ApiError(400, "the prompt has " + std::to_string(P) + " tokens; the model's context is " + std::to_string(C) +
                            " tokens and at least one must be left to generate", chat ? "messages" : "prompt");
  if (max_tokens) {
    const int64_t m = max_tokens->get<int64_t>();  // an integer >= 1 (checked by from_json)
    if (P + m > C)
      throw ApiError(400, "the prompt has " + std::to_string(P) + " tokens and max_tokens is " + std::to_string(m) +
                              ": together over the model's context of " + std::to_string(C) + " tokens", "max_tokens");
    r.params.max_tokens = int(m);
  } else {
    r.params.max_tokens = chat ? int(C - P) : int(std::min<int64_t>(16, C - P));
  }
  if (r.params.min_tokens > r.params.max_tokens)
    throw ApiError(400, "min_tokens is above max_tokens", "min_tokens");
  return r;
}

OpenAiResponder::OpenAiResponder(const OpenAiRequest& req, const Tokenizer& tok, std::string model)
    : req_(req), tok_(tok), model_(std::move(model)) {
  id_ = random_id(req.api == OpenAiApi::chat ? "chatcmpl-" : "cmpl-");
  created_ = std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
  for (const auto& p : req.prompts) prompt_tokens_ += int64_t(p.size());
  const size_t choices = req.prompts.size() * size_t(req.params.n);
  started_.assign(choices, false);
  text_offset_.assign(choices, 0);
  results_.resize(req.prompts.size());
  if (req.api == OpenAiApi::chat && req.reasoning) reasoning_.assign(choices, ReasoningParser(req.reasoning_opened));
  if (req.api == OpenAiApi::chat && req.parses_tools())
    for (size_t c = 0; c < choices; ++c) tool_calls_.emplace_back(*req.tool_format, *req.tools);
}

json OpenAiResponder::logprobs_json(const std::vector<TokenLogprobs>& lps, size_t text_offset) const {
  if (req_.api == OpenAiApi::chat) {
    json content = json::array();
    for (const auto& lp : lps) {
      json top = json::array();
      for (const auto& t : lp.top) {
        const std::string s = token_string(tok_, t.id);
        top.push_back({{"token", s}, {"logprob", t.logprob}, {"bytes", bytes_of(s)}});
      }
      const std::string s = token_string(tok_, lp.token);
      content.push_back({{"token", s}, {"logprob", lp.logprob}, {"bytes", bytes_of(s)}, {"top_logprobs", top}});
    }
    return {{"content", content}};
  }
  json tokens = json::array(), token_lps = json::array(), tops = json::array(), offsets = json::array();
  for (const auto& lp : lps) {
    const std::string s = token_string(tok_, lp.token);
    tokens.push_back(s);
    token_lps.push_back(lp.logprob);
    json top = json::object();
    for (const auto& t : lp.top) top[token_string(tok_, t.id)] = t.logprob;
    tops.push_back(top);
    offsets.push_back(text_offset);
    text_offset += s.size();
  }
  return {{"tokens", tokens}, {"token_logprobs", token_lps}, {"top_logprobs", tops}, {"text_offset", offsets}};
}

// completions with echo: the prompt's tokens first (the first has no logprob).
json OpenAiResponder::prompt_logprobs_json(const RequestResult& r) const {
  json tokens = json::array(), token_lps = json::array(), tops = json::array(), offsets = json::array();
  size_t offset = 0;
  for (size_t i = 0; i < r.prompt_ids.size(); ++i) {
    const std::string s = token_string(tok_, r.prompt_ids[i]);
    tokens.push_back(s);
    offsets.push_back(offset);
    offset += s.size();
    if (i < r.prompt_logprobs.size() && r.prompt_logprobs[i]) {
      token_lps.push_back(r.prompt_logprobs[i]->logprob);
      json top = json::object();
      for (const auto& t : r.prompt_logprobs[i]->top) top[token_string(tok_, t.id)] = t.logprob;
      tops.push_back(top);
    } else {
      token_lps.push_back(nullptr);
      tops.push_back(nullptr);
    }
  }
  return {{"tokens", tokens}, {"token_logprobs", token_lps}, {"top_logprobs", tops}, {"text_offset", offsets}};
}

json OpenAiResponder::chunk(json choice) const {
  const bool chat = req_.api == OpenAiApi::chat;
  json c = {{"id", id_}, {"object", chat ? "chat.completion.chunk" : "text_completion"}, {"created", created_},
            {"model", model_}, {"choices", json::array({std::move(choice)})}};
  return c;
}

std::vector<json> OpenAiResponder::chunks(const JobEvent& e) {
  std::vector<json> out;
  if (e.kind != JobEvent::delta) return out;
  const bool chat = req_.api == OpenAiApi::chat;
  const size_t c = size_t(e.prompt_index) * size_t(req_.params.n) + size_t(e.index);
  if (c >= started_.size()) return out;
  completion_tokens_ += int64_t(e.token_ids.size());
  if (!started_[c]) {
    started_[c] = true;
    if (chat)
      out.push_back(chunk({{"index", c}, {"delta", {{"role", "assistant"}, {"content", ""}}}, {"logprobs", nullptr},
                           {"finish_reason", nullptr}}));
    else if (req_.echo)
      out.push_back(chunk({{"index", c}, {"text", req_.prompt_texts[size_t(e.prompt_index)]}, {"logprobs", nullptr},
                           {"finish_reason", nullptr}}));
  }
  const json lps = req_.logprobs && !e.logprobs.empty() ? logprobs_json(e.logprobs, text_offset_[c]) : json(nullptr);
  // An aborted sequence (timeout, shutdown) has no finish chunk: the error event that follows says why.
  const bool done = e.done && e.finish_reason != "abort";
  const json finish = done ? json(e.finish_reason) : json(nullptr);
  if (chat) {
    std::string reasoning, content = e.text;
    if (!reasoning_.empty()) {
      ReasoningPiece piece = reasoning_[c].push(e.text);
      if (done) {
        ReasoningPiece rest = reasoning_[c].finish();
        piece.reasoning += rest.reasoning, piece.content += rest.content;
      }
      reasoning = std::move(piece.reasoning);
      content = std::move(piece.content);
    }
    std::vector<ToolCallDelta> calls;
    bool called = false;
    if (!tool_calls_.empty()) {
      ToolStreamPiece piece = tool_calls_[c].push(content);
      if (done) {
        ToolStreamPiece rest = tool_calls_[c].finish();
        piece.content += rest.content;
        for (auto& d : rest.calls) {
          if (!piece.calls.empty() && piece.calls.back().index == d.index && d.id.empty())
            piece.calls.back().arguments += d.arguments;
          else
            piece.calls.push_back(std::move(d));
        }
      }
      content = std::move(piece.content);
      calls = std::move(piece.calls);
      called = tool_calls_[c].has_calls();
    }
    json delta = json::object();
    if (!reasoning.empty()) delta["reasoning_content"] = reasoning;
    if (!content.empty() || (delta.empty() && calls.empty() && !lps.is_null())) delta["content"] = content;
    if (!calls.empty()) delta["tool_calls"] = tool_call_deltas_json(calls);
    if (!delta.empty()) out.push_back(chunk({{"index", c}, {"delta", delta}, {"logprobs", lps}, {"finish_reason", nullptr}}));
    if (done) {
      const json reason = called && e.finish_reason == "stop" ? json("tool_calls") : finish;
      out.push_back(chunk({{"index", c}, {"delta", json::object()}, {"logprobs", nullptr}, {"finish_reason", reason}}));
    }
  } else if (!e.text.empty() || !lps.is_null() || done) {
    out.push_back(chunk({{"index", c}, {"text", e.text}, {"logprobs", lps}, {"finish_reason", finish}}));
  }
  for (int t : e.token_ids) text_offset_[c] += token_string(tok_, t).size();
  return out;
}

std::optional<json> OpenAiResponder::usage_chunk() const {
  if (!req_.include_usage) return std::nullopt;
  const bool chat = req_.api == OpenAiApi::chat;
  return json{{"id", id_},
              {"object", chat ? "chat.completion.chunk" : "text_completion"},
              {"created", created_},
              {"model", model_},
              {"choices", json::array()},
              {"usage",
               {{"prompt_tokens", prompt_tokens_},
                {"completion_tokens", completion_tokens_},
                {"total_tokens", prompt_tokens_ + completion_tokens_}}}};
}

void OpenAiResponder::add(const JobEvent& finished) {
  if (finished.kind != JobEvent::finished || !finished.result) return;
  for (const auto& o : finished.result->outputs) completion_tokens_ += int64_t(o.token_ids.size());
  results_.at(size_t(finished.prompt_index)) = finished.result;
}

json OpenAiResponder::response() const {
  const bool chat = req_.api == OpenAiApi::chat;
  json choices = json::array();
  for (size_t p = 0; p < results_.size(); ++p) {
    if (!results_[p]) continue;
    const RequestResult& r = *results_[p];
    for (const auto& o : r.outputs) {
      const size_t c = p * size_t(req_.params.n) + size_t(o.index);
      json lps = nullptr;
      if (chat) {
        if (req_.logprobs) lps = logprobs_json(o.logprobs, 0);
        json message = {{"role", "assistant"}, {"content", o.text}};
        std::string content = o.text;
        if (req_.reasoning) {
          ReasoningParser parser(req_.reasoning_opened);
          const ReasoningPiece a = parser.push(o.text), b = parser.finish();
          content = a.content + b.content;
          message["reasoning_content"] = parser.saw_reasoning() ? json(a.reasoning + b.reasoning) : json(nullptr);
        }
        std::string finish = o.finish_reason;
        if (req_.parses_tools()) {
          ToolCallStream reader(*req_.tool_format, *req_.tools);
          reader.push(content);
          reader.finish();
          const auto calls = reader.calls();
          content = reader.content();
          if (!calls.empty()) {
            json list = json::array();
            for (const auto& call : calls)
              list.push_back({{"id", call.id}, {"type", "function"},
                              {"function", {{"name", call.name}, {"arguments", call.arguments}}}});
            message["tool_calls"] = std::move(list);
            if (finish == "stop") finish = "tool_calls";
          }
        }
        message["content"] = content.empty() && message.contains("tool_calls") ? json(nullptr) : json(content);
        choices.push_back({{"index", c},
                           {"message", message},
                           {"logprobs", lps},
                           {"finish_reason", finish}});
      } else {
        std::string text = o.text;
        if (req_.echo) text = req_.prompt_texts[p] + text;
        if (req_.logprobs) {
          if (req_.echo) {
            lps = prompt_logprobs_json(r);
            size_t offset = 0;
            for (int t : r.prompt_ids) offset += token_string(tok_, t).size();
            const json gen = logprobs_json(o.logprobs, offset);
            for (const char* key : {"tokens", "token_logprobs", "top_logprobs", "text_offset"})
              for (const auto& x : gen[key]) lps[key].push_back(x);
          } else {
            lps = logprobs_json(o.logprobs, 0);
          }
        }
        choices.push_back({{"index", c}, {"text", text}, {"logprobs", lps}, {"finish_reason", o.finish_reason}});
      }
    }
  }
  std::sort(choices.begin(), choices.end(), [](const json& a, const json& b) { return a["index"] < b["index"]; });
  return {{"id", id_},
          {"object", chat ? "chat.completion" : "text_completion"},
          {"created", created_},
          {"model", model_},
          {"choices", choices},
          {"usage",
           {{"prompt_tokens", prompt_tokens_},
            {"completion_tokens", completion_tokens_},
            {"total_tokens", prompt_tokens_ + completion_tokens_}}}};
}

}  // namespace llmctl::server
