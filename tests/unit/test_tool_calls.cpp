// Tool calls: the request's tool fields, the parsers (whole and streamed), the constraint that
// makes required / named / auto calls follow the tools' schemas (walked with random bytes through
// xgrammar and parsed back), and the prompt given to templates that know no tools. The parsers
// against real templates' renders: tests/e2e/test_tool_call_parsers.py.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "constraint_walk.h"
#include "server/api_error.h"
#include "server/chat_messages.h"
#include "server/tools/tool_call_stream.h"
#include "server/tools/tool_constraint.h"
#include "server/tools/tool_prompt.h"

using namespace llmctl;
using namespace llmctl::server;
using namespace llmctl::test;
using json = nlohmann::json;
using ojson = nlohmann::ordered_json;

namespace {

const char* kTools = R"([
  {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object",
    "properties": {"unit": {"enum": ["c", "f"]}, "days": {"type": "integer", "minimum": 0, "maximum": 9},
                   "detail": {"type": "boolean"}}, "required": ["unit", "days"]}}},
  {"type": "function", "function": {"name": "ping", "parameters": {"type": "object", "properties": {}}}}
])";

ToolRequest tools_request(const std::string& extra = "") {
  const std::string body = std::string(R"({"tools": )") + kTools + extra + "}";
  auto r = parse_tool_request(json::parse(body), body);
  REQUIRE(r);
  return *r;
}

struct Read {
  std::string content;
  std::vector<ParsedToolCall> calls;
};

// The output read whole, and read again as a stream `chunk` bytes at a time; both must agree.
Read read(const ToolCallFormat& f, const ToolRequest& tools, const std::string& text, size_t chunk = 1) {
  ToolCallStream whole(f, tools);
  whole.push(text);
  whole.finish();
  ToolCallStream stream(f, tools);
  Read s;
  for (size_t i = 0; i < text.size(); i += chunk)
    accumulate(stream.push(std::string_view(text).substr(i, chunk)), s.content, s.calls);
  accumulate(stream.finish(), s.content, s.calls);
  CHECK(s.content == whole.content());
  const auto calls = whole.calls();
  REQUIRE(s.calls.size() == calls.size());
  for (size_t i = 0; i < calls.size(); ++i) {
    CHECK(s.calls[i].name == calls[i].name);
    CHECK(s.calls[i].arguments == calls[i].arguments);
  }
  return {whole.content(), calls};
}

void refused(const std::string& body, const std::string& param, const std::string& message) {
  CAPTURE(body);
  try {
    parse_tool_request(json::parse(body), body);
    FAIL("accepted");
  } catch (const ApiError& e) {
    CHECK(e.status() == 400);
    CHECK(e.param() == param);
    CHECK_MESSAGE(e.message().find(message) != std::string::npos, e.message());
  }
}

}  // namespace

TEST_CASE("tools: request fields are checked, and the tools keep the client's key order") {
  const ToolRequest r = tools_request(R"(, "tool_choice": {"type": "function", "function": {"name": "ping"}},
                                          "parallel_tool_calls": false)");
  CHECK(r.tools.size() == 2);
  CHECK(r.choice == ToolChoice::named);
  CHECK(r.named == "ping");
  CHECK_FALSE(r.parallel);
  // The template sees "type" before "function", "unit" before "days" (sorted JSON would not).
  CHECK(r.tools_json[0].dump().find(R"({"type":"function","function":{"name":"get_weather")") == 0);
  CHECK(r.tools[0].parameters["properties"].begin().key() == "unit");
  CHECK(tools_request().choice == ToolChoice::automatic);
  CHECK(tools_request(R"(, "tool_choice": "none")").choice == ToolChoice::none);
  CHECK_FALSE(parse_tool_request(json::parse("{}"), "{}"));

  refused(R"({"tools": {}})", "tools", "must be a list");
  refused(R"({"tools": [{"type": "function"}]})", "tools", "tools[0].function must be an object");
  refused(R"({"tools": [{"type": "code", "function": {"name": "f"}}]})", "tools", "must be \"function\"");
  refused(R"({"tools": [{"type": "function", "function": {"name": "a b"}}]})", "tools", "function.name must be");
  refused(R"({"tools": [{"type": "function", "function": {"name": "f", "parameters": 3}}]})", "tools", "JSON schema");
  refused(R"({"tools": [{"type": "function", "function": {"name": "f", "x": 1}}]})", "tools", "function.x is not supported");
  refused(R"({"tools": [{"type": "function", "function": {"name": "f"}}, {"type": "function", "function": {"name": "f"}}]})",
          "tools", "declares the function 'f' twice");
  refused(R"({"tool_choice": "required"})", "tool_choice", "needs 'tools'");
  refused(std::string(R"({"tools": )") + kTools + R"(, "tool_choice": "always"})", "tool_choice", "must be");
  refused(std::string(R"({"tools": )") + kTools + R"(, "tool_choice": {"type": "function", "function": {"name": "nope"}}})",
          "tool_choice", "which 'tools' does not declare");
  refused(std::string(R"({"tools": )") + kTools + R"(, "parallel_tool_calls": 1})", "parallel_tool_calls", "true or false");
  std::string many = R"({"tools": [)";
  for (int i = 0; i <= int(kMaxTools); ++i)
    many += (i ? "," : "") + std::string(R"({"type": "function", "function": {"name": "f)") + std::to_string(i) + "\"}}";
  refused(many + "]}", "tools", "at most 128");
}

