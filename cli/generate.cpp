// llmctl generate: one prompt (argument or stdin), plain or as a chat, streamed to stdout.
#include <cstdio>
#include <fstream>
#include <iostream>
#include <iterator>

#include <unistd.h>

#include <nlohmann/json.hpp>

#include "cli/batch_generate.h"
#include "cli/commands.h"
#include "cli/constraint_flags.h"
#include "cli/engine_flags.h"
#include "engine/core/error.h"
#include "engine/generate_one.h"
#include "engine/runtime.h"
#include "engine/sample/detokenizer.h"
#include "engine/structured/grammar_compiler.h"
#include "engine/tokenizer/prompt.h"

namespace llmctl::cli {

namespace {
std::string read_prompt_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  LLM_REQUIRE(in) << "-f " << path << ": cannot read the file";
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  LLM_REQUIRE(utf8_valid(text)) << "-f " << path << ": the prompt is not valid UTF-8";
  return text;
}

void write_json_file(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  LLM_REQUIRE(out << text && out.flush()) << "--json " << path << ": cannot write the file";
}

struct GenerateArgs {
  std::string prompt, prompt_flag, prompt_file, system, prompts_file;
  std::string json;  // "" = text; "-" = JSON on stdout; else a file for the JSON (text still streams)
  bool chat = false;
  EngineFlags engine;
  SamplingParams sp;
  uint64_t seed = 0;
  ConstraintFlags constraint;
};

}  // namespace

static int run_prompts(GenerateArgs& a, const CLI::App* cmd) {
  std::ifstream in(a.prompts_file);
  LLM_REQUIRE(in) << "cannot read " << a.prompts_file;
  Runtime rt = load_engine_runtime(a.engine);
  GrammarCompiler grammars(*rt.tokenizer, rt.config.vocab_size, rt.config.eos_token_ids);
  if (auto spec = constraint_from_flags(a.constraint)) a.sp.constraint = grammars.compile(*spec);
  Engine engine(*rt.executor, *rt.tokenizer, engine_config(a.engine, cmd));
  std::fprintf(stderr, "llmctl: %s\n", engine.describe_kv_cache().c_str());
  BatchGenerateSummary s = run_prompts_jsonl(engine, *rt.tokenizer, in, std::cout, a.sp,
                                             [&](const ConstraintSpec& c) { return grammars.compile(c); });
  EngineStats st = engine.stats();
  std::fprintf(stderr,
               "llmctl: %d requests (%d rejected) in %.2f s: %.2f req/s, %.1f generated tok/s, %.1f total tok/s | "
               "%lld steps, %lld preemptions, prefix hit rate %.1f%%, KV waste %.2f%% (mean over steps), peak KV use "
               "%.1f%%, KV blocks in use at the end %d of %d\n",
               s.requests, s.errors, s.seconds, (s.requests - s.errors) / s.seconds, s.generated_tokens / s.seconds,
               (s.prompt_tokens + s.generated_tokens) / s.seconds, (long long)st.steps, (long long)st.preemptions,
               100.0 * st.kv.prefix_hit_rate, 100.0 * st.mean_waste(), 100.0 * st.usage_peak, st.kv.used_blocks,
               st.kv.total_blocks);
  if (st.peak_blocks.size() > 1)  // a pool per kind of layer: what each held at most
    std::fprintf(stderr,
                 "llmctl: peak KV blocks in use: %d of %d in the full-attention layers' pool, %d of %d in the "
                 "sliding-window layers' pool\n",
                 st.peak_blocks[0], engine.kv_layout().num_blocks[0], st.peak_blocks[1], engine.kv_layout().num_blocks[1]);
  if (st.draft_tokens > 0)
    std::fprintf(stderr, "llmctl: speculative drafts: %lld of %lld accepted (%.1f%%)\n", (long long)st.accepted_draft_tokens,
                 (long long)st.draft_tokens, 100.0 * st.acceptance_rate());
  return 0;
}

