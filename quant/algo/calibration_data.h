// Calibration samples for GPTQ / AWQ / KV scales: windows of seq_len tokens drawn (seeded) from
// local text or JSONL files. Never a download: the files are the user's.
//
// Each file is one token stream: a .jsonl/.json-lines file contributes the "text" field of each
// line (lines joined by a blank line), any other file its whole text. Window starts are drawn
// uniformly over all streams' valid starts with a seeded mt19937_64, as GPTQ's reference draws
// random windows of a corpus; the same files, sizes and seed give the same samples.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "engine/tokenizer/tokenizer.h"

namespace llmctl::quant {

// Calibration tokens (samples x seq_len) at most: llm-compressor's usual batch, 512 x 2048.
constexpr int64_t kMaxCalibrationTokens = int64_t(1) << 20;

struct CalibrationOptions {
  std::vector<std::string> files;
  int samples = 128;
  int seq_len = 512;
  uint64_t seed = 0;
};

// samples x seq_len token ids. Throws InputError: no files (naming the flag), an unreadable or
// empty file, a JSONL line without a string "text", or streams all shorter than seq_len.
std::vector<std::vector<int32_t>> draw_calibration_samples(const CalibrationOptions& o, const Tokenizer& tok);

}  // namespace llmctl::quant
