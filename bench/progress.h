// A progress bar on stderr for long runs. On a terminal it redraws one line ("\r") at most ten
// times a second; elsewhere (a pipe, CI logs) it prints a plain line at most every 10 seconds.
// Nothing is shown during the first 2 seconds, so short runs stay quiet.
#pragma once
#include <chrono>
#include <cstdint>
#include <string>

namespace llmctl::bench {

class Progress {
 public:
  Progress(std::string label, int64_t total, bool enabled = true);
  ~Progress();  // finish()
  void update(int64_t done, const std::string& note = "");
  void finish();  // ends the line if one was drawn

 private:
  std::string label_;
  int64_t total_;
  bool enabled_, tty_, drawn_ = false, finished_ = false;
  std::chrono::steady_clock::time_point start_, last_;
};

}  // namespace llmctl::bench
