// Chat templates are untrusted input (they come with model files): each case below crashed,
// trapped, hung or ate memory before the interpreter was bounded, and must now be an InputError
// whose message names the limit (and the template line).
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include <pthread.h>

#include "engine/core/error.h"
#include "engine/tokenizer/bpe_tokenizer.h"
#include "engine/tokenizer/byte_unicode.h"
#include "engine/tokenizer/chat_template.h"
#include "engine/tokenizer/prompt.h"

using llmctl::InputError;
using llmctl::RenderLimits;
using nlohmann::ordered_json;

namespace {

#if defined(__SANITIZE_ADDRESS__)
constexpr bool kSanitized = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool kSanitized = true;
#else
constexpr bool kSanitized = false;
#endif
#else
constexpr bool kSanitized = false;
#endif

std::string render(const std::string& src, const RenderLimits& limits = {},
                   const ordered_json& ctx = ordered_json::object()) {
  return llmctl::render_chat_template_ordered(src, ctx, limits);
}

std::string repeat(const std::string& s, int n) {
  std::string out;
  for (int k = 0; k < n; ++k) out += s;
  return out;
}

// The error message of rendering `src`, or "" when it rendered.
std::string error_of(const std::string& src, const RenderLimits& limits = {}) {
  try {
    render(src, limits);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

// Runs `fn` on a thread with a small stack, as a server worker or a sanitizer build might have.
template <class F>
void on_small_stack(size_t bytes, F fn) {
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, bytes);
  struct Call {
    F* fn;
    static void* run(void* p) {
      (*static_cast<Call*>(p)->fn)();
      return nullptr;
    }
  } call{&fn};
  pthread_t t;
  REQUIRE(pthread_create(&t, &attr, &Call::run, &call) == 0);
  pthread_join(t, nullptr);
  pthread_attr_destroy(&attr);
}

}  // namespace

TEST_CASE("jinja sandbox: a normal template renders exactly as before") {
  const std::string src =
      "{% for m in messages %}<|{{ m.role }}|>{{ m.content | trim }}\n{% endfor %}"
      "{% if add_generation_prompt %}<|assistant|>{% endif %}{{ (7 // 2, -7 // 2, -7 % 3, 2 ** 10) }}";
  ordered_json ctx = {{"messages", {{{"role", "user"}, {"content", " hi "}}, {{"role", "bot"}, {"content", "yo"}}}},
                      {"add_generation_prompt", true}};
  CHECK(render(src, {}, ctx) == "<|user|>hi\n<|bot|>yo\n<|assistant|>(3, -4, 2, 1024)");
}

TEST_CASE("jinja sandbox: deep nesting is a syntax error, not a stack overflow") {
  const int n = 100000;
  for (const std::string& src : std::vector<std::string>{repeat("(", n) + "1" + repeat(")", n),  //
                                 "{{ " + repeat("[", n) + repeat("]", n) + " }}",
                                 "{{ " + repeat("-", n) + "1 }}",         //
                                 "{{ " + repeat("not ", n) + "1 }}",
                                 "{{ x" + repeat("|trim", n) + " }}",      // a chain, not a recursion
                                 "{{ 1" + repeat(" + 1", n) + " }}",       //
                                 "{{ x" + repeat(".a", n) + " }}",
                                 repeat("{% if true %}", n) + repeat("{% endif %}", n)}) {
    std::string err = error_of(src.front() == '(' ? "{{ " + src + " }}" : src);
    CHECK_MESSAGE(err.find("nested too deeply") != std::string::npos, err);
    CHECK_MESSAGE(err.find("max_nesting") != std::string::npos, err);
  }
  // Nesting real templates use still parses.
  CHECK(render("{{ ((((1 + 2) * 3) - 4) // 5) }}{{ 'a' ~ 'b' ~ 'c' ~ 'd' | upper }}") == "1abcD");
}

TEST_CASE("jinja sandbox: a macro calling itself stops at the recursion limit") {
  std::string err = error_of("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}");
  CHECK_MESSAGE(err.find("max_depth") != std::string::npos, err);
  CHECK_MESSAGE(err.find("(line 1)") != std::string::npos, err);
  // Bounded recursion is fine.
  CHECK(render("{% macro f(n) %}{% if n > 0 %}{{ n }}{{ f(n - 1) }}{% endif %}{% endmacro %}{{ f(5) }}") == "54321");
}

TEST_CASE("jinja sandbox: the recursion limits are safe on a small thread stack") {
  // Measured at the default limits: the deepest cases take ~256 KiB of stack in a Release build
  // and ~1.5 MiB under ASan/UBSan, against 8 MiB for the main thread and for std::thread on Linux.
  // Here 1 MiB (2 MiB with sanitizers) must do.
  std::string macro_err, nest_err, value_err, ok, blocks;
  on_small_stack(kSanitized ? size_t(2) << 20 : size_t(1) << 20, [&] {
    ok = render("{{ " + repeat("- ", 250) + "1 }}");
    blocks = render(repeat("{% if true %}{% for i in [1] %}", 125) + "x" + repeat("{% endfor %}{% endif %}", 125));
    macro_err = error_of("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}");
    nest_err = error_of("{{ " + repeat("(", 300) + "1" + repeat(")", 300) + " }}");
    value_err = error_of(
        "{% set ns = namespace(x=[]) %}{% for i in range(5000) %}{% set ns.x = [ns.x] %}{% endfor %}{{ ns.x }}");
  });
  CHECK(ok == "1");
  CHECK(blocks == "x");
  CHECK_MESSAGE(macro_err.find("max_depth") != std::string::npos, macro_err);
  CHECK_MESSAGE(nest_err.find("max_nesting") != std::string::npos, nest_err);
  CHECK_MESSAGE(value_err.find("max_depth") != std::string::npos, value_err);
}

TEST_CASE("jinja sandbox: deeply nested values: printing and tojson stop, freeing does not recurse") {
  auto build = [](int rounds, int depth) {  // a list nested rounds * depth deep
    return "{% set ns = namespace(x=[]) %}{% for k in range(" + std::to_string(rounds) + ") %}{% for i in range(" +
           std::to_string(depth) + ") %}{% set ns.x = [ns.x] %}{% endfor %}{% endfor %}";
  };
  for (const char* use : {"{{ ns.x }}", "{{ ns.x | tojson }}", "{{ ns.x == ns.x }}", "{{ ns.x < ns.x }}"}) {
    std::string err = error_of(build(1, 300) + use);
    CHECK_MESSAGE(err.find("max_depth") != std::string::npos, use << ": " << err);
  }
  // Built and freed without a stack overflow (a recursive free needs ~80 bytes of stack a level in
  // a Release build: 40 MB here; sanitizer builds, with bigger frames, run a smaller case).
  CHECK(render(build(kSanitized ? 1 : 5, 99999) + "{{ ns.x | length }}") == "1");
  // A namespace holding itself: the cycle is broken (not leaked) and printing it is bounded.
  std::string err = error_of("{% set ns = namespace() %}{% set ns.me = ns %}{{ ns }}");
  CHECK_MESSAGE(err.find("max_depth") != std::string::npos, err);
}

TEST_CASE("jinja sandbox: integer arithmetic cannot trap or overflow") {
  const std::string min = "(-9223372036854775807 - 1)";
  CHECK(render("{{ " + min + " % -1 }}") == "0");  // Python: 0 (x86 idiv traps: SIGFPE)
  for (const std::string& expr : std::vector<std::string>{min + " // -1", "-" + min, "9223372036854775807 + 1", min + " - 1",
                                  "4611686018427387904 * 2", "3 ** 40", "2 ** 9223372036854775807",
                                  "(" + min + ") | abs", "1e300 | int", "'99999999999999999999' | int",
                                  "'%d' % 1e300"}) {
    std::string err = error_of("{{ " + expr + " }}");
    CHECK_MESSAGE(err.find("integer overflow in template") != std::string::npos, expr << ": " << err);
  }
  CHECK(render("{{ 2 ** 62 }} {{ (-2) ** 63 }} {{ " + min + " // 2 }} {{ 7 % -3 }} {{ -7 // 2 }}") ==
        "4611686018427387904 -9223372036854775808 -4611686018427387904 -2 -4");
  CHECK(render("{{ 2 ** -1 }} {{ 1 ** 9223372036854775807 }} {{ (-1) ** 9223372036854775807 }}") == "0.5 1 -1");
  CHECK_THROWS_WITH_AS(render("{{ 1 // 0 }}"), doctest::Contains("by zero"), InputError);
  CHECK_THROWS_WITH_AS(render("{{ 1 % 0 }}"), doctest::Contains("by zero"), InputError);
  CHECK_THROWS_WITH_AS(render("{{ 1 / 0 }}"), doctest::Contains("by zero"), InputError);
  // Huge slice steps and range ends do not overflow the index.
  CHECK(render("{{ [1, 2, 3][::9223372036854775807] }}{{ 'abc'[::-9223372036854775807] }}") == "[1]c");
  CHECK(render("{{ range(9223372036854775806, 9223372036854775807, 1000) | list }}") == "[9223372036854775806]");
  CHECK(render("{{ [1, 2, 3][-9223372036854775807 - 1:] }}{{ 'abc'[(-9223372036854775807 - 1)::-1] }}") ==
        "[1, 2, 3]");
  CHECK(render("{{ 'x' | truncate(9223372036854775807, leeway=9223372036854775807) }}") == "x");
}

TEST_CASE("jinja sandbox: runaway loops stop at the loop and step limits") {
  // 1e10 iterations without a limit. (Lower limits than the defaults keep the test fast under
  // sanitizers; the defaults stop it the same way, at 1e6 iterations.)
  RenderLimits loops;
  loops.max_loop_iterations = 100000;
  std::string err =
      error_of("{% for i in range(99999) %}{% for j in range(99999) %}{% endfor %}{% endfor %}", loops);
  CHECK_MESSAGE(err.find("max_loop_iterations") != std::string::npos, err);
  CHECK_MESSAGE(err.find("(line 1)") != std::string::npos, err);
  RenderLimits steps;
  steps.max_steps = 100000;
  err = error_of("{% for i in range(99999) %}{{ i }}{% endfor %}", steps);
  CHECK_MESSAGE(err.find("max_steps") != std::string::npos, err);
  // Quadratic builtins count their work too (5e9 comparisons uncounted).
  steps.max_steps = 1000000;
  err = error_of("{{ range(99999) | unique | list | length }}", steps);
  CHECK_MESSAGE(err.find("max_steps") != std::string::npos, err);
}

TEST_CASE("jinja sandbox: repetition and joins cannot build values past the output limit") {
  RenderLimits small;  // 1 MB instead of 64 MiB: the same checks, less memory and time under ASan
  small.max_output_bytes = 1000000;
  for (const char* src : {"{{ 'x' * 100000000000 }}", "{{ [1] * 10000000000 }}", "{{ ('x' * 600000) * 2 }}",
                          "{{ 'x' | center(100000000000) }}", "{{ 'ab' | indent(100000000000) }}",
                          "{{ [1] | tojson(indent=100000000000) }}", "{{ ('x' * 1000) | replace('x', 'y' * 100000) }}",
                          "{{ '%100000000000d' % 1 }}", "{{ [1] | batch(100000000000, 0) | list }}"}) {
    std::string err = error_of(src, small);
    CHECK_MESSAGE(err.find("max_output_bytes") != std::string::npos, src << ": " << err);
  }
  CHECK(render("{{ ('x' * 600000) | length }}", small) == "600000");
  // Doubling a string in a loop stops at the limit (64 MiB by default), not at the end of memory.
  std::string err = error_of(
      "{% set ns = namespace(s='x') %}{% for i in range(100) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}", small);
  CHECK_MESSAGE(err.find("max_output_bytes") != std::string::npos, err);
}

TEST_CASE("jinja sandbox: output limit, deadline and cancel flag") {
  RenderLimits small;
  small.max_output_bytes = 1000;
  std::string err = error_of("{% for i in range(2000) %}x{% endfor %}", small);
  CHECK_MESSAGE(err.find("max_output_bytes") != std::string::npos, err);
  CHECK(render("{% for i in range(1000) %}x{% endfor %}", small).size() == 1000);

  RenderLimits late;
  late.deadline = std::chrono::steady_clock::now() - std::chrono::seconds(1);
  CHECK_THROWS_WITH_AS(render("{{ 1 }}", late), doctest::Contains("deadline"), InputError);

  std::atomic<bool> cancel{true};
  RenderLimits cancelled;
  cancelled.cancel = &cancel;
  CHECK_THROWS_WITH_AS(render("{{ 1 }}", cancelled), doctest::Contains("cancelled"), InputError);
  cancel = false;
  CHECK(render("{{ 1 }}", cancelled) == "1");

  // A deadline stops a long render in time.
  RenderLimits soon;
  soon.deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(50);
  soon.max_loop_iterations = soon.max_steps = INT64_MAX;
  auto t0 = std::chrono::steady_clock::now();
  err = error_of("{% for i in range(99999) %}{% for j in range(99999) %}{% endfor %}{% endfor %}", soon);
  CHECK_MESSAGE(err.find("deadline") != std::string::npos, err);
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(5));
}

