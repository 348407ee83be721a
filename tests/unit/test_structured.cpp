// Structured output: request fields -> ConstraintSpec, GrammarCompiler (xgrammar) -> masks, and the
// Engine drawing under them. The tokenizer is bytes (byte_tokenizer.h), so a mask's allowed ids
// are the characters a grammar allows next and every walk below is checked character by character.
#include <doctest/doctest.h>

#include <algorithm>
#include <memory>
#include <random>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "byte_tokenizer.h"
#include "constraint_walk.h"
#include "engine/core/error.h"
#include "engine/engine.h"
#include "engine/structured/bounded_strings.h"
#include "engine/structured/constraint_fields.h"
#include "engine/structured/grammar_compiler.h"
#include "scripted_executor.h"

using namespace llmctl;
using namespace llmctl::test;
using ojson = nlohmann::ordered_json;

namespace {

ConstraintSpec spec(ConstraintKind kind, std::string text) {
  ConstraintSpec s;
  s.kind = kind;
  s.text = std::move(text);
  return s;
}

}  // namespace

TEST_CASE("structured: a choice allows exactly its strings, escapes included") {
  ConstraintSpec s;
  s.kind = ConstraintKind::choice;
  s.choices = {"yes", "no", "say \"hi\"\\", "t\u00e9\n"};
  auto c = compiler().compile(s);
  const std::vector<int> stops{kEos};
  auto m = c->matcher(stops);
  CHECK(allowed_ids(*m) == std::vector<int>{'n', 's', 't', 'y'});
  std::vector<std::string> seen;
  for (uint64_t seed = 0; seed < 64; ++seed) {
    bool ended = false;
    std::string t = random_walk(*c, seed, ended);
    CHECK(ended);
    CHECK(std::find(s.choices.begin(), s.choices.end(), t) != s.choices.end());
    if (std::find(seen.begin(), seen.end(), t) == seen.end()) seen.push_back(t);
  }
  CHECK(seen.size() == s.choices.size());  // every choice reachable
}

TEST_CASE("structured: every walk through a JSON schema's mask is a valid instance, in the schema's key order") {
  const std::string schema = R"({"type":"object","properties":{
      "zeta":{"type":"string","enum":["x","y z"]},
      "alpha":{"type":"boolean"},
      "list":{"type":"array","items":{"type":"integer","minimum":0,"maximum":9},"minItems":1,"maxItems":3}},
    "required":["zeta","alpha","list"],"additionalProperties":false})";
  auto c = compiler().compile(spec(ConstraintKind::json_schema, schema));
  for (uint64_t seed = 0; seed < 40; ++seed) {
    bool ended = false;
    const std::string text = random_walk(*c, seed, ended);
    REQUIRE(ended);
    const ojson j = ojson::parse(text);
    REQUIRE(j.is_object());
    REQUIRE(j.size() == 3);
    CHECK(j.begin().key() == "zeta");  // the schema's order, not sorted
    CHECK((j["zeta"] == "x" || j["zeta"] == "y z"));
    CHECK(j["alpha"].is_boolean());
    REQUIRE(j["list"].is_array());
    CHECK(j["list"].size() >= 1);
    CHECK(j["list"].size() <= 3);
    for (const auto& v : j["list"]) CHECK((v.is_number_integer() && v.get<int>() >= 0 && v.get<int>() <= 9));
    CHECK(text.find(": ") == std::string::npos);  // compact separators
    CHECK(text.find(", ") == std::string::npos);
  }
}

TEST_CASE("structured: format ipv4 takes no leading zeros (as JSON Schema validators read it)") {
  auto c = compiler().compile(spec(ConstraintKind::json_schema, R"({"type":"string","format":"ipv4"})"));
  const std::regex strict_ipv4(R"("(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])(\.(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])){3}")");
  for (uint64_t seed = 0; seed < 40; ++seed) {
    bool ended = false;
    const std::string t = random_walk(*c, seed, ended, 40);
    REQUIRE(ended);
    CHECK_MESSAGE(std::regex_match(t, strict_ipv4), t);
  }
}

