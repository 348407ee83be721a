// Benchmark requests: prompts with their lengths, from a random generator, a JSONL file or a
// ShareGPT JSON file.
//
//   random       prompts of input_len tokens (each length drawn uniformly from
//                [len * (1 - range_ratio), len * (1 + range_ratio)], likewise output lengths):
//                random non-special token ids when a tokenizer is given, else runs of WikiText
//                words (about 0.75 words per token; the server's usage gives the true count)
//   FILE.jsonl   one {"prompt": "...", "max_tokens": N} per line (max_tokens optional: output_len)
//   FILE.json    ShareGPT: [{"conversations": [{"from": "human", "value"}, {"from": "gpt", "value"}]}]:
//                the first human turn is the prompt, the reply's length the output length
// With a file, requests are taken in file order (ShareGPT: shuffled by the seed) up to num_prompts,
// cycling when the file has fewer; fixed_output_len overrides the file's lengths.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "engine/tokenizer/tokenizer.h"

namespace llmctl::bench {

struct BenchRequest {
  std::string prompt;            // text (what a server gets)
  std::vector<int> prompt_ids;   // tokens (what the engine gets); empty without a tokenizer
  int input_len = 0;             // prompt tokens (estimated without a tokenizer)
  int output_len = 0;            // max_tokens
};

struct DatasetOptions {
  std::string dataset = "random";  // random | path to .jsonl | path to ShareGPT .json
  int num_prompts = 200;
  int input_len = 512, output_len = 128;
  double range_ratio = 0;          // random: spread of lengths, [0, 1)
  bool fixed_output_len = false;   // files: output_len replaces their lengths
  uint64_t seed = 0;
  std::string words_file;          // random without a tokenizer: WikiText (default: shared/data)
};

// tok may be null (serve without --tokenizer). Throws InputError.
std::vector<BenchRequest> make_requests(const DatasetOptions& opts, const Tokenizer* tok);

// A random length around `len` (see range_ratio above), at least 1.
int draw_length(int len, double range_ratio, uint64_t& state);

// Where the shared test data lives: $LLMCTL_DATA_DIR, else <source>/../shared/data.
std::string default_data_dir();

}  // namespace llmctl::bench
