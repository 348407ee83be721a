#include "bench/sse.h"

namespace llmctl::bench {

namespace {
// Data of one event's text (the lines before the blank line), or nothing when it has no data.
bool event_data(std::string_view ev, std::string& out) {
  bool any = false;
  size_t pos = 0;
  while (pos <= ev.size()) {
    size_t nl = ev.find('\n', pos);
    std::string_view line = ev.substr(pos, nl == std::string_view::npos ? std::string_view::npos : nl - pos);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.rfind("data", 0) == 0 && (line.size() == 4 || line[4] == ':')) {
      std::string_view v = line.size() > 4 ? line.substr(5) : std::string_view{};
      if (!v.empty() && v.front() == ' ') v.remove_prefix(1);
      if (any) out += '\n';
      out.append(v);
      any = true;
    }
    if (nl == std::string_view::npos) break;
    pos = nl + 1;
  }
  return any;
}
}  // namespace

std::vector<std::string> SseParser::feed(std::string_view chunk) {
  buf_.append(chunk);
  std::vector<std::string> out;
  size_t start = 0;
  while (true) {
    // The earliest blank line: "\n\n" or "\n\r\n".
    size_t a = buf_.find("\n\n", start), b = buf_.find("\n\r\n", start);
    size_t end, skip;
    if (a == std::string::npos && b == std::string::npos) break;
    if (b == std::string::npos || (a != std::string::npos && a < b)) {
      end = a;
      skip = 2;
    } else {
      end = b;
      skip = 3;
    }
    std::string data;
    if (event_data(std::string_view(buf_).substr(start, end - start), data)) out.push_back(std::move(data));
    start = end + skip;
  }
  buf_.erase(0, start);
  return out;
}

}  // namespace llmctl::bench
