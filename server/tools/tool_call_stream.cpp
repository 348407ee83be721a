#include "server/tools/tool_call_stream.h"

#include "engine/core/error.h"

namespace llmctl::server {

ToolCallStream::ToolCallStream(const ToolCallFormat& format, const ToolRequest& tools) : format_(format), tools_(tools) {}

ToolStreamPiece ToolCallStream::push(std::string_view delta) {
  text_.append(delta);
  return advance(false);
}

ToolStreamPiece ToolCallStream::finish() { return advance(true); }

ToolStreamPiece ToolCallStream::advance(bool final) {
  ToolScan scan = format_.scan(text_, final, tools_);
  if (!tools_.parallel && scan.calls.size() > 1) scan.calls.resize(1);
  ToolStreamPiece out;
  // The scan of more text extends the scan of less (tool_call_format.h); what does not is kept as
  // sent rather than contradicted.
  if (scan.content.size() > content_.size() && scan.content.compare(0, content_.size(), content_) == 0) {
    out.content = scan.content.substr(content_.size());
    content_ = std::move(scan.content);
  }
  for (size_t i = 0; i < scan.calls.size(); ++i) {
    const ScannedCall& c = scan.calls[i];
    if (!c.name_done) break;
    if (i == sent_.size()) {
      if (i > 0 && !scan.calls[i - 1].done) break;  // calls go out in order
      sent_.push_back({format_.call_id(), c.name, ""});
      out.calls.push_back({i, sent_[i].id, c.name, ""});
    }
    Sent& s = sent_[i];
    if (c.arguments.size() > s.arguments.size() && c.arguments.compare(0, s.arguments.size(), s.arguments) == 0) {
      std::string more = c.arguments.substr(s.arguments.size());
      s.arguments = c.arguments;
      if (!out.calls.empty() && out.calls.back().index == i) out.calls.back().arguments += more;
      else out.calls.push_back({i, "", "", std::move(more)});
    }
  }
  return out;
}

void accumulate(const ToolStreamPiece& p, std::string& content, std::vector<ParsedToolCall>& calls) {
  content += p.content;
  for (const auto& d : p.calls) {
    if (!d.id.empty()) {
      LLM_CHECK(d.index == calls.size()) << "call " << d.index << " announced out of order";
      calls.push_back({d.id, d.name, ""});
    }
    LLM_CHECK(d.index < calls.size()) << "arguments for call " << d.index << " before it was announced";
    calls[d.index].arguments += d.arguments;
  }
}

std::vector<ParsedToolCall> ToolCallStream::calls() const {
  std::vector<ParsedToolCall> out;
  for (const Sent& s : sent_) out.push_back({s.id, s.name, s.arguments});
  return out;
}

}  // namespace llmctl::server
