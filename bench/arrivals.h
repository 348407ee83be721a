// Request arrival schedules for serving benchmarks: a Poisson process (exponential gaps) at a given
// rate, or everything at once (rate infinite). Deterministic for a seed on every platform: the
// gaps are drawn as -log(1 - u) / rate with u from the 53 high bits of mt19937_64.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace llmctl::bench {

// Offsets in seconds from the start, non-decreasing, the first at its gap from 0 (not at 0) unless
// the rate is infinite (all 0). rate must be > 0 (std::numeric_limits<double>::infinity() = inf).
std::vector<double> poisson_arrivals(int n, double rate, uint64_t seed);

// "1,4,16,inf" -> {1, 4, 16, inf}; throws InputError on a bad or non-positive value.
std::vector<double> parse_rates(const std::string& list);
std::string format_rate(double rate);  // "4", "0.5", "inf"

}  // namespace llmctl::bench
