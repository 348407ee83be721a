// Summary statistics for benchmark samples: mean, spread and percentiles.
// Percentiles interpolate linearly between the two nearest ranks (numpy's default), so a
// percentile of sorted samples x[0..n-1] at q is x at fractional index q/100 * (n - 1).
#pragma once
#include <vector>

#include <nlohmann/json.hpp>

namespace llmctl::bench {

struct Summary {
  int n = 0;
  double mean = 0, stddev = 0;  // stddev: sample standard deviation (n - 1), 0 when n < 2
  double min = 0, max = 0;
  double median = 0, p90 = 0, p99 = 0;
};

// q in [0, 100]; samples need not be sorted. 0 for no samples.
double percentile(std::vector<double> samples, double q);
Summary summarize(const std::vector<double>& samples);

// {"mean", "std", "min", "median", "p90", "p99", "max"} with every value multiplied by scale
// (e.g. 1000 for seconds -> ms), under keys "<prefix>_mean" ... in `row`.
void put_summary(nlohmann::ordered_json& row, const std::string& prefix, const Summary& s, double scale = 1.0);

}  // namespace llmctl::bench
