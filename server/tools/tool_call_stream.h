// One choice's output read for tool calls while it streams: each delta of text becomes the
// content it adds and the call deltas OpenAI streams (a call's index, id and name first, then its
// arguments in pieces). The pieces of a call's arguments concatenate to the arguments of the whole
// output's parse: the same scan reads both (tool_call_format.h).
//
// States per call: unseen -> announced (index, id, name sent) -> arguments growing -> done.
#pragma once
#include <string>
#include <string_view>
#include <vector>

#include "server/tools/tool_call_format.h"
#include "server/tools/tool_request.h"

namespace llmctl::server {

struct ToolCallDelta {
  size_t index = 0;
  std::string id, name;  // set in a call's first delta only
  std::string arguments;
};

struct ToolStreamPiece {
  std::string content;
  std::vector<ToolCallDelta> calls;
};

struct ParsedToolCall {
  std::string id, name, arguments;
};

// What a client makes of the deltas: content appended, each call opened by its first delta and its
// arguments appended (OpenAI's SDKs do this). Throws Error when a delta names a call out of order.
void accumulate(const ToolStreamPiece& piece, std::string& content, std::vector<ParsedToolCall>& calls);

class ToolCallStream {
 public:
  ToolCallStream(const ToolCallFormat& format, const ToolRequest& tools);
  ToolStreamPiece push(std::string_view delta);
  ToolStreamPiece finish();  // what was held back, once the output is complete
  // The calls so far (after finish(): all of them) and the content.
  std::vector<ParsedToolCall> calls() const;
  const std::string& content() const { return content_; }
  bool has_calls() const { return !sent_.empty(); }

 private:
  ToolStreamPiece advance(bool final);

  const ToolCallFormat& format_;
  const ToolRequest& tools_;
  std::string text_, content_;
  struct Sent {
    std::string id, name, arguments;
  };
  std::vector<Sent> sent_;
};

}  // namespace llmctl::server
