#include "bench/throughput.h"

#include <algorithm>
#include <chrono>
#include <sstream>

#include "bench/latency.h"  // parse_int_list
#include "bench/progress.h"
#include "bench/run_meta.h"
#include "bench/stats.h"
#include "engine/core/error.h"

namespace llmctl::bench {

namespace {
double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

bool stopped(const std::atomic<bool>* s) { return s && s->load(); }

void apply_sweep(EngineConfig& cfg, const std::string& key, int value) {
  if (key == "max-num-seqs")
    cfg.sched.max_num_seqs = value;
  else if (key == "max-num-batched-tokens")
    cfg.sched.max_num_batched_tokens = value;
}

nlohmann::ordered_json run_point(Runtime& rt, const ThroughputOptions& o, const EngineConfig& cfg, Progress& bar,
                                 int64_t& bar_done, bool& interrupted) {
  Engine engine(*rt.executor, *rt.tokenizer, cfg);
  SamplingParams sp;
  sp.temperature = 0;
  sp.ignore_eos = true;
  sp.seed = 1;
  const double t0 = now_s();
  std::vector<int64_t> ids;
  for (const auto& r : o.requests) {
    sp.max_tokens = r.output_len;
    ids.push_back(engine.submit(r.prompt_ids, sp));
  }
  std::vector<RequestResult> done;
  std::vector<bool> taken(ids.size(), false);
  auto collect = [&] {
    for (size_t i = 0; i < ids.size(); ++i) {
      if (taken[i]) continue;
      if (auto res = engine.take_result(ids[i])) {
        done.push_back(std::move(*res));
        taken[i] = true;
        bar.update(++bar_done);
      }
    }
  };
  while (engine.has_unfinished()) {
    if (stopped(o.stop)) {
      interrupted = true;
      for (size_t i = 0; i < ids.size(); ++i)
        if (!taken[i]) engine.abort(ids[i]);
      break;
    }
    engine.step();
    collect();
  }
  const double elapsed = now_s() - t0;
  collect();
  EngineStats st = engine.stats();
  int completed = 0;
  int64_t in_tokens = 0, out_tokens = 0;
  std::vector<double> ttft, tpot, e2e;
  for (const auto& r : done) {
    const auto& s = r.outputs.at(0);
    out_tokens += int64_t(s.token_ids.size());
    if (!s.token_ids.empty()) in_tokens += int64_t(r.prompt_ids.size());
    if (s.finish_reason == "abort") continue;
    ++completed;
    ttft.push_back(r.first_token_seconds - t0);
    e2e.push_back(r.finish_seconds - t0);
    if (s.token_ids.size() > 1) tpot.push_back((r.finish_seconds - r.first_token_seconds) / double(s.token_ids.size() - 1));
  }
  nlohmann::ordered_json row;
  row["max_num_seqs"] = cfg.sched.max_num_seqs;
  row["max_num_batched_tokens"] = cfg.sched.max_num_batched_tokens;
  row["num_prompts"] = o.requests.size();
  row["completed"] = completed;
  row["elapsed_s"] = elapsed;
  row["input_tokens"] = in_tokens;
  row["output_tokens"] = out_tokens;
  row["total_tokens"] = in_tokens + out_tokens;
  row["requests_per_s"] = completed / elapsed;
  row["output_tokens_per_s"] = double(out_tokens) / elapsed;
  row["total_tokens_per_s"] = double(in_tokens + out_tokens) / elapsed;
  row["peak_kv_usage_pct"] = 100.0 * st.usage_peak;
  row["kv_blocks"] = engine.num_blocks();
  row["steps"] = st.steps;
  row["preemptions"] = st.preemptions;
  row["mean_kv_waste_pct"] = 100.0 * st.mean_waste();
  put_summary(row, "ttft_ms", summarize(ttft), 1000.0);
  put_summary(row, "tpot_ms", summarize(tpot), 1000.0);
  put_summary(row, "e2e_ms", summarize(e2e), 1000.0);
  return row;
}
}  // namespace

void parse_sweep(const std::string& spec, std::string& key, std::vector<int>& values) {
  const size_t eq = spec.find('=');
  LLM_REQUIRE(eq != std::string::npos) << "--sweep wants KEY=V1,V2,... (e.g. max-num-seqs=1,8,32), got '" << spec << "'";
  key = spec.substr(0, eq);
  LLM_REQUIRE(key == "max-num-seqs" || key == "max-num-batched-tokens")
      << "--sweep: unknown key '" << key << "' (expected max-num-seqs or max-num-batched-tokens)";
  values = parse_int_list(spec.substr(eq + 1), "--sweep");
}

Report run_throughput(Runtime& rt, const ThroughputOptions& o) {
  LLM_REQUIRE(!o.requests.empty()) << "no requests";
  Report rep;
  rep.mode = "throughput";
  rep.meta = run_meta(&rt);
  int64_t in_total = 0, out_total = 0;
  for (const auto& r : o.requests) {
    in_total += int64_t(r.prompt_ids.size());
    out_total += r.output_len;
  }
  rep.meta["config"] = {{"num_prompts", o.requests.size()},
                        {"mean_input_len", double(in_total) / double(o.requests.size())},
                        {"mean_output_len", double(out_total) / double(o.requests.size())},
                        {"sweep", o.sweep_key},
                        {"kv_cache_bytes", o.engine.kv_cache_bytes},
                        {"ignore_eos", true}};
  std::vector<int> points = o.sweep_key.empty() ? std::vector<int>{0} : o.sweep_values;
  Progress bar("bench throughput", int64_t(points.size() * o.requests.size()), o.progress);
  int64_t bar_done = 0;
  for (int v : points) {
    EngineConfig cfg = o.engine;
    apply_sweep(cfg, o.sweep_key, v);
    bool interrupted = false;
    rep.rows.push_back(run_point(rt, o, cfg, bar, bar_done, interrupted));
    if (interrupted) {
      rep.interrupted = true;
      break;
    }
  }
  bar.finish();
  rep.table = {{"max_num_seqs", "max-num-seqs", 0},
               {"max_num_batched_tokens", "max-batched-tok", 0},
               {"completed", "requests", 0},
               {"elapsed_s", "seconds", 2},
               {"requests_per_s", "req/s", 3},
               {"output_tokens_per_s", "output tok/s", 1},
               {"total_tokens_per_s", "total tok/s", 1},
               {"ttft_ms_median", "TTFT p50 ms", 0},
               {"tpot_ms_median", "TPOT p50 ms", 1},
               {"peak_kv_usage_pct", "peak KV %", 1},
               {"preemptions", "preempt", 0}};
  return rep;
}

}  // namespace llmctl::bench