TEST_CASE("tools: hermes calls with text around them, whole and streamed byte by byte") {
  const auto f = make_tool_call_format("hermes");
  const ToolRequest tools = tools_request();
  const std::string text =
      "Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"unit\": \"c\", \"days\": 2}}\n</tool_call>\n"
      "<tool_call>\n{\"arguments\": {}, \"name\": \"ping\"}\n</tool_call>\nDone.";
  for (size_t chunk : {1, 3, 1000}) {
    const Read r = read(*f, tools, text, chunk);
    CHECK(r.content == "Let me check.\n\nDone.");
    REQUIRE(r.calls.size() == 2);
    CHECK(r.calls[0].name == "get_weather");
    CHECK(r.calls[0].arguments == R"({"unit": "c", "days": 2})");
    CHECK(r.calls[1].name == "ping");  // the name after the arguments: announced once read
    CHECK(r.calls[1].arguments == "{}");
    CHECK(r.calls[0].id.starts_with("call_"));
    CHECK(r.calls[0].id.size() == 29);
    CHECK(r.calls[0].id != r.calls[1].id);
  }
  // parallel_tool_calls false: the first call only
  const ToolRequest one = tools_request(R"(, "parallel_tool_calls": false)");
  CHECK(read(*f, one, text).calls.size() == 1);
}

TEST_CASE("tools: text that only looks like the start of a call is held back, then sent as content") {
  const auto f = make_tool_call_format("hermes");
  const ToolRequest tools = tools_request();
  ToolCallStream s(*f, tools);
  CHECK(s.push("Use <tool").content == "Use ");
  CHECK(s.push("box> here").content == "<toolbox> here");
  CHECK(s.push(" <tool_call>\n{\"na").content == " ");  // the blank belongs to the text before
  const ToolStreamPiece p = s.push("me\": \"ping\", \"arguments\": {\"a");
  REQUIRE(p.calls.size() == 1);
  CHECK(p.calls[0].name == "ping");
  CHECK(p.calls[0].arguments == "{\"a");
  // A call cut off (max_tokens) keeps what was read: the arguments so far.
  s.finish();
  REQUIRE(s.calls().size() == 1);
  CHECK(s.calls()[0].arguments == "{\"a");
  // Not a call: the tag and what follows are content; whitespace-only stretches between calls are not.
  CHECK(read(*f, tools, "<tool_call>\nnot json</tool_call>").content == "<tool_call>\nnot json</tool_call>");
  CHECK(read(*f, tools, "<tool_call>\n{\"arguments\": {}}\n</tool_call>").calls.empty());
  CHECK(read(*f, tools, "  \n").content.empty());
  CHECK(read(*f, tools, "<tool_call>").content == "<tool_call>");
}