TEST_CASE("structured: bounded strings keep their length in code points and only what JSON allows unescaped") {
  // Compiled as character budgets (bounded_strings.h); xgrammar's own unrolling allowed raw
  // control characters inside them, which no JSON parser takes.
  const std::string schema = R"({"type":"object","properties":{
      "a":{"type":"string","maxLength":5},
      "b":{"type":"string","minLength":2,"maxLength":4},
      "c":{"type":"array","items":{"type":"string","maxLength":3},"maxItems":2},
      "d":{"type":"string","minLength":3,"maxLength":8},
      "e":{"type":"string","maxLength":5}},
    "required":["a","b","c","d","e"],"additionalProperties":false})";
  auto c = compiler().compile(spec(ConstraintKind::json_schema, schema));
  const auto code_points = [](const std::string& s) {
    return std::count_if(s.begin(), s.end(), [](char ch) { return (static_cast<unsigned char>(ch) & 0xc0) != 0x80; });
  };
  long longest_a = 0;
  for (uint64_t seed = 0; seed < 60; ++seed) {
    bool ended = false;
    const std::string text = random_walk(*c, seed, ended, 600);
    REQUIRE(ended);
    CHECK(std::none_of(text.begin(), text.end(), [](char ch) { return static_cast<unsigned char>(ch) < 0x20; }));
    ojson j;
    REQUIRE_NOTHROW(j = ojson::parse(text));
    const auto a = code_points(j["a"].get<std::string>()), b = code_points(j["b"].get<std::string>());
    CHECK(a <= 5);
    CHECK((b >= 2 && b <= 4));
    CHECK(code_points(j["e"].get<std::string>()) <= 5);
    const auto d = code_points(j["d"].get<std::string>());
    CHECK((d >= 3 && d <= 8));
    REQUIRE(j["c"].size() <= 2);
    for (const auto& item : j["c"]) CHECK(code_points(item.get<std::string>()) <= 3);
    longest_a = std::max<long>(longest_a, a);
  }
  CHECK(longest_a == 5);  // the bound is reached, not narrowed
}

TEST_CASE("structured: the bounded-string rewrite of xgrammar's printed grammar") {
  const std::string printed = R"x(root ::= (("{" "\"a\"" ":" root_prop_0 "," "\"b\"" ":" root_prop_1 "}"))
