// The SVG chart of a benchmark report (--plot): which figures each mode draws.
//   throughput  tokens/s and requests/s against the sweep value (max-num-seqs ...), peak KV use
//   latency     prefill, TPOT and E2E per case (batch, input, output), mean over repetitions
//   serve       throughput and goodput against the request rate; TTFT, TPOT, ITL, E2E percentiles
//   ppl         mean negative log-likelihood per window
#pragma once
#include <string>

#include "bench/report.h"
#include "bench/svg_plot.h"

namespace llmctl::bench {

Chart chart_for(const Report& r);
inline std::string report_svg(const Report& r) { return render_svg(chart_for(r)); }

}  // namespace llmctl::bench
