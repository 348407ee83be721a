#include "bench/report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <filesystem>
#include <iostream>
#include <sstream>

#include "engine/core/error.h"

namespace llmctl::bench {

namespace {
std::string cell(const nlohmann::ordered_json& v, int precision) {
  if (v.is_null()) return "-";
  if (v.is_string()) return v.get<std::string>();
  if (v.is_boolean()) return v.get<bool>() ? "yes" : "no";
  if (v.is_number_integer() || v.is_number_unsigned()) return v.dump();
  if (v.is_number_float()) {
    const double d = v.get<double>();
    if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
    if (std::isnan(d)) return "nan";
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.*f", precision, d);
    return buf;
  }
  return v.dump();
}

// CSV text of a value: numbers with full precision, strings as they are, the rest as JSON.
std::string csv_value(const nlohmann::ordered_json& v) {
  if (v.is_null()) return "";
  if (v.is_string()) return v.get<std::string>();
  if (v.is_number_float()) {
    const double d = v.get<double>();
    if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.17g", d);
    return buf;
  }
  return v.dump();
}

void flatten(const nlohmann::ordered_json& j, const std::string& prefix,
             std::vector<std::pair<std::string, std::string>>& out) {
  if (j.is_object()) {
    for (auto it = j.begin(); it != j.end(); ++it)
      flatten(it.value(), prefix.empty() ? it.key() : prefix + "." + it.key(), out);
  } else {
    out.emplace_back(prefix, csv_value(j));
  }
}

// A JSON number that is +-inf or nan would be written as null by nlohmann: keep it as a string.
nlohmann::ordered_json json_safe(const nlohmann::ordered_json& v) {
  if (v.is_number_float() && !std::isfinite(v.get<double>())) return cell(v, 0);
  if (v.is_object()) {
    nlohmann::ordered_json o = nlohmann::ordered_json::object();
    for (auto it = v.begin(); it != v.end(); ++it) o[it.key()] = json_safe(it.value());
    return o;
  }
  if (v.is_array()) {
    nlohmann::ordered_json a = nlohmann::ordered_json::array();
    for (const auto& x : v) a.push_back(json_safe(x));
    return a;
  }
  return v;
}
}  // namespace

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\r\n") == std::string::npos) return s;
  std::string q = "\"";
  for (char c : s) {
    if (c == '"') q += '"';
    q += c;
  }
  return q + "\"";
}

namespace {
// The run's model, weights and threads as the table's first columns, as llama-bench shows them.
Report with_run_columns(const Report& r) {
  if (!r.meta.contains("weights")) return r;
  Report v = r;
  std::filesystem::path model(r.meta.value("model", std::string()));
  if (model.filename() == "hf") model = model.parent_path();  // $LLMCTL_HOME/models/NAME/hf
  std::vector<Column> lead = {{"model", "model", 0}, {"weights", "weights", 0}};
  const int threads = r.meta.value("threads", 0);
  if (threads > 0) lead.push_back({"threads", "threads", 0});
  v.table.insert(v.table.begin(), lead.begin(), lead.end());
  for (auto& row : v.rows) {
    row["model"] = model.filename().string();
    row["weights"] = r.meta["weights"];
    if (threads > 0) row["threads"] = threads;
  }
  return v;
}
}  // namespace

std::string format_table(const Report& report) {
  const Report r = with_run_columns(report);
  std::vector<std::vector<std::string>> cells;
  std::vector<size_t> width;
  std::vector<bool> left;  // strings align left, numbers right
  for (const auto& c : r.table) width.push_back(c.header.size());
  left.assign(r.table.size(), false);
  for (const auto& row : r.rows) {
    std::vector<std::string> line;
    for (size_t i = 0; i < r.table.size(); ++i) {
      const auto& key = r.table[i].key;
      nlohmann::ordered_json v = row.contains(key) ? row[key] : nlohmann::ordered_json();
      if (v.is_string()) left[i] = true;
      line.push_back(cell(v, r.table[i].precision));
      width[i] = std::max(width[i], line.back().size());
    }
    cells.push_back(std::move(line));
  }
  std::ostringstream os;
  auto put = [&](const std::vector<std::string>& line) {
    os << "|";
    for (size_t i = 0; i < line.size(); ++i) {
      const size_t pad = width[i] - line[i].size();
      os << " " << (left[i] ? line[i] + std::string(pad, ' ') : std::string(pad, ' ') + line[i]) << " |";
    }
    os << "\n";
  };
  std::vector<std::string> head;
  for (const auto& c : r.table) head.push_back(c.header);
  put(head);
  os << "|";
  for (size_t i = 0; i < width.size(); ++i) os << (left[i] ? ":" : "-") << std::string(width[i], '-') << (left[i] ? "-" : ":") << "|";
  os << "\n";
  for (const auto& line : cells) put(line);
  if (r.interrupted) os << "(interrupted: the rows hold what was measured before Ctrl-C)\n";
  return os.str();
}

nlohmann::ordered_json to_json(const Report& r) {
  nlohmann::ordered_json j;
  j["mode"] = r.mode;
  j["interrupted"] = r.interrupted;
  j["meta"] = json_safe(r.meta);
  nlohmann::ordered_json rows = nlohmann::ordered_json::array();
  for (const auto& row : r.rows) rows.push_back(json_safe(row));
  j["rows"] = rows;
  if (!r.extra.empty()) j["extra"] = json_safe(r.extra);
  return j;
}

std::string to_csv(const Report& r) {
  std::vector<std::pair<std::string, std::string>> meta;
  flatten(r.meta, "meta", meta);
  std::vector<std::string> keys;
  for (const auto& row : r.rows)
    for (auto it = row.begin(); it != row.end(); ++it)
      if (std::find(keys.begin(), keys.end(), it.key()) == keys.end()) keys.push_back(it.key());
  std::ostringstream os;
  os << "mode,interrupted";
  for (const auto& [k, v] : meta) os << "," << csv_field(k);
  for (const auto& k : keys) os << "," << csv_field(k);
  os << "\n";
  for (const auto& row : r.rows) {
    os << csv_field(r.mode) << "," << (r.interrupted ? "true" : "false");
    for (const auto& [k, v] : meta) os << "," << csv_field(v);
    for (const auto& k : keys) os << "," << csv_field(row.contains(k) ? csv_value(row[k]) : "");
    os << "\n";
  }
  return os.str();
}

void write_text_file(const std::string& path, const std::string& text) {
  if (path == "-") {
    std::cout << text << std::flush;
    LLM_REQUIRE(std::cout) << "cannot write to stdout";
    return;
  }
  std::ofstream f(path, std::ios::binary);
  LLM_REQUIRE(f) << "cannot write " << path;
  f << text;
  f.close();
  LLM_REQUIRE(f) << "cannot write " << path;
}

void write_report_files(const Report& r, const std::string& json_path, const std::string& csv_path) {
  if (!json_path.empty()) write_text_file(json_path, to_json(r).dump(2) + "\n");
  if (!csv_path.empty()) write_text_file(csv_path, to_csv(r));
}

}  // namespace llmctl::bench
