// Server-sent events, the client side: bytes in (as they arrive, split anywhere), the data payload
// of each complete event out. An event ends at a blank line ("\n\n" or "\r\n\r\n"); its "data:"
// lines are joined with "\n" (one optional space after the colon is dropped); comments (":...")
// and other fields (event:, id:, retry:) are skipped; an event without data yields nothing.
#pragma once
#include <string>
#include <string_view>
#include <vector>

namespace llmctl::bench {

class SseParser {
 public:
  // Feeds a chunk; returns the data of every event completed by it, in order.
  std::vector<std::string> feed(std::string_view chunk);
  // Bytes of an event still incomplete (a stream that ends without a blank line leaves them here).
  const std::string& pending() const { return buf_; }

 private:
  std::string buf_;
};

}  // namespace llmctl::bench