TEST_CASE("tools: llama3_json, mistral and qwen3_coder outputs") {
  const ToolRequest tools = tools_request();
  const auto llama = make_tool_call_format("llama3_json");
  Read r = read(*llama, tools, R"(<|python_tag|>{"name": "get_weather", "parameters": {"unit": "f", "days": 1}}; {"name": "ping", "parameters": {}})");
  REQUIRE(r.calls.size() == 2);
  CHECK(r.calls[0].arguments == R"({"unit": "f", "days": 1})");
  CHECK(r.content.empty());
  r = read(*llama, tools, R"(The JSON is {"a": 1}.)");
  CHECK(r.calls.empty());
  CHECK(r.content == R"(The JSON is {"a": 1}.)");
  r = read(*llama, tools, R"({"a": 1})");  // an object that is not a call is content
  CHECK(r.calls.empty());
  CHECK(r.content == R"({"a": 1})");

  const auto mistral = make_tool_call_format("mistral");
  r = read(*mistral, tools, R"([TOOL_CALLS]get_weather[ARGS]{"unit": "c", "days": 0}[TOOL_CALLS]ping[CALL_ID]abc123XYZ[ARGS]{})");
  REQUIRE(r.calls.size() == 2);
  CHECK(r.calls[1].name == "ping");
  CHECK(r.calls[1].arguments == "{}");
  CHECK(r.calls[0].id.size() == 9);  // what Mistral's templates accept
  r = read(*mistral, tools, R"(Sure. [TOOL_CALLS][{"name": "ping", "arguments": {}}, {"name": "get_weather", "arguments": {"days": 3}}])");
  REQUIRE(r.calls.size() == 2);
  CHECK(r.calls[1].arguments == R"({"days": 3})");
  CHECK(r.content == "Sure. ");

  const auto coder = make_tool_call_format("qwen3_coder");
  r = read(*coder, tools,
           "Checking.\n<tool_call>\n<function=get_weather>\n<parameter=unit>\nc\n</parameter>\n<parameter=days>\n4\n"
           "</parameter>\n<parameter=detail>\nTrue\n</parameter>\n</function>\n</tool_call>");
  REQUIRE(r.calls.size() == 1);
  CHECK(r.calls[0].arguments == R"({"unit": "c", "days": 4, "detail": true})");  // by the schema's types
  CHECK(r.content == "Checking.\n");
}

TEST_CASE("tools: required, named and auto calls follow the tools' schemas in every format") {
  for (const std::string name : {"hermes", "llama3_json", "mistral", "mistral_v3", "qwen3_coder"}) {
    CAPTURE(name);
    const auto f = make_tool_call_format(name);
    for (const char* choice : {R"("required")", R"({"type": "function", "function": {"name": "get_weather"}})"}) {
      CAPTURE(choice);
      const ToolRequest tools = tools_request(std::string(R"(, "tool_choice": )") + choice);
      const auto spec = tool_call_constraint(*f, tools);
      REQUIRE(spec);
      const auto compiled = compiler().compile(*spec);
      int ended_walks = 0;
      for (uint64_t seed = 1; seed <= 12; ++seed) {
        bool ended = false;
        const std::string text = random_walk(*compiled, seed, ended, 3000);
        if (!ended) continue;
        ++ended_walks;
        CAPTURE(text);
        const Read r = read(*f, tools, text, 5);
        REQUIRE_FALSE(r.calls.empty());
        CHECK(r.content.empty());
        for (const auto& c : r.calls) {
          if (tools.choice == ToolChoice::named) CHECK(c.name == "get_weather");
          const json args = json::parse(c.arguments);  // valid JSON, always
          REQUIRE(args.is_object());
          if (c.name == "get_weather") {
            CHECK(args.contains("unit"));
            CHECK((args["unit"] == "c" || args["unit"] == "f"));
            CHECK(args["days"].is_number_integer());
            CHECK(args["days"].get<int>() >= 0);
            CHECK(args["days"].get<int>() <= 9);
            for (const auto& [k, v] : args.items()) CHECK((k == "unit" || k == "days" || k == "detail"));
          } else {
            CHECK(c.name == "ping");
            CHECK(args.empty());
          }
        }
        if (tools.choice == ToolChoice::named) CHECK(r.calls.size() == 1);
      }
      CHECK(ended_walks >= 6);
    }
  }
  // auto: free text until a call opens, then the call's text and schema
  const auto f = make_tool_call_format("hermes");
  const ToolRequest tools = tools_request();
  const auto compiled = compiler().compile(*tool_call_constraint(*f, tools));
  auto m = compiled->matcher(std::vector<int>{kEos});
  for (char c : std::string("Hello <tool_call>")) REQUIRE(m->accept(static_cast<unsigned char>(c)));
  CHECK(allowed_ids(*m) == std::vector<int>{'\n'});
  for (char c : std::string("\n{\"name\": \"")) REQUIRE(m->accept(static_cast<unsigned char>(c)));
  CHECK(allowed_ids(*m) == std::vector<int>{'g', 'p'});  // get_weather or ping, nothing else
  CHECK_FALSE(m->accept('x'));
  // none, and auto for a format without a trigger: nothing constrained
  CHECK_FALSE(tool_call_constraint(*f, tools_request(R"(, "tool_choice": "none")")));
  CHECK_FALSE(tool_call_constraint(*make_tool_call_format("llama3_json"), tools));
  // A trigger the tokenizer holds as one special token could never open a call under a triggered
  // tag (the grammar engine sees no text in it): auto is left free; required still constrains.
  const auto mistral = make_tool_call_format("mistral");
  CHECK(tool_call_constraint(*mistral, tools, false));
  CHECK_FALSE(tool_call_constraint(*mistral, tools, true));
  CHECK(tool_call_constraint(*mistral, tools_request(R"(, "tool_choice": "required")"), true));
  const test::ByteTokenizer tok;
  CHECK(is_special_token_text(tok, "<|im_start|>"));
  CHECK_FALSE(is_special_token_text(tok, "<tool_call>"));  // bytes, not one token
  CHECK_FALSE(is_special_token_text(tok, "a"));            // one token, not special
  CHECK_FALSE(is_special_token_text(tok, ""));
}

