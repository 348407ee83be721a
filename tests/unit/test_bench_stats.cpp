// Benchmark statistics: percentiles as numpy computes them (linear interpolation), summaries,
// Poisson arrival schedules (deterministic per seed, mean gap 1/rate), rate and sweep lists.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "bench/arrivals.h"
#include "bench/latency.h"
#include "bench/stats.h"
#include "bench/throughput.h"
#include "engine/core/error.h"

using namespace llmctl;
using namespace llmctl::bench;

TEST_CASE("percentile interpolates linearly between ranks, like numpy") {
  // numpy.percentile([15, 20, 35, 40, 50], q) for q = 0, 25, 40, 50, 90, 99, 100
  std::vector<double> v{40, 15, 50, 20, 35};  // unsorted on purpose
  CHECK(percentile(v, 0) == doctest::Approx(15));
  CHECK(percentile(v, 25) == doctest::Approx(20));
  CHECK(percentile(v, 40) == doctest::Approx(29));
  CHECK(percentile(v, 50) == doctest::Approx(35));
  CHECK(percentile(v, 90) == doctest::Approx(46));
  CHECK(percentile(v, 99) == doctest::Approx(49.6));
  CHECK(percentile(v, 100) == doctest::Approx(50));
  CHECK(percentile({}, 50) == 0);
  CHECK(percentile({7}, 99) == 7);
  CHECK_THROWS(percentile(v, 101));
}

TEST_CASE("summaries: mean, sample std, ordered percentiles") {
  std::vector<double> v;
  for (int i = 1; i <= 100; ++i) v.push_back(double((i * 37) % 101));  // a permutation of 1..100
  Summary s = summarize(v);
  CHECK(s.n == 100);
  CHECK(s.mean == doctest::Approx(50.5));
  CHECK(s.stddev == doctest::Approx(29.011491975882016));  // numpy.std(range(1, 101), ddof=1)
  CHECK(s.min == 1);
  CHECK(s.max == 100);
  CHECK(s.median == doctest::Approx(50.5));
  CHECK(s.p90 == doctest::Approx(90.1));
  CHECK(s.p99 == doctest::Approx(99.01));
  CHECK(s.min <= s.median);
  CHECK(s.median <= s.p90);
  CHECK(s.p90 <= s.p99);
  CHECK(s.p99 <= s.max);
  Summary one = summarize({3.0});
  CHECK(one.stddev == 0);
  CHECK(one.p99 == 3.0);
  nlohmann::ordered_json row;
  put_summary(row, "ttft_ms", summarize({0.1, 0.2}), 1000.0);
  CHECK(row["ttft_ms_mean"].get<double>() == doctest::Approx(150));
  CHECK(row.size() == 7);
}

TEST_CASE("Poisson arrivals: same seed same schedule, mean gap 1/rate, inf all at once") {
  auto a = poisson_arrivals(2000, 4.0, 42), b = poisson_arrivals(2000, 4.0, 42), c = poisson_arrivals(2000, 4.0, 43);
  CHECK(a == b);
  CHECK(a != c);
  REQUIRE(a.size() == 2000);
  for (size_t i = 1; i < a.size(); ++i) CHECK(a[i] >= a[i - 1]);
  CHECK(a[0] > 0);
  // 2000 exponential gaps of mean 0.25 s: the total is 500 s within a few standard errors (11 s).
  CHECK(a.back() == doctest::Approx(500).epsilon(0.1));
  // The first values are fixed for seed 42 (mt19937_64 is specified by the standard): a change here
  // means the schedule of every recorded run would change.
  auto first = poisson_arrivals(3, 1.0, 42);
  REQUIRE(first.size() == 3);
  CHECK(first[0] == doctest::Approx(1.4071320984121438).epsilon(1e-12));
  CHECK(first[1] == doctest::Approx(2.4260963864293714).epsilon(1e-12));
  CHECK(first[2] == doctest::Approx(3.821008577598108).epsilon(1e-12));
  auto twice = poisson_arrivals(3, 2.0, 42);  // the same draws, gaps halved
  CHECK(twice[2] == doctest::Approx(first[2] / 2).epsilon(1e-12));
  auto inf = poisson_arrivals(5, std::numeric_limits<double>::infinity(), 1);
  for (double t : inf) CHECK(t == 0);
  CHECK_THROWS_AS(poisson_arrivals(3, 0, 1), InputError);
}

TEST_CASE("rate, sweep and integer lists parse or are refused by name") {
  auto r = parse_rates("1,4,16,inf");
  REQUIRE(r.size() == 4);
  CHECK(r[2] == 16);
  CHECK(std::isinf(r[3]));
  CHECK(format_rate(r[3]) == "inf");
  CHECK(format_rate(0.5) == "0.5");
  CHECK_THROWS_AS(parse_rates("1,x"), InputError);
  CHECK_THROWS_AS(parse_rates("0"), InputError);
  CHECK_THROWS_AS(parse_rates(""), InputError);
  std::string key;
  std::vector<int> vals;
  parse_sweep("max-num-seqs=1,8,32,128", key, vals);
  CHECK(key == "max-num-seqs");
  CHECK(vals == std::vector<int>{1, 8, 32, 128});
  CHECK_THROWS_AS(parse_sweep("temperature=1,2", key, vals), InputError);
  CHECK_THROWS_AS(parse_sweep("max-num-seqs=1,-2", key, vals), InputError);
  CHECK(parse_int_list("1,8,32", "--batch") == std::vector<int>{1, 8, 32});
  CHECK_THROWS_WITH_AS(parse_int_list("1,,3", "--batch"), doctest::Contains("--batch"), InputError);
}
