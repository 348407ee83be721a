// Benchmark reports: the table, JSON and CSV carry the same rows; CSV lines have as many fields as
// the header (quoting commas and quotes); the SVG chart is well-formed XML with axes, ticks,
// labels and a legend; perplexity windows score every token but the first exactly once (stride < ctx).
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "bench/charts.h"
#include "bench/perplexity.h"
#include "bench/report.h"
#include "bench/svg_plot.h"

using namespace llmctl::bench;

namespace {
Report sample_report() {
  Report r;
  r.mode = "throughput";
  r.meta["machine"] = {{"hostname", "host, with comma"}, {"cores", 2}};
  r.meta["model"] = "a \"quoted\" <model>";
  r.meta["config"] = {{"sweep", "max-num-seqs"}};
  for (int s : {1, 8, 32}) {
    nlohmann::ordered_json row;
    row["max_num_seqs"] = s;
    row["output_tokens_per_s"] = 10.0 * s;
    row["total_tokens_per_s"] = 50.0 * s;
    row["requests_per_s"] = 0.5 * s;
    row["peak_kv_usage_pct"] = 1.5 * s;
    r.rows.push_back(row);
  }
  r.rows[1]["note"] = "only here";
  r.table = {{"max_num_seqs", "max-num-seqs", 0}, {"output_tokens_per_s", "output tok/s", 1}};
  return r;
}

// Splits one CSV line into fields (RFC 4180 quoting).
std::vector<std::string> csv_split(const std::string& line) {
  std::vector<std::string> out{""};
  bool q = false;
  for (size_t i = 0; i < line.size(); ++i) {
    char c = line[i];
    if (q) {
      if (c == '"' && i + 1 < line.size() && line[i + 1] == '"') {
        out.back() += '"';
        ++i;
      } else if (c == '"') {
        q = false;
      } else {
        out.back() += c;
      }
    } else if (c == '"') {
      q = true;
    } else if (c == ',') {
      out.emplace_back();
    } else {
      out.back() += c;
    }
  }
  return out;
}

std::vector<std::string> lines(const std::string& s) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos < s.size()) {
    size_t nl = s.find('\n', pos);
    out.push_back(s.substr(pos, nl - pos));
    pos = nl == std::string::npos ? s.size() : nl + 1;
  }
  return out;
}

// Minimal well-formedness check: tags balance, attributes are quoted, '&' starts an entity.
bool well_formed(const std::string& x, std::string& why) {
  std::vector<std::string> stack;
  size_t i = 0;
  while (i < x.size()) {
    if (x[i] == '&') {
      size_t semi = x.find(';', i);
      const std::string ent = x.substr(i, semi == std::string::npos ? 0 : semi - i + 1);
      if (ent != "&amp;" && ent != "&lt;" && ent != "&gt;" && ent != "&quot;" && ent != "&apos;") {
        why = "bad entity at " + std::to_string(i);
        return false;
      }
      i = semi + 1;
      continue;
    }
    if (x[i] != '<') {
      if (x[i] == '>') {
        why = "stray > at " + std::to_string(i);
        return false;
      }
      ++i;
      continue;
    }
    size_t end = i + 1;
    bool quoted = false;
    while (end < x.size() && (quoted || x[end] != '>')) {
      if (x[end] == '"') quoted = !quoted;
      if (!quoted && x[end] == '<') {
        why = "< inside a tag at " + std::to_string(end);
        return false;
      }
      ++end;
    }
    if (end >= x.size()) {
      why = "unterminated tag";
      return false;
    }
    std::string tag = x.substr(i + 1, end - i - 1);
    i = end + 1;
    if (tag[0] == '?' || tag[0] == '!') continue;
    if (tag[0] == '/') {
      if (stack.empty() || stack.back() != tag.substr(1)) {
        why = "mismatched </" + tag.substr(1) + ">";
        return false;
      }
      stack.pop_back();
      continue;
    }
    const bool self_closing = tag.back() == '/';
    const std::string name = tag.substr(0, tag.find_first_of(" /"));
    if (!self_closing) stack.push_back(name);
  }
  if (!stack.empty()) why = "unclosed <" + stack.back() + ">";
  return stack.empty();
}

size_t count(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (size_t p = s.find(what); p != std::string::npos; p = s.find(what, p + 1)) ++n;
  return n;
}
}  // namespace

