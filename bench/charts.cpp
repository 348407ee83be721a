#include "bench/charts.h"

#include <cmath>
#include <limits>

#include "engine/core/error.h"

namespace llmctl::bench {

namespace {
double num(const nlohmann::ordered_json& row, const std::string& key) {
  if (!row.contains(key) || !row[key].is_number()) return std::numeric_limits<double>::quiet_NaN();
  return row[key].get<double>();
}

Series series(const Report& r, const std::string& name, const std::string& key) {
  Series s{name, {}};
  for (const auto& row : r.rows) s.y.push_back(num(row, key));
  return s;
}

std::string label(const nlohmann::ordered_json& v) { return v.is_string() ? v.get<std::string>() : v.dump(); }

// The last two components of a model path ("SmolLM2-135M-Instruct/hf"); a served name as it is.
std::string short_model(const std::string& m) {
  size_t end = m.find_last_not_of('/');
  if (end == std::string::npos) return m;
  size_t a = m.rfind('/', end);
  if (a == std::string::npos || a == 0) return m.substr(0, end + 1);
  size_t b = m.rfind('/', a - 1);
  return m.substr(b == std::string::npos ? 0 : b + 1, end - (b == std::string::npos ? 0 : b + 1) + 1);
}

// Percentile series of one metric ("ttft_ms" -> mean, median, p90, p99).
Panel percentiles(const Report& r, const std::string& title, const std::string& key) {
  return {title, "milliseconds",
          {series(r, "mean", key + "_mean"), series(r, "median", key + "_median"), series(r, "p90", key + "_p90"),
           series(r, "p99", key + "_p99")}};
}
}  // namespace

Chart chart_for(const Report& r) {
  LLM_REQUIRE(!r.rows.empty()) << "--plot: nothing was measured";
  Chart c;
  const std::string model = r.meta.contains("model") ? short_model(label(r.meta["model"])) : "";
  if (r.mode == "throughput") {
    const std::string key = r.meta["config"].value("sweep", std::string());
    const std::string col = key == "max-num-batched-tokens" ? "max_num_batched_tokens" : "max_num_seqs";
    c.title = "llmctl bench throughput";
    c.x_label = key.empty() ? "max-num-seqs" : key;
    for (const auto& row : r.rows) c.x_labels.push_back(label(row[col]));
    c.panels.push_back({"Token throughput", "tokens / s",
                        {series(r, "output tokens/s", "output_tokens_per_s"), series(r, "total tokens/s", "total_tokens_per_s")}});
    c.panels.push_back({"Request throughput", "requests / s", {series(r, "requests/s", "requests_per_s")}});
    c.panels.push_back({"Peak KV cache use", "% of blocks", {series(r, "peak KV use %", "peak_kv_usage_pct")}});
  } else if (r.mode == "latency") {
    c.title = "llmctl bench latency (mean over repetitions)";
    c.x_label = "case: batch, input tokens, output tokens";
    for (const auto& row : r.rows) c.x_labels.push_back(label(row["case"]));
    c.panels.push_back({"Prefill and end to end", "milliseconds",
                        {series(r, "prefill", "prefill_ms_mean"), series(r, "end to end", "e2e_ms_mean")}});
    c.panels.push_back({"Time per output token", "milliseconds", {series(r, "TPOT", "tpot_ms_mean")}});
    c.panels.push_back({"Speed", "tokens / s",
                        {series(r, "prefill (pp)", "pp_tok_s_mean"), series(r, "decode (tg)", "tg_tok_s_mean")}});
  } else if (r.mode == "serve") {
    c.title = "llmctl bench serve";
    c.x_label = "request rate (requests / s)";
    for (const auto& row : r.rows) c.x_labels.push_back(label(row["rate"]));
    c.panels.push_back({"Token throughput", "tokens / s",
                        {series(r, "output tokens/s", "output_throughput"),
                         series(r, "total tokens/s", "total_token_throughput")}});
    c.panels.push_back({"Request throughput and goodput", "requests / s",
                        {series(r, "requests/s", "request_throughput"), series(r, "goodput", "goodput")}});
    c.panels.push_back(percentiles(r, "Time to first token", "ttft_ms"));
    c.panels.push_back(percentiles(r, "Time per output token", "tpot_ms"));
    c.panels.push_back(percentiles(r, "Inter-token latency", "itl_ms"));
    c.panels.push_back(percentiles(r, "End-to-end latency", "e2el_ms"));
  } else if (r.mode == "ppl") {
    c.title = "llmctl bench ppl: mean NLL per window";
    c.x_label = "window (first token)";
    Series s{"mean NLL (nats)", {}};
    if (r.extra.contains("windows"))
      for (const auto& w : r.extra["windows"]) {
        c.x_labels.push_back(label(w["begin"]));
        s.y.push_back(w["nll"].get<double>());
      }
    c.panels.push_back({"Negative log-likelihood per window", "nats / token", {s}});
  } else {
    LLM_THROW() << "--plot: unknown mode " << r.mode;
  }
  if (!model.empty()) c.title += " - " + model;
  return c;
}

}  // namespace llmctl::bench
