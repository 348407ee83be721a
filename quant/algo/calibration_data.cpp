#include "quant/algo/calibration_data.h"

#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include <nlohmann/json.hpp>

#include "engine/core/error.h"

namespace llmctl::quant {

namespace {

constexpr size_t kMaxFileBytes = size_t(1) << 30;  // calibration text beyond 1 GiB is refused

bool is_jsonl(const std::string& path) {
  auto ends = [&](const std::string& s) { return path.size() >= s.size() && path.compare(path.size() - s.size(), s.size(), s) == 0; };
  return ends(".jsonl") || ends(".ndjson");
}

std::string read_text(const std::string& path) {
  std::error_code ec;
  LLM_REQUIRE(!std::filesystem::exists(path, ec) || std::filesystem::is_regular_file(path, ec))
      << "--calib: " << path << " is not a file";
  std::ifstream in(path, std::ios::binary);
  LLM_REQUIRE(in) << "--calib: cannot read " << path;
  in.seekg(0, std::ios::end);
  const auto size = static_cast<size_t>(in.tellg());
  LLM_REQUIRE(size <= kMaxFileBytes) << "--calib: " << path << " is larger than 1 GiB";
  in.seekg(0);
  std::string text(size, '\0');
  in.read(text.data(), std::streamsize(size));
  LLM_REQUIRE(in.good() || in.eof()) << "--calib: error reading " << path;
  if (!is_jsonl(path)) return text;
  std::istringstream lines(text);
  std::string line, joined;
  int64_t lineno = 0;
  while (std::getline(lines, line)) {
    ++lineno;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
    LLM_REQUIRE(!j.is_discarded() && j.is_object() && j.contains("text") && j["text"].is_string())
        << "--calib: " << path << " line " << lineno << " is not a JSON object with a string \"text\"";
    if (!joined.empty()) joined += "\n\n";
    joined += j["text"].get<std::string>();
  }
  return joined;
}

}  // namespace

std::vector<std::vector<int32_t>> draw_calibration_samples(const CalibrationOptions& o, const Tokenizer& tok) {
  LLM_REQUIRE(!o.files.empty()) << "calibration text is needed: give --calib FILE (text or JSONL with a \"text\" "
                                   "field), e.g. --calib ../shared/data/tinyshakespeare.txt";
  LLM_REQUIRE(o.samples > 0 && o.samples <= 65536) << "--calib-samples must be in [1, 65536], not " << o.samples;
  LLM_REQUIRE(o.seq_len >= 2 && o.seq_len <= 65536) << "--calib-seq-len must be in [2, 65536], not " << o.seq_len;
  // The calibration batch's activations are held whole (a few of [samples x seq_len, hidden]).
  LLM_REQUIRE(int64_t(o.samples) * o.seq_len <= kMaxCalibrationTokens)
      << "--calib-samples " << o.samples << " x --calib-seq-len " << o.seq_len << " = "
      << int64_t(o.samples) * o.seq_len << " calibration tokens: at most " << kMaxCalibrationTokens
      << " (e.g. 512 x 2048, llm-compressor's usual batch, is 1048576)";
  std::vector<std::vector<int>> streams;
  std::vector<int64_t> starts;  // valid window starts per stream, prefix-summed
  int64_t total = 0;
  for (const std::string& f : o.files) {
    std::string text = read_text(f);
    LLM_REQUIRE(!text.empty()) << "--calib: " << f << " has no text";
    streams.push_back(tok.encode(text, /*parse_special=*/false));
    const int64_t valid = int64_t(streams.back().size()) - o.seq_len + 1;
    total += valid > 0 ? valid : 0;
    starts.push_back(total);
  }
  LLM_REQUIRE(total > 0) << "--calib: no file has " << o.seq_len << " tokens (--calib-seq-len)";
  std::mt19937_64 rng(o.seed);
  std::uniform_int_distribution<int64_t> pick(0, total - 1);
  std::vector<std::vector<int32_t>> out;
  out.reserve(size_t(o.samples));
  for (int i = 0; i < o.samples; ++i) {
    int64_t at = pick(rng);
    size_t s = 0;
    while (at >= starts[s]) ++s;
    const int64_t offset = at - (s == 0 ? 0 : starts[s - 1]);
    const auto begin = streams[s].begin() + offset;
    out.emplace_back(begin, begin + o.seq_len);
  }
  return out;
}

}  // namespace llmctl::quant
