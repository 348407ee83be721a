// llmctl_tool_calls: reads a model's output for tool calls as `serve` does, for tests that render
// real chat templates' tool calls and parse them back (tests/e2e/test_tool_call_parsers.py).
//   llmctl_tool_calls FORMAT|--template TEMPLATE_FILE TOOLS_JSON_FILE TEXT_FILE [CHUNK]
// Prints {"format", "content", "calls": [{"name", "arguments"}], "streamed": {...}} where
// "streamed" is what the stream deltas add up to when the text arrives CHUNK bytes at a time
// (default 1). Exit 1 with the error on stderr.
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "engine/core/error.h"
#include "server/tools/tool_call_stream.h"

namespace {
using namespace llmctl;
using namespace llmctl::server;
using ojson = nlohmann::ordered_json;

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  LLM_REQUIRE(f) << "cannot open " << path;
  std::ostringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

ojson calls_json(const std::vector<ParsedToolCall>& calls) {
  ojson list = ojson::array();
  for (const auto& c : calls) list.push_back({{"name", c.name}, {"arguments", c.arguments}});
  return list;
}
}  // namespace

int main(int argc, char** argv) {
  if (argc < 4 || argc > 6) {
    std::fprintf(stderr, "usage: llmctl_tool_calls FORMAT|--template TEMPLATE_FILE TOOLS_JSON_FILE TEXT_FILE [CHUNK]\n");
    return 2;
  }
  try {
    int a = 1;
    std::string format_name = argv[a++];
    if (format_name == "--template") format_name = tool_call_format_for_template(read_file(argv[a++]));
    LLM_REQUIRE(argc - a >= 2) << "TOOLS_JSON_FILE and TEXT_FILE are needed";
    ToolRequest tools;
    tools.tools_json = ojson::parse(read_file(argv[a++]));
    for (const auto& t : tools.tools_json)
      tools.tools.push_back({t["function"]["name"].get<std::string>(), t["function"].value("parameters", ojson::object())});
    const std::string text = read_file(argv[a++]);
    const size_t chunk = a < argc ? std::stoul(argv[a]) : 1;
    LLM_REQUIRE(chunk > 0) << "CHUNK must be at least 1";
    auto format = make_tool_call_format(format_name);

    ToolCallStream whole(*format, tools);
    whole.push(text);
    whole.finish();

    ToolCallStream stream(*format, tools);
    std::string content;
    std::vector<ParsedToolCall> calls;
    for (size_t i = 0; i < text.size(); i += chunk)
      accumulate(stream.push(std::string_view(text).substr(i, chunk)), content, calls);
    accumulate(stream.finish(), content, calls);

    const ojson out = {{"format", format->name()},
                       {"content", whole.content()},
                       {"calls", calls_json(whole.calls())},
                       {"streamed", {{"content", content}, {"calls", calls_json(calls)}}}};
    std::printf("%s\n", out.dump().c_str());
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "llmctl_tool_calls: %s\n", e.what());
    return 1;
  }
}
