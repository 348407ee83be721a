// llmctl chat: an interactive conversation (a REPL) over one engine; the KV of earlier turns is
// reused through the prefix cache (engine/chat/chat_session.h).
//
// On a terminal: a `> ` prompt with line editing and history (libedit when built with it), replies
// streamed, /commands, Ctrl-C stops a reply, Ctrl-D quits. Otherwise (a pipe or a file): one turn per
// input line, each reply on stdout ending with a newline, no decorations; notes and per-turn stats
// go to stderr in both modes, so stdout holds only replies.
#include <unistd.h>

#include <atomic>
#include <clocale>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <langinfo.h>
#include <string>

#ifdef LLMCTL_HAVE_LIBEDIT
#include <editline/readline.h>
#endif

#include "cli/commands.h"
#include "cli/engine_flags.h"
#include "cli/sigint_input.h"
#include "engine/chat/chat_session.h"
#include "engine/core/error.h"
#include "engine/core/utf8.h"
#include "engine/kv/kv_cache_spec.h"
#include "engine/runtime.h"

namespace llmctl::cli {

namespace {

struct ChatArgs {
  std::string system;
  EngineFlags engine;
  SamplingParams sp;
  uint64_t seed = 0;
};

enum class ReadStatus { Line, Eof, Interrupted };

// Set while a LineReader exists: libedit reads its keys through it (rl_getc_function).
SigintInput* g_input = nullptr;

#ifdef LLMCTL_HAVE_LIBEDIT
// One key as a code point: libedit takes what this returns as a wchar_t, so UTF-8 is decoded here
// (a malformed sequence is U+FFFD). EOF ends readline() with NULL; the interrupted flag tells a
// Ctrl-C from the end of the input.
extern "C" int read_key_for_libedit(FILE*) {
  int c = g_input->next_byte();
  if (c < 0x80) return c < 0 ? EOF : c;
  const int extra = c >= 0xF0 && c < 0xF5 ? 3 : c >= 0xE0 ? 2 : c >= 0xC2 && c < 0xE0 ? 1 : 0;
  if (extra == 0) return 0xFFFD;
  int cp = c & (0x3F >> extra);
  for (int i = 0; i < extra; ++i) {
    c = g_input->next_byte();
    if (c < 0) return EOF;
    if ((c & 0xC0) != 0x80) {
      g_input->unread();  // the byte that ended the sequence is a key of its own
      return 0xFFFD;
    }
    cp = cp << 6 | (c & 0x3F);
  }
  const int min = extra == 1 ? 0x80 : extra == 2 ? 0x800 : 0x10000;
  return cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp < 0xE000) ? 0xFFFD : cp;
}
#endif

// One input line: libedit's readline on a terminal (when built with it), plain lines otherwise;
// a Ctrl-C while waiting is ReadStatus::Interrupted (sigint_input.h says why the wait needs a pipe).
// The prompt and the echo go to stdout, or to stderr when stdout is not a terminal (`chat > log`).
class LineReader {
 public:
  explicit LineReader(bool interactive)
      : interactive_(interactive), term_(isatty(STDOUT_FILENO) ? stdout : stderr) {
    g_input = &input_;
#ifdef LLMCTL_HAVE_LIBEDIT
    if (interactive_) {
      rl_readline_name = "llmctl";  // for ~/.editrc bindings
      rl_outstream = term_;
      rl_getc_function = read_key_for_libedit;  // before the first readline(), which installs it
      // rl_catch_signals stays on: libedit's handlers put the terminal back in its normal mode on
      // SIGINT, SIGTERM, SIGTSTP, ..., then pass the signal on (SIGINT to SigintInput's handler).
      // libedit decodes keys through the locale: without a UTF-8 one, non-ASCII input is lost.
      std::setlocale(LC_CTYPE, "");
      if (std::strcmp(nl_langinfo(CODESET), "UTF-8") != 0) std::setlocale(LC_CTYPE, "C.UTF-8");
    }
#endif
  }
  ~LineReader() { g_input = nullptr; }

  FILE* term() const { return term_; }
  std::atomic<bool>& interrupted() { return input_.interrupted(); }
  // From here on, a Ctrl-C belongs to the coming read or reply.
  void clear_interrupt() { input_.clear(); }

  ReadStatus read(std::string& line) {
#ifdef LLMCTL_HAVE_LIBEDIT
    if (interactive_) {
      char* l = readline("> ");
      if (!l) return input_.interrupted().load() ? ReadStatus::Interrupted : ReadStatus::Eof;
      line.assign(l);
      std::free(l);
      if (!line.empty()) add_history(line.c_str());
      return ReadStatus::Line;
    }
#endif
    if (interactive_) {
      std::fputs("> ", term_);
      std::fflush(term_);
    }
    const int r = input_.read_line(line);
    if (r == SigintInput::kInterrupted) return ReadStatus::Interrupted;
    return r == SigintInput::kEof ? ReadStatus::Eof : ReadStatus::Line;
  }

