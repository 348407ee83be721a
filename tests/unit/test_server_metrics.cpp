// Server metrics: cumulative histogram buckets, the stable metric names, Prometheus text shape;
// API errors: status -> type/code and the field named as param.
#include <doctest/doctest.h>

#include <map>
#include <random>
#include <sstream>

#include "engine/core/error.h"
#include "server/api_error.h"
#include "server/metrics.h"

using namespace llmctl::server;

namespace {
std::map<std::string, double> parse(const std::string& text) {
  std::map<std::string, double> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    const size_t sp = line.rfind(' ');
    REQUIRE(sp != std::string::npos);
    out[line.substr(0, sp)] = std::stod(line.substr(sp + 1));
  }
  return out;
}
}  // namespace

TEST_CASE("histogram buckets are cumulative and agree with a direct count") {
  const std::vector<double> bounds = {0.1, 0.5, 1, 5};
  Histogram h(bounds);
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> u(0, 8);
  std::vector<double> values;
  for (int i = 0; i < 500; ++i) values.push_back(u(rng));
  values.push_back(0.5);  // on a bound: counted in that bucket (le)
  double sum = 0;
  for (double v : values) {
    h.observe(v);
    sum += v;
  }
  std::string text;
  h.render("x", text);
  auto m = parse(text);
  for (double b : bounds) {
    int64_t expect = 0;
    for (double v : values) expect += v <= b;
    std::ostringstream key;
    key << "x_bucket{le=\"" << b << "\"}";
    CHECK(m.at(key.str()) == doctest::Approx(double(expect)));
  }
  CHECK(m.at("x_bucket{le=\"+Inf\"}") == values.size());
  CHECK(m.at("x_count") == values.size());
  CHECK(m.at("x_sum") == doctest::Approx(sum).epsilon(1e-6));
}

TEST_CASE("metrics render every stable name with the recorded values") {
  Metrics m;
  m.set_gauges(3, 5, 0.25, 0.5);
  m.request_done("stop", 0.05, 0.01, 0.3, 12, 7);
  m.request_done("length", 0.07, 0.02, 0.5, 8, 16);
  m.add_step_counts(2, 9, 4);
  m.add_step_counts(0, 3, 3);
  m.request_error(400);
  m.request_error(400);
  m.request_error(429);
  auto v = parse(m.render());
  CHECK(v.at("llmctl_requests_running") == 3);
  CHECK(v.at("llmctl_requests_waiting") == 5);
  CHECK(v.at("llmctl_kv_cache_usage_ratio") == 0.25);
  CHECK(v.at("llmctl_prefix_cache_hit_ratio") == 0.5);
  CHECK(v.at("llmctl_time_to_first_token_seconds_count") == 2);
  CHECK(v.at("llmctl_time_per_output_token_seconds_count") == 2);
  CHECK(v.at("llmctl_e2e_request_latency_seconds_sum") == doctest::Approx(0.8));
  CHECK(v.at("llmctl_prompt_tokens_total") == 20);
  CHECK(v.at("llmctl_generation_tokens_total") == 23);
  CHECK(v.at("llmctl_preemptions_total") == 2);
  CHECK(v.at("llmctl_spec_decode_draft_tokens_total") == 12);
  CHECK(v.at("llmctl_spec_decode_accepted_tokens_total") == 7);
  CHECK(v.at("llmctl_request_success_total{finish_reason=\"stop\"}") == 1);
  CHECK(v.at("llmctl_request_success_total{finish_reason=\"length\"}") == 1);
  CHECK(v.at("llmctl_request_errors_total{code=\"400\"}") == 2);
  CHECK(v.at("llmctl_request_errors_total{code=\"429\"}") == 1);
  const std::string text = m.render();
  CHECK(text.find("# TYPE llmctl_e2e_request_latency_seconds histogram") != std::string::npos);
  CHECK(text.find("# TYPE llmctl_prompt_tokens_total counter") != std::string::npos);
}

TEST_CASE("API errors: OpenAI shape, type and code by status, the field as param") {
  auto b = ApiError(429, "slow down").body();
  CHECK(b["error"]["type"] == "rate_limit_error");
  CHECK(b["error"]["code"] == "too_many_requests");
  CHECK(b["error"]["param"].is_null());
  CHECK(ApiError(401, "key").body()["error"]["type"] == "authentication_error");
  CHECK(ApiError(500, "x").body()["error"]["type"] == "server_error");
  CHECK(to_api_error(llmctl::InputError("field 'top_p' must be a number, got string")).param() == "top_p");
  CHECK(to_api_error(llmctl::InputError("repetition_penalty must be > 0, got 0")).param() == "repetition_penalty");
  CHECK(to_api_error(llmctl::InputError("something unrelated happened")).param().empty());
  CHECK(to_api_error(llmctl::InputError("x")).status() == 400);
}
