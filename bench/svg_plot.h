// Self-contained SVG line charts for benchmark sweeps: one or more panels stacked vertically, each
// with axes, ticks, axis labels, a title and a legend. The x axis is categorical (the sweep values
// as written, e.g. "1", "8", "32", "inf"), evenly spaced; the y axis is linear from 0 to a round
// number above the largest value. No scripts, fonts or external references: any browser or image
// viewer shows it.
#pragma once
#include <string>
#include <vector>

namespace llmctl::bench {

struct Series {
  std::string name;
  std::vector<double> y;  // one per x category; NaN = no point there
};

struct Panel {
  std::string title;
  std::string y_label;
  std::vector<Series> series;
};

struct Chart {
  std::string title;
  std::string x_label;
  std::vector<std::string> x_labels;
  std::vector<Panel> panels;
};

std::string render_svg(const Chart& chart);

// Round tick step for a span, about `target` ticks: 1, 2 or 5 times a power of ten.
double nice_step(double span, int target = 5);
std::string xml_escape(const std::string& s);

}  // namespace llmctl::bench
