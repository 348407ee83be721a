// llmctl bench: throughput | latency | serve | ppl. Parses flags, runs the engine-level benchmark
// (bench/), prints the table and writes --json / --csv / --plot. Ctrl-C stops a run early;
// what was measured so far is still printed and written.
#include <atomic>
#include <csignal>
#include <filesystem>
#include <iostream>
#include <memory>

#include "bench/arrivals.h"
#include "bench/charts.h"
#include "bench/dataset.h"
#include "bench/latency.h"
#include "bench/perplexity.h"
#include "bench/report.h"
#include "bench/serve_client.h"
#include "bench/throughput.h"
#include "cli/commands.h"
#include "cli/engine_flags.h"
#include "engine/core/error.h"
#include "engine/model/checkpoint.h"
#include "engine/model/default_model.h"
#include "engine/runtime.h"

namespace llmctl::cli {

namespace {
std::atomic<bool> g_stop{false};  // set by SIGINT; a second Ctrl-C kills as usual

extern "C" void on_bench_sigint(int) {
  g_stop.store(true);
  std::signal(SIGINT, SIG_DFL);
}

EngineFlags bench_engine_defaults() {  // a throughput run fills big batches
  EngineFlags f;
  f.max_num_seqs = 256;
  f.max_num_batched_tokens = 2048;
  return f;
}

struct BenchArgs {
  EngineFlags engine = bench_engine_defaults();
  // workload
  std::string dataset = "random", sweep;
  int num_prompts = 200, input_len = 512, output_len = 128;
  double range_ratio = 0;
  uint64_t seed = 0;
  // latency
  std::string batches = "1", input_lens = "128", output_lens = "128";
  int repetitions = 3, warmup = 1;
  // serve
  std::string url, endpoint = "/v1/completions", tokenizer, rates = "inf", goodput, api_key;
  int max_concurrency = 0;
  bool ignore_eos = false;
  double timeout = 600;
  // ppl
  std::string text;
  int ctx = 512, stride = 256, max_tokens = 0;
  // output
  std::string json, csv, plot;
  bool no_progress = false;
};

void add_output_flags(CLI::App* s, BenchArgs& a) {
  s->add_option("--json", a.json,
                "write every figure, with machine, build and model, as JSON to FILE.json (--json or --json -: "
                "stdout, and the table goes to stderr)");
  s->add_option("--csv", a.csv, "write the rows as CSV (meta in columns) to FILE (-: stdout)");
  s->add_option("--plot", a.plot, "write a self-contained SVG chart");
  s->add_flag("--no-progress", a.no_progress, "no progress bar on stderr");
}

void add_workload_flags(CLI::App* s, BenchArgs& a) {
  s->add_option("--dataset", a.dataset, "random, FILE.jsonl ({\"prompt\", \"max_tokens\"} lines) or ShareGPT FILE.json")
      ->capture_default_str();
  s->add_option("--num-prompts", a.num_prompts, "requests")->capture_default_str();
  s->add_option("--input-len", a.input_len, "random: prompt tokens")->capture_default_str();
  s->add_option("--output-len", a.output_len, "tokens to generate (files: replaces their max_tokens when given)")
      ->capture_default_str();
  s->add_option("--range-ratio", a.range_ratio,
                "random: lengths drawn uniformly from [len*(1-r), len*(1+r)] (0 = fixed)")->capture_default_str();
  s->add_option("--seed", a.seed, "seed for prompts and arrivals")->capture_default_str();
}

bench::DatasetOptions dataset_options(const BenchArgs& a, CLI::App* s) {
  bench::DatasetOptions d;
  d.dataset = a.dataset;
  d.num_prompts = a.num_prompts;
  d.input_len = a.input_len;
  d.output_len = a.output_len;
  d.range_ratio = a.range_ratio;
  d.fixed_output_len = s->count("--output-len") > 0;
  d.seed = a.seed;
  return d;
}

int finish(const bench::Report& r, const BenchArgs& a) {
  // stdout carries the JSON or CSV when asked for there; the table then goes to stderr.
  (a.json == "-" || a.csv == "-" ? std::cerr : std::cout) << bench::format_table(r) << std::flush;
  bench::write_report_files(r, a.json, a.csv);
  if (!a.plot.empty() && !r.rows.empty()) bench::write_text_file(a.plot, bench::report_svg(r));
  if (!a.plot.empty() && r.rows.empty()) std::cerr << "llmctl bench: nothing measured, no chart written\n";
  return r.interrupted ? 130 : 0;
}
}  // namespace

Runner add_bench(CLI::App& app) {
  auto a = std::make_shared<BenchArgs>();
  auto* b = app.add_subcommand("bench", "throughput, latency, serving and perplexity benchmarks");
  b->require_subcommand(1);

  auto* tp = b->add_subcommand("throughput", "offline throughput through the engine (all requests at once)");
  add_runtime_flags(tp, a->engine);
  add_engine_flags(tp, a->engine);
  add_workload_flags(tp, *a);
  tp->add_option("--sweep", a->sweep, "KEY=V1,V2,...: one run per value (max-num-seqs or max-num-batched-tokens)");
  add_output_flags(tp, *a);

  auto* lat = b->add_subcommand("latency", "prefill, time per output token and end-to-end latency of fixed batches");
  add_runtime_flags(lat, a->engine);
  add_kv_cache_flags(lat, a->engine);
  add_speculative_flags(lat, a->engine);
  lat->add_option("--batch", a->batches, "batch sizes, comma-separated")->capture_default_str();
  lat->add_option("--input-len", a->input_lens, "prompt lengths, comma-separated")->capture_default_str();
  lat->add_option("--output-len", a->output_lens, "output lengths, comma-separated")->capture_default_str();
  lat->add_option("--repetitions", a->repetitions, "timed runs per case")->capture_default_str();
  lat->add_option("--warmup", a->warmup, "untimed runs per case first")->capture_default_str();
  lat->add_option("--max-num-batched-tokens", a->engine.max_num_batched_tokens,
                  "new tokens per step (default: the whole batch's prompts in one step)");
  lat->add_option("--seed", a->seed, "seed for the random prompts")->capture_default_str();
  lat->add_flag("--simulate-threads", a->engine.simulate_threads,
                "CPU: run every loop on one core and report the times -t threads would take, each loop's pieces "
                "at once (the engine's own scaling: how work splits, what runs between loops; not the memory's "
                "bandwidth or the cores' hand-offs)");
  add_output_flags(lat, *a);

  auto* sv = b->add_subcommand("serve", "streaming client against an OpenAI-compatible server");
  sv->add_option("--url", a->url, "server base URL, http://HOST:PORT")->required();
  sv->add_option("--endpoint", a->endpoint, "/v1/completions or /v1/chat/completions")->capture_default_str();
  sv->add_option("--model", a->engine.model,
                 "model name sent in requests (default: the server's first); a local path also gives the tokenizer");
  sv->add_option("--tokenizer", a->tokenizer, "model path whose tokenizer builds random prompts of exact lengths");
  sv->add_option("--request-rate", a->rates, "requests/s, comma-separated; inf = all at once")->capture_default_str();
  sv->add_option("--max-concurrency", a->max_concurrency, "requests in flight at most (0 = unbounded)")
      ->capture_default_str();
  sv->add_flag("--ignore-eos", a->ignore_eos, "send \"ignore_eos\": true (vLLM, llmctl)");
  sv->add_option("--goodput", a->goodput, "SLOs in ms, e.g. ttft:500,tpot:50,e2el:5000");
  sv->add_option("--api-key", a->api_key, "sent as Authorization: Bearer KEY");
  sv->add_option("--timeout", a->timeout, "seconds per request")->capture_default_str();
  add_workload_flags(sv, *a);
  add_output_flags(sv, *a);

  auto* pp = b->add_subcommand("ppl", "perplexity of a text with a sliding window (strided)");
  add_runtime_flags(pp, a->engine);
  pp->add_option("--text", a->text, "text file")->required();
  pp->add_option("--ctx", a->ctx, "window length in tokens")->capture_default_str();
  pp->add_option("--stride", a->stride, "window step in tokens")->capture_default_str();
  pp->add_option("--max-tokens", a->max_tokens, "score only the first N tokens (0 = all)")->capture_default_str();
  add_output_flags(pp, *a);

  return [a, tp, lat, sv, pp]() -> int {
    LLM_REQUIRE(!(a->json == "-" && a->csv == "-")) << "--json - and --csv -: only one of them can go to stdout";
    std::signal(SIGINT, on_bench_sigint);
    const bool progress = !a->no_progress;
    if (tp->parsed()) {
      bench::ThroughputOptions o;
      if (!a->sweep.empty()) bench::parse_sweep(a->sweep, o.sweep_key, o.sweep_values);
      Runtime rt = load_engine_runtime(a->engine);
      o.requests = bench::make_requests(dataset_options(*a, tp), rt.tokenizer.get());
      o.engine = engine_config(a->engine, tp);
      o.progress = progress;
      o.stop = &g_stop;
      return finish(bench::run_throughput(rt, o), *a);
    }
    if (lat->parsed()) {
      bench::LatencyOptions o;
      o.batches = bench::parse_int_list(a->batches, "--batch");
      o.input_lens = bench::parse_int_list(a->input_lens, "--input-len");
      o.output_lens = bench::parse_int_list(a->output_lens, "--output-len");
      o.repetitions = a->repetitions;
      o.warmup = a->warmup;
      o.seed = a->seed;
      Runtime rt = load_engine_runtime(a->engine);
      LLM_REQUIRE(!a->engine.simulate_threads || rt.backend->thread_model_account())
          << "--simulate-threads models the CPU backend's threads; this run is on " << rt.backend->name();
      o.engine = engine_config(a->engine, lat);
      o.engine.sched.max_num_batched_tokens =
          lat->count("--max-num-batched-tokens") ? a->engine.max_num_batched_tokens : 0;
      o.progress = progress;
      o.stop = &g_stop;
      return finish(bench::run_latency(rt, o), *a);
    }
    if (sv->parsed()) {
      bench::ServeOptions o;
      o.url = a->url;
      o.endpoint = a->endpoint;
      o.api_key = a->api_key;
      o.rates = bench::parse_rates(a->rates);
      o.max_concurrency = a->max_concurrency;
      o.ignore_eos = a->ignore_eos;
      if (!a->goodput.empty()) o.goodput = bench::parse_goodput(a->goodput);
      o.seed = a->seed;
      o.timeout_s = a->timeout;
      // A tokenizer from --tokenizer, or from --model when it names a local checkpoint.
      std::string tok_path = a->tokenizer;
      const std::string& model = a->engine.model;
      if (tok_path.empty() && !model.empty() && std::filesystem::exists(model)) tok_path = model;
      std::unique_ptr<Tokenizer> tok;
      if (!tok_path.empty()) tok = load_tokenizer(load_checkpoint(resolve_model(tok_path)));
      o.model = model;
      if (!tok_path.empty() && tok_path == model) o.model = "";  // a path is not a served name
      o.requests = bench::make_requests(dataset_options(*a, sv), tok.get());
      o.progress = progress;
      o.stop = &g_stop;
      return finish(bench::run_serve_bench(o), *a);
    }
    bench::PerplexityOptions o;
    o.text_path = a->text;
    o.ctx = a->ctx;
    o.stride = a->stride;
    o.max_tokens = a->max_tokens;
    o.progress = progress;
    o.stop = &g_stop;
    Runtime rt = load_engine_runtime(a->engine);
    return finish(bench::run_perplexity(rt, o), *a);
  };
}

}  // namespace llmctl::cli
