// SamplingParams::validate and from_json: every field accepted, every bad value rejected with the
// field named in the message.
#include <doctest/doctest.h>

#include <string>

#include <nlohmann/json.hpp>

#include "engine/core/error.h"
#include "engine/sample/sampling_params.h"

using namespace llmctl;
using nlohmann::json;

namespace {
const int kVocab = 1000;

// The InputError message from_json throws for j, or "" when it accepts j.
std::string error_of(const json& j, const std::vector<std::string>& ignore = {}) {
  try {
    SamplingParams::from_json(j, kVocab, ignore);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

// from_json rejects j and names `field`.
void rejects(const char* text, const std::string& field) {
  CAPTURE(text);
  const std::string msg = error_of(json::parse(text));
  CAPTURE(msg);
  CHECK(!msg.empty());
  CHECK(msg.find(field) != std::string::npos);
}
}  // namespace

TEST_CASE("from_json accepts every field") {
  const auto p = SamplingParams::from_json(json::parse(R"({
    "temperature": 0.7, "top_p": 0.9, "top_k": 40, "min_p": 0.05, "max_tokens": 32, "n": 2, "best_of": 3,
    "stop": ["###", "END"], "stop_token_ids": [2, 7], "seed": 42, "presence_penalty": 0.5,
    "frequency_penalty": -0.5, "repetition_penalty": 1.1, "logit_bias": {"17": 5, "3": -100},
    "logprobs": 5, "prompt_logprobs": 0, "min_tokens": 4, "ignore_eos": true})"),
                                           kVocab);
  CHECK(p.temperature == doctest::Approx(0.7));
  CHECK(p.top_p == doctest::Approx(0.9));
  CHECK(p.top_k == 40);
  CHECK(p.min_p == doctest::Approx(0.05));
  CHECK(p.max_tokens == 32);
  CHECK(p.n == 2);
  CHECK(p.best_of == 3);
  CHECK(p.num_generated_sequences() == 3);
  CHECK(p.stop == std::vector<std::string>{"###", "END"});
  CHECK(p.stop_token_ids == std::vector<int>{2, 7});
  CHECK(p.seed == 42u);
  CHECK(p.presence_penalty == doctest::Approx(0.5));
  CHECK(p.frequency_penalty == doctest::Approx(-0.5));
  CHECK(p.repetition_penalty == doctest::Approx(1.1));
  CHECK(p.logit_bias == std::map<int, float>{{3, -100.0f}, {17, 5.0f}});
  CHECK(p.logprobs == 5);
  CHECK(p.prompt_logprobs == 0);
  CHECK(p.min_tokens == 4);
  CHECK(p.ignore_eos);
}

TEST_CASE("from_json: defaults, a single stop string, nulls, ignored keys, a base") {
  auto p = SamplingParams::from_json(json::object(), kVocab);
  CHECK(p.n == 1);
  CHECK(!p.best_of);
  CHECK(p.num_generated_sequences() == 1);
  CHECK(!p.logprobs);
  p = SamplingParams::from_json(json::parse(R"({"stop": "\n", "seed": null, "logprobs": null, "top_k": -1})"), kVocab);
  CHECK(p.stop == std::vector<std::string>{"\n"});
  CHECK(!p.seed);
  CHECK(!p.logprobs);
  CHECK(p.top_k == -1);
  p = SamplingParams::from_json(json::parse(R"({"prompt": "hi", "max_tokens": 3})"), kVocab, {"prompt", "messages"});
  CHECK(p.max_tokens == 3);
  SamplingParams base;
  base.temperature = 0.8f;
  base.top_k = 40;
  p = SamplingParams::from_json(json::parse(R"({"top_k": 5, "temperature": null})"), kVocab, {}, base);
  CHECK(p.temperature == doctest::Approx(0.8));
  CHECK(p.top_k == 5);
  CHECK(error_of(json::parse(R"({"messages": []})"), {"prompt"}).find("messages") != std::string::npos);
}

TEST_CASE("from_json rejects bad values, naming the field") {
  rejects(R"({"stop": ""})", "stop");
  rejects(R"({"stop": ["a", ""]})", "stop");
  rejects(R"({"stop": ["a", 3]})", "stop");
  rejects(R"({"stop": 3})", "stop");
  rejects(R"({"top_p": 0})", "top_p");
  rejects(R"({"top_p": 1.5})", "top_p");
  rejects(R"({"top_p": "0.5"})", "top_p");
  rejects(R"({"temperature": -1})", "temperature");
  rejects(R"({"temperature": "NaN"})", "temperature");  // JSON has no NaN: a string is the wrong type
  rejects(R"({"temperature": 1e300})", "temperature");
  rejects(R"({"top_k": -2})", "top_k");
  rejects(R"({"top_k": 2.5})", "top_k");
  rejects(R"({"min_p": 1.5})", "min_p");
  rejects(R"({"n": 0})", "n must");
  rejects(R"({"n": true})", "'n'");
  rejects(R"({"n": 2, "best_of": 1})", "best_of");
  rejects(R"({"max_tokens": 0})", "max_tokens");
  rejects(R"({"max_tokens": 1e10})", "max_tokens");
  rejects(R"({"max_tokens": 99999999999})", "max_tokens");
  rejects(R"({"min_tokens": -1})", "min_tokens");
  rejects(R"({"min_tokens": 10, "max_tokens": 5})", "min_tokens");
  rejects(R"({"presence_penalty": 2.5})", "presence_penalty");
  rejects(R"({"frequency_penalty": -3})", "frequency_penalty");
  rejects(R"({"repetition_penalty": 0})", "repetition_penalty");
  rejects(R"({"logprobs": 21})", "logprobs");
  rejects(R"({"logprobs": -1})", "logprobs");
  rejects(R"({"logprobs": true})", "logprobs");
  rejects(R"({"prompt_logprobs": 30})", "prompt_logprobs");
  rejects(R"({"ignore_eos": 1})", "ignore_eos");
  rejects(R"({"seed": 1.5})", "seed");
  rejects(R"({"seed": "1"})", "seed");
  rejects(R"({"stop_token_ids": [1, 1000]})", "stop_token_ids");
  rejects(R"({"stop_token_ids": [-1]})", "stop_token_ids");
  rejects(R"({"stop_token_ids": 5})", "stop_token_ids");
  rejects(R"({"logit_bias": {"abc": 1}})", "logit_bias");
  rejects(R"({"logit_bias": {"12x": 1}})", "logit_bias");
  rejects(R"({"logit_bias": {"": 1}})", "logit_bias");
  rejects(R"({"logit_bias": {"5": 101}})", "logit_bias");
  rejects(R"({"logit_bias": {"5": "1"}})", "logit_bias");
  rejects(R"({"logit_bias": {"1000": 1}})", "logit_bias");
  rejects(R"({"logit_bias": [1, 2]})", "logit_bias");
  rejects(R"({"temprature": 0.5})", "temprature");
  rejects(R"({"prompt": "hi"})", "prompt");  // not ignored unless the caller says so
  CHECK(error_of(json::array()).find("object") != std::string::npos);
}

TEST_CASE("validate checks token ids only when the vocabulary is known") {
  SamplingParams p;
  p.stop_token_ids = {5000};
  CHECK_NOTHROW(p.validate());
  CHECK_THROWS_AS(p.validate(kVocab), InputError);
  p = {};
  p.logit_bias = {{-1, 1.0f}};
  CHECK_THROWS_AS(p.validate(), InputError);
  p = {};
  p.logit_bias = {{1, NAN}};
  CHECK_THROWS_AS(p.validate(kVocab), InputError);
  p = {};
  p.presence_penalty = NAN;
  CHECK_THROWS_AS(p.validate(), InputError);
  p = {};
  p.min_p = NAN;
  CHECK_THROWS_AS(p.validate(), InputError);
}