Runner add_generate(CLI::App& app) {
  auto a = std::make_shared<GenerateArgs>();
  auto* s = app.add_subcommand("generate", "generate text from a prompt (argument or stdin), streamed to stdout");
  s->add_option("prompt", a->prompt, "the prompt; read from stdin when no prompt is given");
  s->add_option("-p,--prompt", a->prompt_flag, "the prompt (as llama.cpp's -p; or as the first argument)");
  s->add_option("-f,--file", a->prompt_file, "read the prompt from FILE");
  s->add_flag("--chat", a->chat, "wrap the prompt as a user message in the model's chat template");
  s->add_option("--system", a->system, "system message (with --chat)");
  add_sampling_flags(s, a->sp, a->seed, a->sp.max_tokens, "tokens to generate at most");
  s->add_option("--stop", a->sp.stop, "stop string (repeatable); never printed");
  s->add_option("--json", a->json,
                "the result as one JSON object: on stdout instead of the text (--json or --json -), or written "
                "to FILE.json while the text streams");
  s->add_option("--prompts", a->prompts_file,
                "JSONL file, one request per line ({\"prompt\"} or {\"messages\"} plus sampling fields): "
                "runs them all through the batching engine, one JSON line per result, in input order");
  add_constraint_flags(s, a->constraint);
  add_runtime_flags(s, a->engine);
  add_engine_flags(s, a->engine, "with --prompts: ");
  return [a, s]() -> int {
    finish_sampling_flags(s, a->sp, a->seed);
    const int sources = !a->prompt.empty() + s->count("--prompt") + s->count("--file") + s->count("--prompts");
    LLM_REQUIRE(sources <= 1) << "give the prompt one way: as an argument, -p/--prompt, -f/--file or --prompts";
    LLM_REQUIRE(a->system.empty() || a->chat || !a->prompts_file.empty())
        << "--system needs --chat (a system message belongs to a chat template)";
    if (!a->prompts_file.empty()) {
      LLM_REQUIRE(a->json.empty() && !a->chat) << "--prompts writes one JSON line per request itself: --json and "
                                                  "--chat do not apply (a line may hold \"messages\")";
      return run_prompts(*a, s);
    }
    if (s->count("--prompt")) a->prompt = a->prompt_flag;
    if (s->count("--file")) a->prompt = read_prompt_file(a->prompt_file);
    const bool from_stdin = a->prompt.empty() && !s->count("--prompt") && !s->count("--file");
    if (from_stdin && !reads_stdin_prompt(a->engine)) {  // the launcher or a rank other than 0
      (void)load_engine_runtime(a->engine);               // starts the ranks, or serves rank 0's steps
      LLM_CHECK(false) << "load_engine_runtime returned in a process that is not rank 0";
    }
    if (from_stdin) {
      if (isatty(STDIN_FILENO))
        std::fprintf(stderr, "llmctl: reading the prompt from stdin until Ctrl-D (for a conversation: llmctl chat)\n");
      a->prompt.assign(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
      LLM_REQUIRE(utf8_valid(a->prompt)) << "the prompt read from stdin is not valid UTF-8";
    }
    LLM_REQUIRE(!a->prompt.empty()) << "the prompt is empty (pass it as an argument, -p, -f FILE or on stdin)";
    LLM_REQUIRE(utf8_valid(a->prompt)) << "the prompt is not valid UTF-8";

    const std::optional<ConstraintSpec> constraint = constraint_from_flags(a->constraint);  // (before the load)
    Runtime rt = load_engine_runtime(a->engine);
    if (constraint)
      a->sp.constraint =
          GrammarCompiler(*rt.tokenizer, rt.config.vocab_size, rt.config.eos_token_ids).compile(*constraint);
    std::vector<int> ids;
    if (a->chat) {
      nlohmann::json messages = nlohmann::json::array();
      if (!a->system.empty()) messages.push_back({{"role", "system"}, {"content", a->system}});
      messages.push_back({{"role", "user"}, {"content", a->prompt}});
      ids = encode_chat(*rt.tokenizer, messages);
    } else {
      ids = encode_prompt(*rt.tokenizer, a->prompt);
    }
    const bool json_stdout = a->json == "-";
    // -c without -n: as much as the context leaves, up to the default.
    if (a->engine.max_model_len > 0 && !s->count("--max-tokens"))
      a->sp.max_tokens = std::max(1, std::min<int>(a->sp.max_tokens, a->engine.max_model_len - int(ids.size())));
    auto on_text = [&](std::string_view piece) {
      if (json_stdout) return;
      std::fwrite(piece.data(), 1, piece.size(), stdout);
      std::fflush(stdout);
    };
    const EngineConfig spec = engine_config(a->engine, s);  // its context, proposer and jump-forward are used here
    GenerateOneResult g =
        generate_one(*rt.executor, *rt.tokenizer, ids, a->sp, on_text, spec);
    const SequenceOutput& r = g.output;
    const size_t n_out = r.token_ids.size();
    const double pp = g.prefill_seconds > 0 ? g.prompt_ids.size() / g.prefill_seconds : 0;
    // The first token comes with the prefill; decode speed counts the ones after it.
    const double tg = g.decode_seconds > 0 && n_out > 1 ? (n_out - 1) / g.decode_seconds : 0;
    if (!a->json.empty()) {
      nlohmann::json j = {{"text", r.text},
                          {"finish_reason", r.finish_reason},
                          {"prompt_tokens", g.prompt_ids.size()},
                          {"completion_tokens", n_out},
                          {"token_ids", r.token_ids},
                          {"seed", *a->sp.seed},
                          {"model", rt.model_path},
                          {"weights", rt.weights},
                          {"load_seconds", rt.load_seconds},
                          {"prefill_tokens_per_second", pp},
                          {"decode_tokens_per_second", tg}};
      if (g.stats.decode_steps > 0)  // at batch 1, what each decoded token reads of the weights
        j["decode_weight_bytes_per_step"] = g.stats.decode_weight_bytes / uint64_t(g.stats.decode_steps);
      if (spec.proposer) {
        j["draft_tokens"] = g.stats.draft_tokens;
        j["accepted_draft_tokens"] = g.stats.accepted_draft_tokens;
      }
      if (json_stdout) std::cout << j.dump() << "\n";
      else write_json_file(a->json, j.dump() + "\n");
    }
    if (!json_stdout) std::cout << "\n";
    std::cout.flush();  // before the stats line: with 2>&1 the two never share a line
    std::fprintf(stderr,
                 "llmctl: %s | weights %s | %s | load %.2f s | prompt %zu tokens, %.1f tok/s | generated %zu tokens, "
                 "%.1f tok/s | finish %s | seed %llu\n",
                 rt.model_path.c_str(), rt.weights.c_str(), rt.backend->name().c_str(), rt.load_seconds,
                 g.prompt_ids.size(), pp, n_out, tg, r.finish_reason.c_str(), (unsigned long long)*a->sp.seed);
    if (spec.proposer)
      std::fprintf(stderr, "llmctl: speculative (%s, k %d): %lld of %lld drafts accepted (%.1f%%) in %lld steps\n",
                   spec.proposer->name().c_str(), spec.num_speculative_tokens, (long long)g.stats.accepted_draft_tokens,
                   (long long)g.stats.draft_tokens, 100.0 * g.stats.acceptance_rate(), (long long)g.stats.steps);
    return 0;
  };
}

}  // namespace llmctl::cli