 private:
  bool interactive_;
  FILE* term_;
  SigintInput input_;
};

void note(const std::string& text) {
  std::fflush(stdout);  // never glued to a reply
  std::fprintf(stderr, "%s\n", text.c_str());
}

const char* kHelp =
    "commands:\n"
    "  /clear          forget the conversation (the system message stays)\n"
    "  /system [TEXT]  set the system message (without TEXT: remove it); the conversation stays\n"
    "  /help           this list\n"
    "  /exit, /quit    leave (Ctrl-D does too)\n"
    "Ctrl-C stops a reply (what came is kept in the conversation). When the conversation outgrows the\n"
    "context, its oldest turns are dropped.";

bool blank(const std::string& s) { return s.find_first_not_of(" \t\r\n\f\v") == std::string::npos; }

void print_turn_stats(const ChatTurnStats& st) {
  std::fflush(stdout);
  std::fprintf(stderr,
               "llmctl: prompt %d tokens (%d from the prefix cache), %.1f tok/s | generated %d tokens, %.1f tok/s | "
               "finish %s",
               st.prompt_tokens, st.cached_prompt_tokens, st.prefill_tokens_per_second(), st.generated_tokens,
               st.decode_tokens_per_second(), st.finish_reason.c_str());
  if (st.dropped_turns > 0)
    std::fprintf(stderr, " | dropped the %d oldest turn%s to fit the context", st.dropped_turns,
                 st.dropped_turns == 1 ? "" : "s");
  std::fputc('\n', stderr);
}

enum class Action { Continue, Exit };

// A /command line.
Action run_command(ChatSession& session, const std::string& line) {
  const size_t space = line.find_first_of(" \t");
  const std::string cmd = line.substr(0, space);
  const size_t arg_at = space == std::string::npos ? space : line.find_first_not_of(" \t", space);
  const std::string arg = arg_at == std::string::npos ? "" : line.substr(arg_at);
  if (cmd == "/exit" || cmd == "/quit") return Action::Exit;
  if (cmd == "/help") {
    note(kHelp);
  } else if (cmd == "/clear") {
    session.clear();
    note("(conversation cleared)");
  } else if (cmd == "/system") {
    session.set_system(arg);
    note(arg.empty() ? "(system message removed)" : "(system message set)");
  } else {
    note("unknown command " + cmd + " (/help lists them)");
  }
  return Action::Continue;
}

int repl(ChatSession& session, bool interactive) {
  LineReader reader(interactive);
  // A line was refused: without a terminal, the exit status says so (a terminal's user saw it).
  bool refused = false;
  for (;;) {
    reader.clear_interrupt();  // a Ctrl-C from here on stops the coming reply
    std::string line;
    const ReadStatus rs = reader.read(line);
    if (rs == ReadStatus::Eof) {
      if (interactive) std::fputc('\n', reader.term());  // the shell's prompt on a line of its own
      std::fflush(stdout);
      return refused && !interactive ? 1 : 0;
    }
    if (rs == ReadStatus::Interrupted) {
      if (!interactive) return 130;  // a script's Ctrl-C ends the run, as the shell's convention
      std::fputc('\n', reader.term());
      note("(Ctrl-C stops a reply; /exit or Ctrl-D quits)");
      continue;
    }
    if (blank(line)) {
      note("(empty message: nothing sent; /help lists the commands)");
      continue;
    }
    try {
      if (line[0] == '/' && utf8_valid(line)) {
        if (run_command(session, line) == Action::Exit) return refused && !interactive ? 1 : 0;
        continue;
      }
      const ChatTurnStats st = session.turn(
          line,
          [](std::string_view piece) {
            std::fwrite(piece.data(), 1, piece.size(), stdout);
            std::fflush(stdout);
          },
          reader.interrupted());
      std::fputc('\n', stdout);  // every reply ends with a newline (an interrupted one too)
      std::clearerr(stdout);
      print_turn_stats(st);
      if (st.finish_reason == "abort" && !interactive) return 130;
    } catch (const Error& e) {
      // The turn is refused and the history unchanged: the conversation goes on.
      note(std::string("llmctl: error: ") + e.what());
      refused = true;
    }
  }
}

}  // namespace

Runner add_chat(CLI::App& app) {
  auto a = std::make_shared<ChatArgs>();
  auto* s = app.add_subcommand(
      "chat",
      "interactive chat with the model's chat template: a REPL on a terminal (/help for commands, Ctrl-C stops a "
      "reply, Ctrl-D quits), one turn per line otherwise; earlier turns' KV is reused through the prefix cache");
  s->add_option("--system", a->system, "system message (the /system command replaces it)");
  add_sampling_flags(s, a->sp, a->seed, 512, "tokens per reply at most");
  add_runtime_flags(s, a->engine);
  add_kv_cache_flags(s, a->engine);
  return [a, s]() -> int {
    finish_sampling_flags(s, a->sp, a->seed);
    const bool interactive = isatty(STDIN_FILENO);

    Runtime rt = load_engine_runtime(a->engine);
    EngineConfig ec = engine_config(a->engine, s);
    ec.sched.max_num_seqs = 1;  // one reply at a time
    ChatSession session(*rt.executor, *rt.tokenizer, ec, a->sp);
    session.set_system(a->system);
    std::fprintf(stderr, "llmctl: %s | weights %s | %s | load %.2f s | %s | context %d tokens (prompt + reply) | seed %llu\n",
                 rt.model_path.c_str(), rt.weights.c_str(), rt.backend->name().c_str(), rt.load_seconds,
                 session.engine().describe_kv_cache().c_str(),
                 session.token_limit(), (unsigned long long)*a->sp.seed);
    if (interactive) std::fprintf(stderr, "llmctl: /help for commands, Ctrl-C stops a reply, Ctrl-D quits\n");
    return repl(session, interactive);
  };
}

}  // namespace llmctl::cli
