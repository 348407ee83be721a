// TGI request parsing (server/tgi_api.h) without a model: {"inputs", "parameters"} bodies map
// to the right prompt and SamplingParams (greedy unless sampling is asked for); every invalid field
// gives a 400 that names it.
#include <doctest/doctest.h>

#include <optional>
#include <string>

#include "byte_tokenizer.h"
#include "server/api_error.h"
#include "server/tgi_api.h"

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
  l.max_context = 200;
  return l;
}

TgiRequest parse(const json& body) { return parse_tgi_request(body, tok(), limits()); }

void refuses(const json& body, const std::string& param, const std::string& words) {
  INFO(body.dump());
  try {
    parse(body);
    FAIL_CHECK("accepted");
  } catch (const ApiError& e) {
    CHECK(e.status() == 400);
    CHECK(e.param() == param);
    CHECK_MESSAGE(std::string(e.what()).find(words) != std::string::npos, "message: " << e.what());
  }
}

json with_params(json params) { return {{"inputs", "Hello"}, {"parameters", std::move(params)}}; }

}  // namespace

TEST_CASE("tgi: defaults are greedy, 100 new tokens at most, each token's logprob") {
  TgiRequest r = parse({{"inputs", "Hello"}});
  CHECK(r.prompt == ByteTokenizer::bytes("Hello"));
  CHECK(r.prompt_text == "Hello");
  CHECK(r.params.temperature == 0.0f);  // TGI: greedy unless sampling is asked for
  CHECK(r.params.max_tokens == 100);
  CHECK(r.params.logprobs == 0);
  CHECK_FALSE(r.params.prompt_logprobs.has_value());
  CHECK_FALSE(r.details);
  CHECK_FALSE(r.return_full_text);
  // Near the end of the context the default shrinks to what is left.
  r = parse({{"inputs", std::string(150, 'a')}});
  CHECK(r.params.max_tokens == 50);
}

TEST_CASE("tgi: parameters reach SamplingParams and the request") {
  TgiRequest r = parse(with_params(json::parse(R"({"temperature": 0.7, "top_k": 10, "top_p": 0.8,
      "repetition_penalty": 1.2, "frequency_penalty": 0.5, "seed": 9, "stop": ["\n\n"], "max_new_tokens": 20,
      "details": true, "return_full_text": true, "decoder_input_details": true, "watermark": false,
      "best_of": 1, "typical_p": null})")));
  CHECK(r.params.temperature == 0.7f);
  CHECK(r.params.top_k == 10);
  CHECK(r.params.top_p == 0.8f);
  CHECK(r.params.repetition_penalty == 1.2f);
  CHECK(r.params.frequency_penalty == 0.5f);
  CHECK(r.params.seed == 9u);
  CHECK(r.params.stop == std::vector<std::string>{"\n\n"});
  CHECK(r.params.max_tokens == 20);
  CHECK(r.details);
  CHECK(r.return_full_text);
  CHECK(r.decoder_input_details);
  CHECK(r.params.prompt_logprobs == 0);  // decoder_input_details: the prompt tokens' logprobs
  // do_sample alone samples at temperature 1; a seed alone stays greedy
  CHECK(parse(with_params({{"do_sample", true}})).params.temperature == 1.0f);
  CHECK(parse(with_params({{"seed", 3}})).params.temperature == 0.0f);
  CHECK(parse(with_params({{"top_k", 3}})).params.temperature == 1.0f);  // a sampling field asks for sampling
  // stream is the route's business, accepted in the body
  CHECK(parse({{"inputs", "a"}, {"stream", true}}).prompt == ByteTokenizer::bytes("a"));
}

TEST_CASE("tgi: invalid requests are refused naming the field") {
  refuses(json::array(), "", "must be a JSON object");
  refuses({{"parameters", json::object()}}, "inputs", "'inputs' must be a string");
  refuses({{"inputs", 5}}, "inputs", "'inputs' must be a string");
  refuses({{"inputs", {1, 2}}}, "inputs", "'inputs' must be a string");
  refuses({{"inputs", ""}}, "inputs", "is empty");
  refuses({{"inputs", "a"}, {"model", "x"}}, "model", "field 'model' is not supported");
  refuses({{"inputs", "a"}, {"parameters", 3}}, "parameters", "'parameters' must be an object");
  refuses(with_params({{"max_new_tokens", 0}}), "max_new_tokens", "parameters.max_new_tokens must be at least 1");
  refuses(with_params({{"max_new_tokens", 2.5}}), "max_new_tokens", "parameters.max_new_tokens must be an integer");
  refuses(with_params({{"max_new_tokens", 18446744073709551615ull}}), "max_new_tokens", "is too large");
  refuses(with_params({{"max_new_tokens", 196}}), "max_new_tokens",
          "the prompt has 5 tokens and max_new_tokens is 196: together over the model's context of 200");
  refuses(with_params({{"temperature", 0}}), "temperature", "parameters.temperature must be strictly positive");
  refuses(with_params({{"temperature", -0.5}}), "temperature", "strictly positive");
  refuses(with_params({{"top_p", 1.5}}), "top_p", "top_p");
  refuses(with_params({{"top_k", -5}}), "top_k", "top_k");
  refuses(with_params({{"repetition_penalty", 0}}), "repetition_penalty", "repetition_penalty");
  refuses(with_params({{"stop", 3}}), "stop", "stop");
  refuses(with_params({{"do_sample", "yes"}}), "do_sample", "parameters.do_sample must be true or false");
  refuses(with_params({{"details", 1}}), "details", "parameters.details must be true or false");
  refuses(with_params({{"watermark", true}}), "watermark", "parameters.watermark is not supported");
  refuses(with_params({{"best_of", 2}}), "best_of", "parameters.best_of is not supported");
  refuses(with_params({{"truncate", 10}}), "truncate", "parameters.truncate is not supported");
}