root_prop_0 ::= (("\"" root_prop_0_characters{0, 16} "\""))
root_prop_0_characters ::= (([^\"\\\r\n]))
root_prop_1 ::= (("\"" root_prop_1_characters{2, 3} "\"") | ("\"" root_prop_2{0, 4} "\""))
root_prop_1_characters ::= (([^\"\\\r\n]))
root_prop_2 ::= (([0-9]))
)x";
  const auto out = budget_bounded_strings(printed);
  REQUIRE(out);
  CHECK(out->find("root_prop_0_characters{0, 16}") == std::string::npos);
  CHECK(out->find(R"x(root_prop_0 ::= (("\"" json_string_chars_0_16 "\""))
)x") != std::string::npos);
  CHECK(out->find(R"x(json_string_chars_0_16[max_chars=16] ::= [^\0-\x1f\"\\\uD800-\uDFFF\U00110000-\U001FFFFF]*
)x") != std::string::npos);
  CHECK(out->find(R"x(json_string_chars_2_3[max_chars=3] ::= [^\0-\x1f\"\\\uD800-\uDFFF\U00110000-\U001FFFFF] [^\0-\x1f\"\\\uD800-\uDFFF\U00110000-\U001FFFFF] [^\0-\x1f\"\\\uD800-\uDFFF\U00110000-\U001FFFFF]*
)x") != std::string::npos);
  CHECK(out->find("root_prop_2{0, 4}") != std::string::npos);  // not a string's character: left alone
  const auto min_only = budget_bounded_strings(R"x(root ::= (("\"" c{2, -1} "\""))
c ::= (([^\"\\\r\n]))
)x");
  REQUIRE(min_only);
  CHECK(min_only->find(R"x(json_string_chars_2_inf ::= [^\0-\x1f\"\\\uD800-\uDFFF\U00110000-\U001FFFFF] [^\0-\x1f\"\\\uD800-\uDFFF\U00110000-\U001FFFFF] [^\0-\x1f\"\\\uD800-\uDFFF\U00110000-\U001FFFFF]*
)x") != std::string::npos);
  CHECK_FALSE(budget_bounded_strings("root ::= ((\"a\" root_1{0, 3}))\nroot_1 ::= (([a-z]))\n"));
  // Many long minimums (each its own rule) would write their characters out: left to xgrammar.
  std::string many = "root ::= ((";
  for (int lo = 100; lo < 160; ++lo) many += " c{" + std::to_string(lo) + ", 200}";
  many += "))\nc ::= (([^\\\"\\\\\\r\\n]))\n";
  CHECK_FALSE(budget_bounded_strings(many));
  CHECK(budget_bounded_strings(many.substr(0, many.find(" c{101")) + "))\nc ::= (([^\\\"\\\\\\r\\n]))\n"));
  // The same text inside a string literal or a character class is not a repetition.
  const auto literal = budget_bounded_strings(R"x(root ::= (("\"c{0, 3}\"" [c{0, 3}] c{0, 3}))
c ::= (([^\"\\\r\n]))
)x");
  REQUIRE(literal);
  CHECK(literal->find(R"x(root ::= (("\"c{0, 3}\"" [c{0, 3}] json_string_chars_0_3))
)x") == 0);
}

TEST_CASE("structured: a regex's walks match it; the matcher refuses other tokens and rolls back") {
  auto c = compiler().compile(spec(ConstraintKind::regex, "[0-9]{3}-(ab|cd)+"));
  const std::regex re("[0-9]{3}-(ab|cd)+");
  for (uint64_t seed = 0; seed < 30; ++seed) {
    bool ended = false;
    const std::string t = random_walk(*c, seed, ended, 40);
    if (ended) CHECK(std::regex_match(t, re));
  }
  const std::vector<int> stops{kEos};
  auto m = c->matcher(stops);
  CHECK_FALSE(m->accept('x'));
  CHECK(m->accept('1'));
  CHECK(m->accept('2'));
  m->rollback(1);
  CHECK(m->accept('7'));
  CHECK(allowed_ids(*m) == std::vector<int>{'0', '1', '2', '3', '4', '5', '6', '7', '8', '9'});
}

TEST_CASE("structured: an EBNF grammar; left recursion with a base case") {
  auto left = compiler().compile(spec(ConstraintKind::grammar, "root ::= root \"a\" | \"b\""));
  for (uint64_t seed = 0; seed < 10; ++seed) {
    bool ended = false;
    const std::string t = random_walk(*left, seed, ended, 30);
    if (ended) CHECK(std::regex_match(t, std::regex("ba*")));
  }
  auto c = compiler().compile(spec(ConstraintKind::grammar, R"g(root ::= "(" item ("," item)* ")"
item ::= [a-c] | root)g"));
  for (uint64_t seed = 0; seed < 20; ++seed) {
    bool ended = false;
    const std::string t = random_walk(*c, seed, ended, 60);
    if (!ended) continue;
    int depth = 0;
    for (char ch : t) {
      depth += ch == '(' ? 1 : ch == ')' ? -1 : 0;
      CHECK(depth >= 0);
    }
    CHECK(depth == 0);
    CHECK(t.front() == '(');
  }
}

TEST_CASE("structured: compiled constraints are cached by spec") {
  const auto before = compiler().stats();
  auto a = compiler().compile(spec(ConstraintKind::regex, "cache-me-[xy]"));
  auto b = compiler().compile(spec(ConstraintKind::regex, "cache-me-[xy]"));
  CHECK(a.get() == b.get());
  CHECK(compiler().stats().cache_hits == before.cache_hits + 1);
  ConstraintSpec loose = spec(ConstraintKind::json_schema, R"({"type":"object"})");
  ConstraintSpec strict = loose;
  loose.strict = false;
  CHECK(compiler().compile(loose).get() != compiler().compile(strict).get());
}

TEST_CASE("structured: requests for a spec being compiled share that compile") {
  const auto before = compiler().stats();
  const ConstraintSpec s = spec(ConstraintKind::regex, "(shared|compile)-[a-z]{1,12}-[0-9]{2,5}");
  std::vector<std::shared_ptr<const CompiledConstraint>> got(8);
  std::vector<std::thread> threads;
  for (size_t i = 0; i < got.size(); ++i) threads.emplace_back([&, i] { got[i] = compiler().compile(s); });
  for (std::thread& t : threads) t.join();
  for (const auto& g : got) CHECK(g.get() == got[0].get());
  CHECK(compiler().stats().compiles == before.compiles + 1);
  CHECK(compiler().stats().cache_hits == before.cache_hits + 7);
}

TEST_CASE("structured: bad, oversized and slow specs are InputErrors naming the field") {
  auto refused = [](ConstraintSpec s, const std::string& needle) {
    s.field = "the.field";
    try {
      compiler().compile(s);
      FAIL("compiled: " << s.text);
    } catch (const InputError& e) {
      const std::string msg = e.what();
      CHECK_MESSAGE(msg.find("the.field") != std::string::npos, msg);
      CHECK_MESSAGE(msg.find(needle) != std::string::npos, msg);
    }
  };
  refused(spec(ConstraintKind::regex, "(ab"), "cannot be used");
  refused(spec(ConstraintKind::grammar, "root ::= missing_rule"), "cannot be used");
  refused(spec(ConstraintKind::grammar, "root ::= root \"a\""), "allows no output");  // no base case
  refused(spec(ConstraintKind::json_schema, "{not json"), "");
  refused(spec(ConstraintKind::json_schema, "[1,2]"), "must be a JSON object");
  refused(spec(ConstraintKind::json_schema, std::string(300 * 1024, ' ')), "bytes");
  std::string deep;
  for (int i = 0; i < 200; ++i) deep += R"({"type":"array","items":)";
  deep += "{}";
  for (int i = 0; i < 200; ++i) deep += "}";
  refused(spec(ConstraintKind::json_schema, deep), "");
  ConstraintSpec empty;
  empty.kind = ConstraintKind::choice;
  refused(empty, "empty");

  ByteTokenizer tok;
  const std::vector<int> eos{kEos};
  CompileLimits quick;
  quick.timeout = std::chrono::milliseconds(0);
  GrammarCompiler slow(tok, ByteTokenizer::kVocab, eos, quick);
  // The compile takes about a millisecond: a caller held up that long between starting it and waiting
  // (a loaded machine) finds it done and gets its result, so a few specs are tried (each compiled anew)
  // until one outlives the limit.
  bool timed_out = false;
  for (int attempt = 0; attempt < 8 && !timed_out; ++attempt) {
    ConstraintSpec big =
        spec(ConstraintKind::regex, "([a-z]{1,20}[0-9]{1," + std::to_string(20 + attempt) + "}){1,30}");
    big.field = "f";
    try {
      (void)slow.compile(big);
    } catch (const InputError& e) {
      CHECK_MESSAGE(std::string(e.what()).find("took longer than 0 ms") != std::string::npos, e.what());
      timed_out = true;
    }
  }
  CHECK(timed_out);
}

TEST_CASE("structured: request fields (OpenAI, vLLM, TGI)") {
  CHECK_FALSE(constraint_from_request(ojson::parse(R"({"response_format":{"type":"text"}})")));
  CHECK_FALSE(constraint_from_request(ojson::parse(R"({"temperature":1})")));
  auto s = constraint_from_request(ojson::parse(R"({"response_format":{"type":"json_object"}})"));
  REQUIRE(s);
  CHECK(s->kind == ConstraintKind::json_object);
  s = constraint_from_request(ojson::parse(
      R"({"response_format":{"type":"json_schema","json_schema":{"name":"p","strict":false,
          "schema":{"type":"object","properties":{"b":{"type":"string"},"a":{"type":"integer"}}}}}})"));
  REQUIRE(s);
  CHECK(s->kind == ConstraintKind::json_schema);
  CHECK_FALSE(s->strict);
  CHECK(s->text == R"({"type":"object","properties":{"b":{"type":"string"},"a":{"type":"integer"}}})");  // as written
  s = constraint_from_request(ojson::parse(R"({"structured_outputs":{"choice":["a","b"]}})"));
  REQUIRE(s);
  CHECK(s->kind == ConstraintKind::choice);
  CHECK(s->choices == std::vector<std::string>{"a", "b"});
  s = constraint_from_request(ojson::parse(R"({"guided_regex":"[a-z]+"})"));
  REQUIRE(s);
  CHECK(s->kind == ConstraintKind::regex);
  CHECK(s->field == "guided_regex");
  s = constraint_from_request(ojson::parse(R"({"guided_json":"{\"type\":\"object\"}"})"));
  REQUIRE(s);
  CHECK(s->text == R"({"type":"object"})");
  CHECK(constraint_from_tgi_grammar(ojson::parse(R"({"type":"regex","value":"x+"})")).kind == ConstraintKind::regex);

  CHECK_THROWS_AS(constraint_from_request(ojson::parse(R"({"guided_regex":"a","guided_choice":["b"]})")), InputError);
  CHECK_THROWS_AS(constraint_from_request(ojson::parse(R"({"response_format":{"type":"yaml"}})")), InputError);
  CHECK_THROWS_AS(constraint_from_request(ojson::parse(R"({"response_format":{"type":"json_schema"}})")), InputError);
  CHECK_THROWS_AS(constraint_from_request(ojson::parse(R"({"structured_outputs":{"json":{},"regex":"a"}})")),
                  InputError);
  CHECK_THROWS_AS(constraint_from_request(ojson::parse(R"({"structured_outputs":{"lark":"x"}})")), InputError);
  CHECK_THROWS_AS(constraint_from_request(ojson::parse(R"({"guided_choice":[1]})")), InputError);
  CHECK_THROWS_AS(constraint_from_tgi_grammar(ojson::parse(R"({"type":"ebnf","value":"x"})")), InputError);
  // From a body's text: each field re-read in the client's order; a name written with escapes is refused.
  const std::string text = R"({"temperature":1,"guided_json":{"properties":{"z":{},"a":{}}}})";
  auto t = constraint_from_request_text(nlohmann::json::parse(text), text);
  REQUIRE(t);
  CHECK(t->text == R"({"properties":{"z":{},"a":{}}})");
  const std::string escaped = R"({"guided_\u0072egex":"a"})";
  CHECK_THROWS_WITH_AS(constraint_from_request_text(nlohmann::json::parse(escaped), escaped),
                       doctest::Contains("without escapes"), InputError);
}

namespace {
// Four requests in one batch (one plain, three under grammars); their outputs' texts. steps: the
// executor's steps.
std::vector<std::string> run_constrained_batch(bool masks_async, int jump_forward, int64_t* steps = nullptr,
                                               int64_t* forced = nullptr, int64_t* unmasked = nullptr) {
  using Rule = ScriptedExecutor::Rule;
  ScriptedExecutor exec(ByteTokenizer::kVocab, Rule::ContextHash);
  exec.host_free = masks_async;
  ByteTokenizer tok;
  EngineConfig cfg;
  cfg.num_blocks = 64;
  cfg.jump_forward_tokens = jump_forward;
  Engine engine(exec, tok, cfg);

  auto constrained = [&](ConstraintSpec s, float temperature, int n = 1) {
    SamplingParams p;
    p.temperature = temperature;
    p.seed = 7;
    p.max_tokens = 80;
    p.n = n;
    p.constraint = compiler().compile(s);
    return p;
  };
  SamplingParams plain;
  plain.temperature = 0;
  plain.max_tokens = 12;
  const std::vector<int> prompt = ByteTokenizer::bytes("prompt text");
  const std::string schema = R"({"type":"object","properties":{"k":{"enum":["v1","v2"]},"n":{"type":"boolean"}},
                                 "required":["k","n"],"additionalProperties":false})";
  const int64_t a = engine.submit(prompt, plain);
  const int64_t b = engine.submit(prompt, constrained(spec(ConstraintKind::regex, "[0-9]{4}"), 0));
  const int64_t c = engine.submit(prompt, constrained(spec(ConstraintKind::json_schema, schema), 1.0f, 3));
  ConstraintSpec ch;
  ch.kind = ConstraintKind::choice;
  ch.choices = {"left", "right"};
  SamplingParams top_p = constrained(ch, 0.8f);
  top_p.top_p = 0.9f;  // truncated: always drawn under its mask (filled beside the forward with masks_async)
  const int64_t d = engine.submit(prompt, top_p);
  // b, c and e first try the rule's own token, a mask only where the grammar refuses it.
  const std::string bounded = R"({"type":"object","properties":{"s":{"type":"string","maxLength":6},
                                  "t":{"enum":["x","y"]}},"required":["s","t"],"additionalProperties":false})";
  const int64_t e = engine.submit(prompt, constrained(spec(ConstraintKind::json_schema, bounded), 0));
  engine.drain();

  auto ra = engine.take_result(a);
  REQUIRE(ra);
  std::vector<int32_t> ctx(prompt.begin(), prompt.end());
  CHECK(ra->outputs[0].token_ids == exec.continuation(ctx, 12));  // unconstrained: the rule's tokens

  auto rb = engine.take_result(b);
  REQUIRE(rb);
  CHECK(std::regex_match(rb->outputs[0].text, std::regex("[0-9]{4}")));
  CHECK(rb->outputs[0].finish_reason == "stop");

  auto rc = engine.take_result(c);
  REQUIRE(rc);
  REQUIRE(rc->outputs.size() == 3);
  for (const SequenceOutput& o : rc->outputs) {
    CHECK(o.finish_reason == "stop");
    const ojson j = ojson::parse(o.text);
    CHECK(j.begin().key() == "k");
    CHECK((j["k"] == "v1" || j["k"] == "v2"));
    CHECK(j["n"].is_boolean());
  }
  auto rd = engine.take_result(d);
  REQUIRE(rd);
  CHECK((rd->outputs[0].text == "left" || rd->outputs[0].text == "right"));
  auto re = engine.take_result(e);
  REQUIRE(re);
  CHECK(re->outputs[0].finish_reason == "stop");
  const ojson je = ojson::parse(re->outputs[0].text);
  const std::string s = je["s"].get<std::string>();
  CHECK(std::count_if(s.begin(), s.end(), [](char ch) { return (static_cast<unsigned char>(ch) & 0xc0) != 0x80; }) <= 6);
  std::vector<std::string> texts{ra->outputs[0].text, rb->outputs[0].text, rd->outputs[0].text, re->outputs[0].text};
  for (const SequenceOutput& o : rc->outputs) texts.push_back(o.text);
  if (steps) *steps = exec.steps;
  if (forced) *forced = engine.stats().jump_forward_tokens;
  if (unmasked) *unmasked = engine.stats().grammar_unmasked_draws;
  return texts;
}
}  // namespace

TEST_CASE("structured: the engine draws under each request's grammar; others in the batch are untouched") {
  int64_t steps_plain = 0, steps_jf = 0, forced_plain = 0, forced = 0, unmasked = 0, unmasked_async = 0;
  const std::vector<std::string> inline_fill = run_constrained_batch(false, 0, &steps_plain, &forced_plain, &unmasked);
  // Masks filled beside the forward (as on a GPU) draw the same tokens.
  CHECK(run_constrained_batch(true, 0, nullptr, nullptr, &unmasked_async) == inline_fill);
  CHECK(unmasked > 0);
  CHECK(unmasked_async == unmasked);
  // Jump-forward: the tokens a grammar forces ("{\"k\":\"v", the choice's rest) are taken without a
  // draw and computed together: the same outputs in fewer steps.
  CHECK(run_constrained_batch(false, 16, &steps_jf, &forced) == inline_fill);
  CHECK(run_constrained_batch(true, 16) == inline_fill);
  CHECK(forced_plain == 0);
  CHECK(forced > 10);
  CHECK(steps_jf < steps_plain);
  MESSAGE("steps without jump-forward " << steps_plain << ", with " << steps_jf << " (" << forced << " tokens forced); "
          << unmasked << " draws took the model's token without a mask");
}
