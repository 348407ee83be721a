// A benchmark's results in one struct, and its three renderings: a readable table (stdout),
// JSON (every figure, nested meta) and CSV (one line per row, meta flattened into columns so
// each line stands alone).
//
// JSON: {"mode", "interrupted", "meta": {machine, build, backend, device, model, dtype, config...},
//        "rows": [{...}, ...], "extra": {...}}
// CSV:  header "mode,interrupted,<meta.a.b...>,<row keys...>"; row keys are the union over rows,
//       in first-seen order; a value a row lacks is empty; arrays/objects are written as JSON.
#pragma once
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace llmctl::bench {

struct Column {
  std::string key;     // row key
  std::string header;  // table heading
  int precision = 2;   // digits after the point for numbers
};

struct Report {
  std::string mode;                        // throughput | latency | serve | ppl
  nlohmann::ordered_json meta = nlohmann::ordered_json::object();
  std::vector<nlohmann::ordered_json> rows;  // one per sweep point / case
  std::vector<Column> table;               // what the table shows (all keys stay in JSON/CSV)
  nlohmann::ordered_json extra = nlohmann::ordered_json::object();  // JSON only (e.g. per-window data)
  bool interrupted = false;                // stopped early (Ctrl-C): rows hold what was measured
};

std::string format_table(const Report& r);
nlohmann::ordered_json to_json(const Report& r);
std::string to_csv(const Report& r);

// One CSV field: quoted when it holds a comma, quote, CR or LF (quotes doubled).
std::string csv_field(const std::string& s);

// Writes JSON and/or CSV (empty path: skipped; "-": stdout). Throws InputError when a file cannot be
// written.
void write_report_files(const Report& r, const std::string& json_path, const std::string& csv_path);
void write_text_file(const std::string& path, const std::string& text);

}  // namespace llmctl::bench
