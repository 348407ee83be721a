#include "bench/svg_plot.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "engine/core/error.h"

namespace llmctl::bench {

namespace {
constexpr double kWidth = 760, kPanelHeight = 330, kTitleHeight = 40;
constexpr double kLeft = 90, kRight = 200, kTop = 36, kBottom = 56;  // margins inside a panel
const char* kColors[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf"};

std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", v);
  return buf;
}

std::string tick_label(double v, double step) {
  char buf[32];
  int decimals = step >= 1 ? 0 : int(std::ceil(-std::log10(step) - 1e-9));
  std::snprintf(buf, sizeof buf, "%.*f", std::min(decimals, 6), v);
  return buf;
}

void text(std::ostringstream& os, double x, double y, const std::string& s, const char* anchor = "middle",
          int size = 12, const char* extra = "") {
  os << "<text x=\"" << num(x) << "\" y=\"" << num(y) << "\" font-size=\"" << size << "\" text-anchor=\"" << anchor
     << "\"" << extra << ">" << xml_escape(s) << "</text>\n";
}

void panel(std::ostringstream& os, const Chart& c, const Panel& p, double y0) {
  const double px0 = kLeft, px1 = kWidth - kRight, py0 = y0 + kTop, py1 = y0 + kPanelHeight - kBottom;
  double ymax = 0;
  for (const auto& s : p.series)
    for (double v : s.y)
      if (std::isfinite(v)) ymax = std::max(ymax, v);
  if (ymax <= 0) ymax = 1;
  const double step = nice_step(ymax);
  const double top = std::ceil(ymax / step - 1e-9) * step;
  auto ypos = [&](double v) { return py1 - (v / top) * (py1 - py0); };
  const size_t nx = c.x_labels.size();
  auto xpos = [&](size_t i) { return nx <= 1 ? (px0 + px1) / 2 : px0 + 30 + double(i) * (px1 - px0 - 60) / double(nx - 1); };

  text(os, (px0 + px1) / 2, y0 + 22, p.title, "middle", 14, " font-weight=\"bold\"");
  // grid and y ticks
  for (double v = 0; v <= top + step * 1e-6; v += step) {
    const double y = ypos(v);
    os << "<line x1=\"" << num(px0) << "\" y1=\"" << num(y) << "\" x2=\"" << num(px1) << "\" y2=\"" << num(y)
       << "\" stroke=\"#e0e0e0\"/>\n";
    os << "<line x1=\"" << num(px0 - 5) << "\" y1=\"" << num(y) << "\" x2=\"" << num(px0) << "\" y2=\"" << num(y)
       << "\" stroke=\"black\"/>\n";
    text(os, px0 - 8, y + 4, tick_label(v, step), "end", 11);
  }
  // x ticks (every k-th labelled when there are many)
  const size_t every = nx > 16 ? (nx + 15) / 16 : 1;
  for (size_t i = 0; i < nx; ++i) {
    if (i % every) continue;
    const double x = xpos(i);
    os << "<line x1=\"" << num(x) << "\" y1=\"" << num(py1) << "\" x2=\"" << num(x) << "\" y2=\"" << num(py1 + 5)
       << "\" stroke=\"black\"/>\n";
    text(os, x, py1 + 19, c.x_labels[i], "middle", 11);
  }
  // axes
  os << "<line x1=\"" << num(px0) << "\" y1=\"" << num(py1) << "\" x2=\"" << num(px1) << "\" y2=\"" << num(py1)
     << "\" stroke=\"black\"/>\n";
  os << "<line x1=\"" << num(px0) << "\" y1=\"" << num(py0) << "\" x2=\"" << num(px0) << "\" y2=\"" << num(py1)
     << "\" stroke=\"black\"/>\n";
  text(os, (px0 + px1) / 2, py1 + 42, c.x_label, "middle", 12);
  const double ly = (py0 + py1) / 2;
  os << "<text x=\"" << num(22) << "\" y=\"" << num(ly) << "\" font-size=\"12\" text-anchor=\"middle\" transform=\"rotate(-90 22 "
     << num(ly) << ")\">" << xml_escape(p.y_label) << "</text>\n";
  // series
  for (size_t s = 0; s < p.series.size(); ++s) {
    const char* color = kColors[s % (sizeof kColors / sizeof *kColors)];
    const auto& ser = p.series[s];
    std::string path;
    for (size_t i = 0; i < ser.y.size() && i < nx; ++i) {
      if (!std::isfinite(ser.y[i])) continue;
      if (!path.empty()) path += ' ';
      path.append(num(xpos(i))).append(",").append(num(ypos(ser.y[i])));
    }
    if (!path.empty())
      os << "<polyline fill=\"none\" stroke=\"" << color << "\" stroke-width=\"2\" points=\"" << path << "\"/>\n";
    for (size_t i = 0; i < ser.y.size() && i < nx; ++i) {
      if (!std::isfinite(ser.y[i])) continue;
      os << "<circle cx=\"" << num(xpos(i)) << "\" cy=\"" << num(ypos(ser.y[i])) << "\" r=\"3.5\" fill=\"" << color
         << "\"><title>" << xml_escape(ser.name + " at " + c.x_labels[i] + ": " + std::to_string(ser.y[i]))
         << "</title></circle>\n";
    }
    // legend
    const double lx = px1 + 16, lyy = py0 + 8 + 20 * double(s);
    os << "<line x1=\"" << num(lx) << "\" y1=\"" << num(lyy) << "\" x2=\"" << num(lx + 22) << "\" y2=\"" << num(lyy)
       << "\" stroke=\"" << color << "\" stroke-width=\"2\"/>\n";
    os << "<circle cx=\"" << num(lx + 11) << "\" cy=\"" << num(lyy) << "\" r=\"3.5\" fill=\"" << color << "\"/>\n";
    text(os, lx + 28, lyy + 4, ser.name, "start", 11);
  }
}
}  // namespace

double nice_step(double span, int target) {
  LLM_CHECK(span > 0 && target > 0) << "nice_step(" << span << ", " << target << ")";
  const double raw = span / target;
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  const double f = raw / mag;
  return (f <= 1 ? 1 : f <= 2 ? 2 : f <= 5 ? 5 : 10) * mag;
}

std::string xml_escape(const std::string& s) {
  std::string o;
  for (char ch : s) {
    switch (ch) {
      case '&': o += "&amp;"; break;
      case '<': o += "&lt;"; break;
      case '>': o += "&gt;"; break;
      case '"': o += "&quot;"; break;
      case '\'': o += "&apos;"; break;
      default: o += ch;
    }
  }
  return o;
}

std::string render_svg(const Chart& c) {
  LLM_REQUIRE(!c.panels.empty() && !c.x_labels.empty()) << "nothing to plot";
  const double h = kTitleHeight + kPanelHeight * double(c.panels.size());
  std::ostringstream os;
  os << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
     << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << num(kWidth) << "\" height=\"" << num(h)
     << "\" viewBox=\"0 0 " << num(kWidth) << " " << num(h) << "\" font-family=\"sans-serif\">\n"
     << "<rect x=\"0\" y=\"0\" width=\"" << num(kWidth) << "\" height=\"" << num(h) << "\" fill=\"white\"/>\n";
  text(os, kWidth / 2, 26, c.title, "middle", 16, " font-weight=\"bold\"");
  for (size_t i = 0; i < c.panels.size(); ++i) panel(os, c, c.panels[i], kTitleHeight + kPanelHeight * double(i));
  os << "</svg>\n";
  return os.str();
}

}  // namespace llmctl::bench
