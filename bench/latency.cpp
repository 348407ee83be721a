#include "bench/latency.h"

#include <algorithm>
#include <sstream>

#include "bench/dataset.h"
#include "bench/progress.h"
#include "bench/run_meta.h"
#include "bench/stats.h"
#include "bench/thread_model_clock.h"
#include "engine/core/error.h"

namespace llmctl::bench {

namespace {
struct RunTimes {
  double prefill = 0, tpot = 0, e2e = 0;
  // a modelled pool (--simulate-threads): the run's wall time on one thread and its loops
  double wall = 0;
  LoopAccount loops;
};

// One batch, all submitted at once; false when stopped before it finished. Times on the modelled
// threads' clock where the backend's are modelled.
bool run_batch(Engine& engine, const Backend& backend, const std::vector<BenchRequest>& reqs,
               const std::atomic<bool>* stop, RunTimes& t) {
  ThreadModelClock clock(backend);
  SamplingParams sp;
  sp.temperature = 0;
  sp.ignore_eos = true;
  sp.seed = 1;
  std::vector<int64_t> ids;
  for (const auto& r : reqs) {
    sp.max_tokens = r.output_len;
    ids.push_back(engine.submit(r.prompt_ids, sp));
  }
  clock.mark();
  double t0 = 1e300;
  while (engine.has_unfinished()) {
    if (stop && stop->load()) {
      for (auto id : ids) engine.abort(id);
      for (auto id : ids) engine.take_result(id);
      return false;
    }
    engine.step();
    clock.mark();
  }
  double first = 0, last = 0, tpot = 0;
  std::vector<RequestResult> res;
  for (auto id : ids) res.push_back(*engine.take_result(id));
  for (const auto& r : res) t0 = std::min(t0, clock.at(r.submit_seconds));
  for (const auto& r : res) {
    const double first_token = clock.at(r.first_token_seconds), finish = clock.at(r.finish_seconds);
    first = std::max(first, first_token - t0);
    last = std::max(last, finish - t0);
    const size_t n = r.outputs.at(0).token_ids.size();
    if (n > 1) tpot += (finish - first_token) / double(n - 1);
  }
  t = {first, tpot / double(res.size()), last, clock.span_wall(), clock.span_loops()};
  return true;
}

// A modelled pool's split of the timed runs: the caller's time outside the loops (serial on any
// number of threads) against the loops' time on the modelled threads, and how evenly the loops'
// work spread over them.
void put_thread_model(nlohmann::ordered_json& row, const RunTimes& m, int threads) {
  const double serial = std::max(0.0, m.wall - m.loops.inside_s), modelled = serial + m.loops.critical_s;
  row["modelled_threads"] = threads;
  row["loops"] = m.loops.loops;
  row["one_thread_s"] = m.wall;
  row["modelled_s"] = modelled;
  row["serial_share"] = modelled > 0 ? serial / modelled : 0.0;
  row["loop_efficiency"] = m.loops.critical_s > 0 ? m.loops.work_s / (threads * m.loops.critical_s) : 0.0;
}
}  // namespace

std::vector<int> parse_int_list(const std::string& list, const std::string& flag) {
  std::vector<int> out;
  std::stringstream ss(list);
  std::string item;
  while (std::getline(ss, item, ',')) {
    size_t used = 0;
    int v = 0;
    try {
      v = std::stoi(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    LLM_REQUIRE(used == item.size() && v >= 1) << flag << ": bad value '" << item << "' (positive integers, e.g. 1,8,32)";
    out.push_back(v);
  }
  LLM_REQUIRE(!out.empty()) << flag << ": no values";
  return out;
}

Report run_latency(Runtime& rt, const LatencyOptions& o) {
  LLM_REQUIRE(o.repetitions >= 1) << "--repetitions must be >= 1";
  LLM_REQUIRE(o.warmup >= 0) << "--warmup must be >= 0";
  Report rep;
  rep.mode = "latency";
  rep.meta = run_meta(&rt);
  rep.meta["config"] = {{"repetitions", o.repetitions}, {"warmup", o.warmup}, {"seed", o.seed},
                        {"kv_cache_bytes", o.engine.kv_cache_bytes}, {"ignore_eos", true}, {"prefix_caching", false}};
  const bool modelled_threads = ThreadModelClock(*rt.backend).modelled();
  if (modelled_threads) rep.meta["config"]["modelled_threads"] = rt.threads;
  const int64_t cases = int64_t(o.batches.size() * o.input_lens.size() * o.output_lens.size());
  Progress bar("bench latency", cases * (o.repetitions + o.warmup), o.progress);
  int64_t done = 0;
  uint64_t seed = o.seed;
  for (int batch : o.batches) {
    for (int in : o.input_lens) {
      for (int out : o.output_lens) {
        if (rep.interrupted) break;
        EngineConfig cfg = o.engine;
        cfg.sched.max_num_seqs = batch;
        cfg.sched.enable_prefix_caching = false;
        if (cfg.sched.max_num_batched_tokens <= 0) cfg.sched.max_num_batched_tokens = std::max(batch * in, batch);
        Engine engine(*rt.executor, *rt.tokenizer, cfg);
        std::vector<double> prefill, tpot, e2e, pp, tg;
        RunTimes modelled;  // the timed runs' wall time and loops, summed (a modelled pool)
        for (int r = 0; r < o.warmup + o.repetitions; ++r) {
          DatasetOptions d;
          d.num_prompts = batch;
          d.input_len = in;
          d.output_len = out;
          d.seed = ++seed;
          RunTimes t;
          if (!run_batch(engine, *rt.backend, make_requests(d, rt.tokenizer.get()), o.stop, t)) {
            rep.interrupted = true;
            break;
          }
          bar.update(++done);
          if (r < o.warmup) continue;
          modelled.wall += t.wall;
          modelled.loops += t.loops;
          prefill.push_back(t.prefill);
          tpot.push_back(t.tpot);
          e2e.push_back(t.e2e);
          pp.push_back(batch * double(in) / t.prefill);
          if (out > 1 && t.e2e > t.prefill) tg.push_back(batch * double(out - 1) / (t.e2e - t.prefill));
        }
        if (prefill.empty()) continue;  // interrupted before a timed run
        nlohmann::ordered_json row;
        std::ostringstream name;
        name << "b" << batch << " i" << in << " o" << out;
        row["case"] = name.str();
        row["batch"] = batch;
        row["input_len"] = in;
        row["output_len"] = out;
        row["repetitions"] = prefill.size();
        put_summary(row, "prefill_ms", summarize(prefill), 1000.0);
        put_summary(row, "tpot_ms", summarize(tpot), 1000.0);
        put_summary(row, "e2e_ms", summarize(e2e), 1000.0);
        put_summary(row, "pp_tok_s", summarize(pp));
        put_summary(row, "tg_tok_s", summarize(tg));
        if (modelled.loops.loops > 0) put_thread_model(row, modelled, rt.threads);
        rep.rows.push_back(row);
      }
    }
  }
  bar.finish();
  rep.table = {{"batch", "batch", 0},          {"input_len", "in", 0},           {"output_len", "out", 0},
               {"repetitions", "reps", 0},     {"prefill_ms_mean", "prefill ms", 1}, {"prefill_ms_std", "std", 1},
               {"pp_tok_s_mean", "pp tok/s", 1}, {"tpot_ms_mean", "TPOT ms", 2},     {"tpot_ms_std", "std", 2},
               {"tg_tok_s_mean", "tg tok/s", 1}, {"e2e_ms_mean", "E2E ms", 1},       {"e2e_ms_std", "std", 1}};
  if (modelled_threads) {
    rep.table.push_back({"serial_share", "serial", 3});
    rep.table.push_back({"loop_efficiency", "loop eff", 3});
  }
  return rep;
}

}  // namespace llmctl::bench