TEST_CASE("CSV: one line per row plus the header, every line as wide as the header") {
  Report r = sample_report();
  const auto ls = lines(to_csv(r));
  REQUIRE(ls.size() == 4);
  const auto head = csv_split(ls[0]);
  CHECK(head[0] == "mode");
  CHECK(head[1] == "interrupted");
  CHECK(std::find(head.begin(), head.end(), "meta.machine.hostname") != head.end());
  CHECK(std::find(head.begin(), head.end(), "note") != head.end());  // the union of row keys
  for (size_t i = 1; i < ls.size(); ++i) {
    const auto f = csv_split(ls[i]);
    CHECK(f.size() == head.size());
    CHECK(f[0] == "throughput");
    const size_t host = size_t(std::find(head.begin(), head.end(), "meta.machine.hostname") - head.begin());
    CHECK(f[host] == "host, with comma");
    const size_t model = size_t(std::find(head.begin(), head.end(), "meta.model") - head.begin());
    CHECK(f[model] == "a \"quoted\" <model>");
  }
  CHECK(csv_field("plain") == "plain");
  CHECK(csv_field("a,b") == "\"a,b\"");
  CHECK(csv_field("say \"x\"") == "\"say \"\"x\"\"\"");
}

TEST_CASE("JSON: mode, meta, rows; infinities kept as strings") {
  Report r = sample_report();
  r.rows[0]["request_rate"] = std::numeric_limits<double>::infinity();
  r.interrupted = true;
  auto j = to_json(r);
  CHECK(j["mode"] == "throughput");
  CHECK(j["interrupted"] == true);
  CHECK(j["rows"].size() == 3);
  CHECK(j["rows"][0]["request_rate"] == "inf");
  CHECK(j["meta"]["machine"]["cores"] == 2);
  auto back = nlohmann::json::parse(j.dump());  // what is written parses back
  CHECK(back["rows"][2]["output_tokens_per_s"].get<double>() == doctest::Approx(320));
}

TEST_CASE("table: a header, a rule and one line per row, aligned") {
  Report r = sample_report();
  r.interrupted = true;
  const auto ls = lines(format_table(r));
  REQUIRE(ls.size() == 6);
  CHECK(ls[0].find("output tok/s") != std::string::npos);
  CHECK(ls[2].find("10.0") != std::string::npos);
  for (size_t i = 1; i < 5; ++i) CHECK(ls[i].size() == ls[0].size());
  CHECK(ls[5].find("interrupted") != std::string::npos);
}

TEST_CASE("SVG: well-formed, with axes, ticks, labels and a legend entry per series") {
  Report r = sample_report();
  const std::string svg = report_svg(r);
  std::string why;
  CHECK_MESSAGE(well_formed(svg, why), why);
  CHECK(svg.rfind("<?xml", 0) == 0);
  CHECK(svg.find("xmlns=\"http://www.w3.org/2000/svg\"") != std::string::npos);
  CHECK(svg.find("&lt;model&gt;") != std::string::npos);  // the title is escaped
  CHECK(svg.find(">max-num-seqs<") != std::string::npos);  // the x label
  CHECK(svg.find(">tokens / s<") != std::string::npos);    // a y label
  CHECK(svg.find(">output tokens/s<") != std::string::npos);  // a legend entry
  CHECK(count(svg, "<polyline") == 4);  // two token series, requests/s, KV
  CHECK(count(svg, ">32</text>") == 3);  // the x tick of the last point in each panel

  Chart c{"t", "x", {"1", "2"}, {{"p", "y", {{"s", {1.0, std::nan("")}}}}}};
  CHECK(well_formed(render_svg(c), why));
  CHECK(nice_step(97) == 20);
  CHECK(nice_step(1) == doctest::Approx(0.2));
  CHECK(nice_step(4500) == 1000);
  CHECK(xml_escape("a<b&\"c\"") == "a&lt;b&amp;&quot;c&quot;");
}

TEST_CASE("perplexity windows: every token after the first scored once (stride < ctx), as HF's loop") {
  for (int n : {1, 2, 5, 100, 128, 129, 1000}) {
    for (auto [ctx, stride] : std::vector<std::pair<int, int>>{{128, 64}, {128, 128}, {16, 1}, {10, 3}}) {
      CAPTURE(n);
      CAPTURE(ctx);
      CAPTURE(stride);
      auto ws = perplexity_windows(n, ctx, stride);
      std::vector<int> scored(size_t(n), 0);
      for (const auto& w : ws) {
        CHECK(w.end - w.begin <= ctx);
        CHECK(w.first_scored > w.begin);
        CHECK(w.begin % stride == 0);
        for (int p = w.first_scored; p < w.end; ++p) ++scored[size_t(p)];
      }
      if (n > 0) CHECK(scored[0] == 0);
      // With stride == ctx the windows do not overlap and, as in HF's loop, the first token of
      // each window has no context and is not scored.
      for (int p = 1; p < n; ++p) CHECK(scored[size_t(p)] == (stride == ctx && p % ctx == 0 ? 0 : 1));
    }
  }
  auto hf = perplexity_windows(1000, 128, 64);  // as tests/golden/make_ppl_golden.py visits them
  CHECK(hf.size() == 15);
  CHECK(hf[1].begin == 64);
  CHECK(hf[1].first_scored == 128);
  CHECK(hf.back().end == 1000);
}
