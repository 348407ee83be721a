// Standard input that a Ctrl-C interrupts, whichever thread the kernel hands SIGINT to.
//
// SIGINT is process-directed: with the engine's threads alive it may run its handler on any of
// them, and libedit's own handler re-sends it with kill() while the main thread still blocks it,
// so a blocking read() on the main thread is not reliably interrupted (a Ctrl-C at the prompt was
// sometimes lost and the chat hung). Here the handler sets a flag and writes a byte to a pipe;
// every read waits on stdin and that pipe together, so a Ctrl-C always ends the wait.
#pragma once

#include <atomic>
#include <cstddef>
#include <string>

namespace llmctl::cli {

class SigintInput {
 public:
  static constexpr int kEof = -1;          // end of input, or a read error
  static constexpr int kInterrupted = -2;  // a Ctrl-C since the last clear()

  // Installs the SIGINT handler (with SA_RESTART: writes to the terminal are never cut short).
  SigintInput();
  ~SigintInput();
  SigintInput(const SigintInput&) = delete;
  SigintInput& operator=(const SigintInput&) = delete;

  // Set by every Ctrl-C; a running reply reads it between engine steps.
  std::atomic<bool>& interrupted();
  // Forgets earlier Ctrl-Cs (the flag and the pipe's bytes).
  void clear();

  // The next byte of stdin (0..255), kEof or kInterrupted.
  int next_byte();
  // Gives back the byte next_byte() just returned.
  void unread() { --pos_; }
  // One line without its '\n' (nor a '\r' before it). Returns 1 for a line, kEof at the end of the
  // input (a last line without '\n' is still returned first), kInterrupted on Ctrl-C.
  int read_line(std::string& line);

 private:
  char buf_[4096];
  size_t pos_ = 0, len_ = 0;
};

}  // namespace llmctl::cli