TEST_CASE("jinja sandbox: the JSON context is depth-guarded") {
  ordered_json deep = ordered_json::array();
  for (int k = 0; k < 1000; ++k) deep = ordered_json::array({deep});
  llmctl::ChatTemplate t("{{ x | length }}");
  CHECK_THROWS_WITH_AS(t.render({{"x", deep}}), doctest::Contains("max_depth"), InputError);
  nlohmann::ordered_json ok = ordered_json::array();
  for (int k = 0; k < 60; ++k) ok = ordered_json::array({ok});
  CHECK(t.render({{"x", ok}}) == "1");
}

namespace {
std::unique_ptr<llmctl::BpeTokenizer> tokenizer_with_template(const std::string& tmpl) {
  llmctl::BpeTokenizer::Parts p;
  for (int b = 0; b < 256; ++b) p.vocab.push_back(llmctl::bytes_to_unicode_text(std::string(1, char(b))));
  p.pre = llmctl::PreTokenizer::for_gguf("gpt2");
  p.chat_template = tmpl;
  return std::make_unique<llmctl::BpeTokenizer>(std::move(p));
}
}  // namespace

TEST_CASE("jinja sandbox: the tokenizer compiles its template at load; a broken one fails chats only") {
  const nlohmann::json chat = {{{"role", "user"}, {"content", "hi"}}};
  auto good = tokenizer_with_template("{% for m in messages %}[{{ m.content }}]{% endfor %}");
  CHECK(llmctl::render_chat(*good, chat) == "[hi]");
  RenderLimits late;
  late.deadline = std::chrono::steady_clock::now() - std::chrono::seconds(1);
  CHECK_THROWS_WITH_AS(llmctl::render_chat(*good, chat, true, late), doctest::Contains("deadline"), InputError);

  auto broken = tokenizer_with_template("ok\n{% for %}");  // loads (a warning goes to stderr)
  CHECK(broken->chat_template() == "ok\n{% for %}");       // the source stays, for convert
  CHECK(broken->encode("hi").size() == 2);                  // plain prompts still work
  CHECK_THROWS_WITH_AS(llmctl::render_chat(*broken, chat), doctest::Contains("chat template is invalid"), InputError);
  CHECK_THROWS_WITH_AS(llmctl::render_chat(*broken, chat), doctest::Contains("(line 2)"), InputError);

  auto none = tokenizer_with_template("");
  CHECK_THROWS_WITH_AS(llmctl::render_chat(*none, chat), doctest::Contains("no chat template"), InputError);
}
