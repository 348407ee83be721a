// What the one log line of a request says beyond method, path and status: filled in by the
// handler on the HTTP worker thread that serves the request (handler, stream and logger all run
// on that thread), reset when the next request starts.
#pragma once
#include <cstdint>
#include <string>

namespace llmctl::server {

struct RequestRecord {
  std::string id;             // the response id (cmpl-..., chatcmpl-...) when there is one
  int64_t prompt_tokens = -1, completion_tokens = -1;
  std::string note;           // e.g. "client disconnected", "timeout"
  double start_seconds = 0;
};

RequestRecord& current_request();

}  // namespace llmctl::server
