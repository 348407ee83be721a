// Chat templates vs Python jinja2: every case in tests/golden/chat_templates/renders.json (real
// model templates x conversations, plus expression edge cases) must render byte for byte the same,
// or fail the same way. The expected values come from make_renders.py beside the data.
#include <doctest/doctest.h>

#include "engine/tokenizer/bpe_tokenizer.h"
#include "engine/tokenizer/prompt.h"

#include <fstream>
#include <sstream>
#include <string>

#include "engine/core/error.h"
#include "engine/tokenizer/chat_template.h"
#include "source_dir.h"

using llmctl::InputError;
using nlohmann::ordered_json;

namespace {

const std::string kDir = std::string(llmctl::test::source_dir()) + "/tests/golden/chat_templates/";

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  REQUIRE_MESSAGE(f.good(), "cannot open " << path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

ordered_json load_renders() { return ordered_json::parse(read_file(kDir + "renders.json")); }

std::string source_of(const ordered_json& c) {
  if (c.contains("source")) return c["source"].get<std::string>();
  return read_file(kDir + "templates/" + c["template"].get<std::string>() + ".jinja");
}

// Checks one case; returns true when it matches jinja2.
bool check_case(const ordered_json& c) {
  const std::string name = c["name"].get<std::string>();
  const std::string source = source_of(c);
  std::string got, error;
  bool threw = false;
  try {
    got = llmctl::render_chat_template_ordered(source, c["context"]);
  } catch (const InputError& e) {
    threw = true;
    error = e.what();
  }
  if (c.contains("expected")) {
    const std::string want = c["expected"].get<std::string>();
    CHECK_MESSAGE(!threw, name << ": unexpected error: " << error);
    CHECK_MESSAGE(got == want, name << ":\n--- jinja2 ---\n" << want << "\n--- llmctl ---\n" << got);
    return !threw && got == want;
  }
  const auto& err = c["error"];
  const std::string type = err["type"].get<std::string>();
  CHECK_MESSAGE(threw, name << ": expected " << type << " (" << err["message"].get<std::string>() << "), got output:\n"
                            << got);
  if (!threw) return false;
  if (type == "TemplateError") {  // raise_exception(): the message passes through unchanged
    CHECK_MESSAGE(error == err["message"].get<std::string>(), name << ": " << error);
    return error == err["message"].get<std::string>();
  }
  if (type == "TemplateSyntaxError") {
    std::string line = "(line " + std::to_string(err["lineno"].get<int>()) + ")";
    CHECK_MESSAGE(error.find(line) != std::string::npos, name << ": want " << line << " in: " << error);
    return error.find(line) != std::string::npos;
  }
  return true;  // runtime errors (undefined, type errors): any InputError
}

std::string render(const std::string& src, const ordered_json& ctx = ordered_json::object()) {
  return llmctl::render_chat_template_ordered(src, ctx);
}

}  // namespace

TEST_CASE("chat templates render like jinja2: real model templates") {
  auto data = load_renders();
  int total = 0, matched = 0;
  for (const auto& c : data["cases"]) {
    if (!c.contains("template")) continue;
    ++total;
    matched += check_case(c);
  }
  MESSAGE("templates: " << matched << "/" << total << " cases match jinja2");
  CHECK(total > 100);
}

TEST_CASE("chat templates render like jinja2: expression edge cases") {
  auto data = load_renders();
  int total = 0, matched = 0;
  for (const auto& c : data["cases"]) {
    if (!c.contains("source")) continue;
    ++total;
    matched += check_case(c);
  }
  MESSAGE("expressions: " << matched << "/" << total << " cases match jinja2");
  CHECK(total > 80);
}

TEST_CASE("chat template: the default model's template from its GGUF metadata") {
  // The same text as templates/smollm2.jinja (read from the GGUF by make_renders.py's author).
  const std::string src = read_file(kDir + "templates/smollm2.jinja");
  ordered_json ctx = {{"messages", {{{"role", "user"}, {"content", "Hi"}}}}, {"add_generation_prompt", true}};
  CHECK(render(src, ctx) ==
        "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n"
        "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
}

TEST_CASE("chat template: nlohmann::json overload and reusable ChatTemplate") {
  nlohmann::json ctx = {{"messages", {{{"role", "user"}, {"content", "x"}}}}, {"add_generation_prompt", false}};
  CHECK(llmctl::render_chat_template("{% for m in messages %}{{ m.role }}:{{ m.content }}{% endfor %}", ctx) == "user:x");
  // nlohmann::json sorts object keys; the ordered overload keeps them as given.
  CHECK(llmctl::render_chat_template("{{ d | tojson }}", nlohmann::json{{"d", {{"b", 1}, {"a", 2}}}}) ==
        "{\"a\": 2, \"b\": 1}");
  CHECK(render("{{ d | tojson }}", ordered_json{{"d", {{"b", 1}, {"a", 2}}}}) == "{\"b\": 1, \"a\": 2}");

  llmctl::ChatTemplate t("{{ greeting }}, {{ name | default('world') }}!");
  CHECK(t.render({{"greeting", "Hello"}}) == "Hello, world!");
  CHECK(t.render({{"greeting", "Hi"}, {"name", "Ada"}}) == "Hi, Ada!");
}

TEST_CASE("chat template: errors are InputError with context") {
  CHECK_THROWS_WITH_AS(render("{{ raise_exception('bad roles') }}"), "bad roles", InputError);
  CHECK_THROWS_WITH_AS(render("ok\n{% if x %}\n{% endfor %}"), doctest::Contains("(line 3)"), InputError);
  CHECK_THROWS_WITH_AS(render("a\nb\n{{ 'a' + 1 }}"), doctest::Contains("line 3"), InputError);
  CHECK_THROWS_WITH_AS(render("{{ nope.attr }}"), doctest::Contains("'nope' is undefined"), InputError);
  CHECK_THROWS_AS(llmctl::ChatTemplate("{% for %}"), InputError);
}

TEST_CASE("render_chat passes transformers' context: tools and documents none, special tokens only where they exist") {
  const std::string probe =
      "{{ tools is defined }} {{ tools is none }} {{ documents is none }} {{ bos_token is defined }} [{{ eos_token }}]";
  const nlohmann::json messages = nlohmann::json::array({{{"role", "user"}, {"content", "x"}}});
  auto no_bos = llmctl::BpeTokenizer::from_gguf_vocab({"a", "b", "<|end|>"}, {1, 1, 3}, {}, "default", -1, 2, -1, false, probe);
  CHECK(llmctl::render_chat(*no_bos, messages) == "True True True False [<|end|>]");
  auto bos = llmctl::BpeTokenizer::from_gguf_vocab({"<s>", "b", "</s>"}, {3, 1, 3}, {}, "default", 0, 2, -1, true,
                                                   "{{ bos_token }}|{{ eos_token }}");
  CHECK(llmctl::render_chat(*bos, messages) == "<s>|</s>");
}
