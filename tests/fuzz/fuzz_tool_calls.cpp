// Tool-call parsers on any model output: byte 0 picks the format (low 3 bits) and the stream's
// chunk size (bits 3-7, plus one); the rest is the output. Read whole and as a stream, both must
// agree (content and every call's name and arguments), calls are announced in order, and the
// declared tools' schemas (used by Qwen3-Coder's value types) may be anything the output names.
#include <cstdint>

#include "server/tools/tool_call_stream.h"
#include "tests/fuzz/fuzz_util.h"

using namespace llmctl;
using namespace llmctl::fuzz;
using namespace llmctl::server;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Bytes in(data, size);
  const uint8_t mode = in.u8();
  const std::string_view text = in.rest();
  const auto& names = tool_call_format_names();
  const auto format = make_tool_call_format(names[(mode & 7) % names.size()]);
  const size_t chunk = size_t(mode >> 3) + 1;
  static const ToolRequest tools = [] {
    ToolRequest r;
    r.tools.push_back({"get_w", nlohmann::ordered_json::parse(
                                    R"({"type":"object","properties":{"c":{"type":"string"},"n":{"type":["integer","null"]},"b":{"type":"boolean"},"o":{"type":"object"}}})")});
    r.tools.push_back({"f", nlohmann::ordered_json::parse(R"({"type":"object","properties":{}})")});
    return r;
  }();

  ToolCallStream whole(*format, tools);
  whole.push(text);
  whole.finish();
  ToolCallStream stream(*format, tools);
  std::string content;
  std::vector<ParsedToolCall> calls;
  try {  // calls announced in order, arguments only for announced calls
    for (size_t i = 0; i < text.size(); i += chunk) accumulate(stream.push(text.substr(i, chunk)), content, calls);
    accumulate(stream.finish(), content, calls);
  } catch (const Error&) {
    __builtin_trap();
  }
  const auto want = whole.calls();
  if (content != whole.content() || calls.size() != want.size()) __builtin_trap();
  for (size_t i = 0; i < calls.size(); ++i)
    if (calls[i].name != want[i].name || calls[i].arguments != want[i].arguments) __builtin_trap();
  return 0;
}
