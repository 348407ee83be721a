#include "bench/serve_client.h"

#include <httplib.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "bench/arrivals.h"
#include "bench/progress.h"
#include "bench/run_meta.h"
#include "bench/sse.h"
#include "bench/stats.h"
#include "bench/stream_record.h"
#include "engine/core/error.h"

namespace llmctl::bench {

namespace {
double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

bool stopped(const std::atomic<bool>* s) { return s && s->load(); }

httplib::Headers headers(const ServeOptions& o) {
  httplib::Headers h{{"Accept", "text/event-stream"}};
  if (!o.api_key.empty()) h.emplace("Authorization", "Bearer " + o.api_key);
  return h;
}

// The first model the server lists, or "" when it lists none or has no /v1/models.
std::string first_model(const ServeOptions& o) {
  httplib::Client cli(o.url);
  cli.set_connection_timeout(10);
  cli.set_read_timeout(30);
  auto res = cli.Get("/v1/models", headers(o));
  if (!res || res->status != 200) return "";
  nlohmann::json j = nlohmann::json::parse(res->body, nullptr, false);
  if (j.is_object() && j.contains("data") && j["data"].is_array() && !j["data"].empty() && j["data"][0].is_object() &&
      j["data"][0].contains("id") && j["data"][0]["id"].is_string())
    return j["data"][0]["id"];
  return "";
}

std::string request_body(const ServeOptions& o, const std::string& model, const BenchRequest& r) {
  nlohmann::json b;
  if (!model.empty()) b["model"] = model;
  const bool chat = o.endpoint.find("chat") != std::string::npos;
  if (chat)
    b["messages"] = nlohmann::json::array({{{"role", "user"}, {"content", r.prompt}}});
  else
    b["prompt"] = r.prompt;
  b["max_tokens"] = r.output_len;
  b["temperature"] = 0;
  b["stream"] = true;
  b["stream_options"] = {{"include_usage", true}};
  if (o.ignore_eos) b["ignore_eos"] = true;
  return b.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

StreamRecord send_one(const ServeOptions& o, const std::string& body) {
  StreamRecord rec;
  httplib::Client cli(o.url);
  cli.set_connection_timeout(10);
  cli.set_read_timeout(time_t(o.timeout_s));
  httplib::Request req;
  req.method = "POST";
  req.path = o.endpoint;
  req.headers = headers(o);
  req.body = body;
  req.set_header("Content-Type", "application/json");
  SseParser sse;
  int status = 0;
  std::string raw;  // the body's start, for error messages
  req.response_handler = [&](const httplib::Response& res) {
    status = res.status;
    return true;
  };
  req.content_receiver = [&](const char* data, size_t n, uint64_t, uint64_t) {
    const double t = now_s();
    if (raw.size() < 400) raw.append(data, std::min(n, 400 - raw.size()));
    if (status == 200)
      for (const auto& ev : sse.feed(std::string_view(data, n))) rec.on_data(ev, t);
    return !stopped(o.stop);
  };
  rec.start = now_s();
  auto res = cli.send(req);
  rec.finish(now_s());
  if (!res) {
    rec.error = stopped(o.stop) ? "interrupted" : "HTTP error: " + httplib::to_string(res.error());
  } else if (res->status != 200) {
    rec.error = "HTTP " + std::to_string(res->status) + ": " + (raw.empty() ? res->body.substr(0, 400) : raw);
  }
  return rec;
}

bool meets(const Slo& s, const StreamRecord& r) {
  if (s.ttft_ms > 0 && r.ttft() * 1000 > s.ttft_ms) return false;
  if (s.tpot_ms > 0 && r.tpot() * 1000 > s.tpot_ms) return false;
  if (s.e2el_ms > 0 && r.e2e() * 1000 > s.e2el_ms) return false;
  return true;
}

// One rate: all requests on their schedule; returns the row. interrupted: stopped by Ctrl-C.
nlohmann::ordered_json run_rate(const ServeOptions& o, const std::string& model, double rate, Progress& bar,
                                int64_t& bar_done, bool& interrupted) {
  const std::vector<double> arrivals = poisson_arrivals(int(o.requests.size()), rate, o.seed);
  std::vector<StreamRecord> recs(o.requests.size());
  std::vector<bool> sent(o.requests.size(), false);
  std::vector<std::thread> threads;
  std::mutex mu;
  std::condition_variable cv;
  int in_flight = 0;
  int64_t finished = 0;
  const double t0 = now_s();
  for (size_t i = 0; i < o.requests.size() && !stopped(o.stop); ++i) {
    // Wait for the arrival time, then for a free slot, waking up often enough to notice Ctrl-C.
    while (!stopped(o.stop)) {
      const double wait = t0 + arrivals[i] - now_s();
      if (wait <= 0) break;
      std::this_thread::sleep_for(std::chrono::duration<double>(std::min(wait, 0.05)));
    }
    {
      std::unique_lock<std::mutex> lk(mu);
      while (o.max_concurrency > 0 && in_flight >= o.max_concurrency && !stopped(o.stop))
        cv.wait_for(lk, std::chrono::milliseconds(50));
      if (stopped(o.stop)) break;
      ++in_flight;
      bar.update(bar_done + finished);
    }
    sent[i] = true;
    threads.emplace_back([&, i] {
      StreamRecord r;
      try {  // anything thrown here is this request's failure, not the run's
        r = send_one(o, request_body(o, model, o.requests[i]));
      } catch (const std::exception& e) {
        r.error = std::string("client error: ") + e.what();
      }
      std::lock_guard<std::mutex> lk(mu);
      recs[i] = std::move(r);
      --in_flight;
      ++finished;
      cv.notify_all();
    });
  }
  {
    std::unique_lock<std::mutex> lk(mu);
    while (in_flight > 0) {
      cv.wait_for(lk, std::chrono::milliseconds(100));
      bar.update(bar_done + finished);
    }
  }
  for (auto& t : threads) t.join();
  double t_end = t0;
  for (size_t i = 0; i < recs.size(); ++i)
    if (sent[i]) t_end = std::max(t_end, recs[i].end);
  const double duration = t_end - t0;
  bar_done += int64_t(o.requests.size());
  interrupted = stopped(o.stop);

  int completed = 0, failed = 0, good = 0;
  int64_t in_tokens = 0, out_tokens = 0;
  bool usage_all = true;
  std::vector<double> ttft, tpot, itl, e2e;
  std::vector<std::string> errors;
  for (size_t i = 0; i < recs.size(); ++i) {
    if (!sent[i]) continue;
    const StreamRecord& r = recs[i];
    if (!r.ok()) {
      if (r.error == "interrupted") continue;
      ++failed;
      if (errors.size() < 5) errors.push_back(r.error);
      continue;
    }
    ++completed;
    in_tokens += r.prompt_tokens >= 0 ? r.prompt_tokens : o.requests[i].input_len;
    out_tokens += r.output_tokens();
    usage_all = usage_all && r.completion_tokens >= 0;
    ttft.push_back(r.ttft());
    e2e.push_back(r.e2e());
    if (r.output_tokens() > 1) tpot.push_back(r.tpot());
    itl.insert(itl.end(), r.itl.begin(), r.itl.end());
    good += meets(o.goodput, r);
  }
  nlohmann::ordered_json row;
  row["request_rate"] = rate;  // inf is written as "inf"
  row["rate"] = format_rate(rate);
  row["max_concurrency"] = o.max_concurrency;
  row["num_prompts"] = o.requests.size();
  row["completed"] = completed;
  row["failed"] = failed;
  row["duration_s"] = duration;
  row["input_tokens"] = in_tokens;
  row["output_tokens"] = out_tokens;
  row["token_counts_from_usage"] = usage_all && completed > 0;
  row["request_throughput"] = duration > 0 ? completed / duration : 0.0;
  row["output_throughput"] = duration > 0 ? double(out_tokens) / duration : 0.0;
  row["total_token_throughput"] = duration > 0 ? double(in_tokens + out_tokens) / duration : 0.0;
  row["goodput"] = duration > 0 ? good / duration : 0.0;
  row["good_requests"] = good;
  put_summary(row, "ttft_ms", summarize(ttft), 1000.0);
  put_summary(row, "tpot_ms", summarize(tpot), 1000.0);
  put_summary(row, "itl_ms", summarize(itl), 1000.0);
  put_summary(row, "e2el_ms", summarize(e2e), 1000.0);
  row["errors"] = errors;
  return row;
}
}  // namespace

Slo parse_goodput(const std::string& spec) {
  Slo s;
  std::stringstream ss(spec);
  std::string item;
  while (std::getline(ss, item, ',')) {
    const size_t c = item.find(':');
    LLM_REQUIRE(c != std::string::npos) << "--goodput wants NAME:MS pairs (ttft, tpot, e2el), got '" << item << "'";
    const std::string name = item.substr(0, c);
    double v = 0;
    size_t used = 0;
    try {
      v = std::stod(item.substr(c + 1), &used);
    } catch (const std::exception&) {
      used = 0;
    }
    LLM_REQUIRE(used == item.size() - c - 1 && used > 0 && v > 0) << "--goodput: bad milliseconds in '" << item << "'";
    if (name == "ttft")
      s.ttft_ms = v;
    else if (name == "tpot")
      s.tpot_ms = v;
    else if (name == "e2el")
      s.e2el_ms = v;
    else
      LLM_THROW() << "--goodput: unknown metric '" << name << "' (expected ttft, tpot or e2el)";
  }
  return s;
}

Report run_serve_bench(const ServeOptions& o) {
  LLM_REQUIRE(o.url.rfind("http://", 0) == 0 || o.url.rfind("https://", 0) == 0)
      << "--url must start with http:// or https://, got '" << o.url << "'";
  LLM_REQUIRE(!o.rates.empty()) << "no request rate";
  LLM_REQUIRE(!o.requests.empty()) << "no requests";
  LLM_REQUIRE(o.max_concurrency >= 0) << "--max-concurrency must be >= 0";
  const std::string model = o.model.empty() ? first_model(o) : o.model;
  Report rep;
  rep.mode = "serve";
  rep.meta = run_meta(nullptr);
  int64_t in_total = 0, out_total = 0;
  for (const auto& r : o.requests) {
    in_total += r.input_len;
    out_total += r.output_len;
  }
  rep.meta["backend"] = "server";
  rep.meta["device"] = "server";
  rep.meta["model"] = model;
  rep.meta["dense_dtype"] = "server";
  rep.meta["config"] = {{"url", o.url},
                        {"endpoint", o.endpoint},
                        {"num_prompts", o.requests.size()},
                        {"mean_input_len", double(in_total) / double(o.requests.size())},
                        {"mean_output_len", double(out_total) / double(o.requests.size())},
                        {"ignore_eos", o.ignore_eos},
                        {"seed", o.seed},
                        {"goodput_slo_ms", {{"ttft", o.goodput.ttft_ms}, {"tpot", o.goodput.tpot_ms}, {"e2el", o.goodput.e2el_ms}}}};
  Progress bar("bench serve", int64_t(o.rates.size() * o.requests.size()), o.progress);
  int64_t bar_done = 0;
  for (double rate : o.rates) {
    bool interrupted = false;
    rep.rows.push_back(run_rate(o, model, rate, bar, bar_done, interrupted));
    if (interrupted) {
      rep.interrupted = true;
      break;
    }
  }
  bar.finish();
  rep.table = {{"rate", "rate", 0},
               {"completed", "ok", 0},
               {"failed", "failed", 0},
               {"duration_s", "seconds", 2},
               {"request_throughput", "req/s", 2},
               {"output_throughput", "out tok/s", 1},
               {"goodput", "goodput", 2},
               {"ttft_ms_mean", "TTFT mean", 1},
               {"ttft_ms_median", "p50", 1},
               {"ttft_ms_p99", "p99", 1},
               {"tpot_ms_mean", "TPOT mean", 1},
               {"tpot_ms_p99", "p99", 1},
               {"itl_ms_median", "ITL p50", 1},
               {"e2el_ms_mean", "E2E mean", 1},
               {"e2el_ms_p99", "p99", 1}};
  return rep;
}

}  // namespace llmctl::bench
