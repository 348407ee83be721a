#include "bench/dataset.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <random>
#include <sstream>

#include <nlohmann/json.hpp>

#include "engine/core/error.h"
#include "engine/core/json_bounded.h"
#include "engine/core/utf8.h"
#include "engine/tokenizer/prompt.h"

#ifndef LLMCTL_SOURCE_DIR_STR
#define LLMCTL_SOURCE_DIR_STR "."
#endif

namespace llmctl::bench {

namespace {
uint64_t splitmix(uint64_t& s) {
  uint64_t z = (s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  LLM_REQUIRE(f) << "cannot read " << path;
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// A token count for text without a tokenizer: about 4/3 tokens per word.
int estimate_tokens(const std::string& text) {
  std::istringstream is(text);
  std::string w;
  int n = 0;
  while (is >> w) ++n;
  return std::max(1, int(std::lround(n * 4.0 / 3.0)));
}

void fill_tokens(BenchRequest& r, const Tokenizer* tok) {
  if (tok) {
    r.prompt_ids = encode_prompt(*tok, r.prompt);
    r.input_len = int(r.prompt_ids.size());
  } else {
    r.input_len = estimate_tokens(r.prompt);
  }
}

std::vector<BenchRequest> random_requests(const DatasetOptions& o, const Tokenizer* tok) {
  uint64_t state = o.seed * 0x2545F4914F6CDD1Dull + 1;
  std::vector<BenchRequest> out;
  std::vector<int> normal;  // non-special ids
  std::vector<std::string> words;
  if (tok) {
    // Tokens that are whole UTF-8 on their own, so the decoded prompt is valid text to send.
    for (int i = 0; i < tok->vocab_size(); ++i) {
      const std::string bytes = tok->is_special(i) ? std::string() : tok->token_bytes(i);
      if (!bytes.empty() && utf8_valid(bytes)) normal.push_back(i);
    }
    LLM_CHECK(!normal.empty()) << "the vocabulary has no ordinary tokens";
  } else {
    const std::string path = o.words_file.empty() ? default_data_dir() + "/wikitext2-valid.txt" : o.words_file;
    std::istringstream is(read_file(path));
    std::string w;
    while (is >> w) words.push_back(w);
    LLM_REQUIRE(words.size() > 100) << path << " has too few words for random prompts";
  }
  for (int i = 0; i < o.num_prompts; ++i) {
    BenchRequest r;
    const int in = draw_length(o.input_len, o.range_ratio, state);
    r.output_len = draw_length(o.output_len, o.range_ratio, state);
    if (tok) {
      if (tok->add_bos() && tok->bos_id() >= 0) r.prompt_ids.push_back(tok->bos_id());
      while (int(r.prompt_ids.size()) < in) r.prompt_ids.push_back(normal[splitmix(state) % normal.size()]);
      r.prompt = tok->decode(r.prompt_ids, true);
      r.input_len = int(r.prompt_ids.size());
    } else {
      const size_t n_words = size_t(std::max(1L, std::lround(in * 0.75)));
      const size_t start = splitmix(state) % (words.size() - std::min(words.size() - 1, n_words));
      for (size_t k = 0; k < n_words; ++k) {
        if (k) r.prompt += ' ';
        r.prompt += words[(start + k) % words.size()];
      }
      r.input_len = in;
    }
    out.push_back(std::move(r));
  }
  return out;
}

std::vector<BenchRequest> jsonl_requests(const DatasetOptions& o, const Tokenizer* tok) {
  std::istringstream in(read_file(o.dataset));
  std::vector<BenchRequest> all;
  std::string line;
  int lineno = 0;
  while (std::getline(in, line)) {
    ++lineno;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const nlohmann::json j =
        parse_json_bounded(line, kRequestJsonLimits, o.dataset + ":" + std::to_string(lineno));
    LLM_REQUIRE(j.is_object() && j.contains("prompt") && j["prompt"].is_string())
        << o.dataset << ":" << lineno << ": each line needs a string \"prompt\"";
    BenchRequest r;
    r.prompt = j["prompt"].get<std::string>();
    r.output_len = o.output_len;
    if (!o.fixed_output_len && j.contains("max_tokens")) {
      LLM_REQUIRE(j["max_tokens"].is_number_integer() && j["max_tokens"].get<int>() >= 1)
          << o.dataset << ":" << lineno << ": \"max_tokens\" must be a positive integer";
      r.output_len = j["max_tokens"].get<int>();
    }
    fill_tokens(r, tok);
    all.push_back(std::move(r));
  }
  return all;
}

std::vector<BenchRequest> sharegpt_requests(const DatasetOptions& o, const Tokenizer* tok) {
  const nlohmann::json j = read_json_file_bounded(o.dataset, kModelJsonLimits);
  LLM_REQUIRE(j.is_array()) << o.dataset << ": a ShareGPT file is a JSON array of conversations";
  std::vector<size_t> order(j.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::shuffle(order.begin(), order.end(), std::mt19937_64(o.seed));
  std::vector<BenchRequest> all;
  for (size_t i : order) {
    const auto& item = j[i];
    if (!item.is_object() || !item.contains("conversations") || !item["conversations"].is_array()) continue;
    const auto& conv = item["conversations"];
    if (conv.size() < 2 || !conv[0].contains("value") || !conv[1].contains("value") || !conv[0]["value"].is_string() ||
        !conv[1]["value"].is_string())
      continue;
    BenchRequest r;
    r.prompt = conv[0]["value"].get<std::string>();
    const std::string reply = conv[1]["value"].get<std::string>();
    if (o.fixed_output_len)
      r.output_len = o.output_len;
    else
      r.output_len = tok ? int(tok->encode(reply, false).size()) : estimate_tokens(reply);
    fill_tokens(r, tok);
    // As vLLM's sampler does: drop conversations too short to time or too long to serve.
    if (r.input_len < 4 || r.output_len < 4 || r.input_len > 1024 || r.input_len + r.output_len > 2048) continue;
    all.push_back(std::move(r));
    if (int(all.size()) >= o.num_prompts) break;
  }
  return all;
}
}  // namespace

int draw_length(int len, double ratio, uint64_t& state) {
  LLM_REQUIRE(len >= 1) << "lengths must be >= 1, got " << len;
  if (ratio <= 0) return len;
  const int lo = std::max(1, int(std::floor(len * (1 - ratio)))), hi = std::max(lo, int(std::ceil(len * (1 + ratio))));
  return lo + int(splitmix(state) % uint64_t(hi - lo + 1));
}

std::string default_data_dir() {
  if (const char* d = std::getenv("LLMCTL_DATA_DIR")) return d;
  return std::string(LLMCTL_SOURCE_DIR_STR) + "/../shared/data";
}

std::vector<BenchRequest> make_requests(const DatasetOptions& o, const Tokenizer* tok) {
  LLM_REQUIRE(o.num_prompts >= 1) << "--num-prompts must be >= 1";
  LLM_REQUIRE(o.range_ratio >= 0 && o.range_ratio < 1) << "--range-ratio must be in [0, 1)";
  if (o.dataset == "random") return random_requests(o, tok);
  std::vector<BenchRequest> all;
  if (ends_with(o.dataset, ".jsonl"))
    all = jsonl_requests(o, tok);
  else if (ends_with(o.dataset, ".json"))
    all = sharegpt_requests(o, tok);
  else
    LLM_THROW() << "unknown dataset '" << o.dataset << "' (expected random, a .jsonl file or a ShareGPT .json file)";
  LLM_REQUIRE(!all.empty()) << o.dataset << " holds no usable request";
  std::vector<BenchRequest> out;
  for (int i = 0; i < o.num_prompts; ++i) out.push_back(all[size_t(i) % all.size()]);
  return out;
}

}  // namespace llmctl::bench
