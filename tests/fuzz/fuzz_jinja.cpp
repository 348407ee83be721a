// Chat templates (Jinja): the input is the template source, optionally followed by a NUL and a
// JSON context (parsed as a request body is). Without a context, or when it is not a JSON object,
// a fixed conversation is used (the JSON value, if any, is added to it as "extra"). Parse and
// render run under small RenderLimits so no single input runs long.
#include <chrono>
#include <cstdint>
#include <string>

#include "engine/core/json_bounded.h"
#include "engine/tokenizer/chat_template.h"
#include "tests/fuzz/fuzz_util.h"

using namespace llmctl;
using namespace llmctl::fuzz;
using ojson = nlohmann::ordered_json;

namespace {
ojson fixed_context() {
  ojson messages = ojson::array();
  messages.push_back({{"role", "system"}, {"content", "You are a helpful assistant."}});
  messages.push_back({{"role", "user"}, {"content", "Write a haiku about the sea."}});
  messages.push_back({{"role", "assistant"}, {"content", "Waves fold into foam"}});
  messages.push_back({{"role", "user"}, {"content", "Another one, in French."}});
  ojson tools = ojson::array();
  tools.push_back({{"type", "function"},
                   {"function", {{"name", "get_weather"}, {"parameters", {{"type", "object"}}}}}});
  return {{"messages", messages}, {"add_generation_prompt", true}, {"bos_token", "<s>"},
          {"eos_token", "</s>"},  {"tools", tools}};
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 64 * 1024) return 0;
  Bytes in(data, size);
  const std::string source(in.until_nul());
  const std::string_view ctx_text = in.rest();
  static const ojson base = fixed_context();

  ojson context = base;
  if (!ctx_text.empty()) {
    expect_errors([&] {
      ojson j = parse_ordered_json_bounded(ctx_text, kRequestJsonLimits, "the context");
      if (j.is_object())
        context = std::move(j);
      else
        context["extra"] = std::move(j);
    });
  }
  RenderLimits limits;
  limits.max_depth = 64;
  limits.max_loop_iterations = 20'000;
  limits.max_steps = 200'000;
  limits.max_output_bytes = size_t(1) << 20;
  limits.deadline = std::chrono::steady_clock::now() + std::chrono::seconds(3);
  expect_errors([&] {
    ChatTemplate tmpl(source);
    (void)tmpl.render(context, limits);
  });
  return 0;
}