TEST_CASE("tools: chat messages with calls and results; templates without tools get them in the system prompt") {
  const json messages = json::parse(R"([
    {"role": "user", "content": "weather?"},
    {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function",
      "function": {"name": "get_weather", "arguments": "{\"unit\": \"c\", \"days\": 1}"}}]},
    {"role": "tool", "tool_call_id": "call_1", "content": "sunny"}])");
  const ojson m = normalize_chat_messages(messages);
  // arguments as an object, in the client's order
  CHECK(m[1]["tool_calls"][0]["function"]["arguments"].dump() == R"({"unit":"c","days":1})");
  CHECK(m[2]["tool_call_id"] == "call_1");

  const ToolRequest tools = tools_request();
  ToolChatInput kept = tool_chat_input(m, &tools, true);
  CHECK(kept.messages == m);
  CHECK(kept.tools == tools.tools_json);
  ToolChatInput folded = tool_chat_input(m, &tools, false);
  CHECK(folded.tools.is_null());
  REQUIRE(folded.messages.size() == 4);
  CHECK(folded.messages[0]["role"] == "system");
  CHECK(folded.messages[0]["content"].get<std::string>().find(R"("name":"get_weather")") != std::string::npos);
  CHECK(folded.messages[2]["content"] == "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"unit\":\"c\",\"days\":1}}\n</tool_call>");
  CHECK(folded.messages[3]["role"] == "user");
  CHECK(folded.messages[3]["content"] == "<tool_response>\nsunny\n</tool_response>");
  // and the format the fallback writes is the one its parser reads
  const Read r = read(*make_tool_call_format("hermes"), tools, folded.messages[2]["content"].get<std::string>());
  REQUIRE(r.calls.size() == 1);
  CHECK(json::parse(r.calls[0].arguments) == json::parse(R"({"unit": "c", "days": 1})"));

  auto refuses = [](const char* body, const char* message) {
    try {
      normalize_chat_messages(json::parse(body));
      FAIL("accepted: " << body);
    } catch (const ApiError& e) {
      CHECK(e.param() == "messages");
      CHECK_MESSAGE(e.message().find(message) != std::string::npos, e.message());
    }
  };
  refuses(R"([{"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": "{"}}]}])", "arguments");
  refuses(R"([{"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": "[1]"}}]}])", "must be a JSON object");
  refuses(R"([{"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": {}}}]}])", "must be a string");
  refuses(R"([{"role": "tool", "content": "x"}])", "tool_call_id");
  refuses(R"([{"role": "user", "content": "x", "tool_call_id": "a"}])", "tool_call_id is not supported");
}
