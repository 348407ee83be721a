#include "engine/model/llama/gguf_llama.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <optional>
#include <stdexcept>

#include "engine/core/error.h"
#include "engine/core/mapped_file.h"
#include "engine/core/thread_pool.h"
#include "engine/model/finite_weights.h"
#include "engine/model/check_tensors.h"
#include "engine/model/registry.h"
#include "quant/format/gguf_blocks.h"
#include "quant/format/gguf_group_affine.h"

namespace llmctl {

namespace {

int meta_int(const GgufFile& g, const std::string& key) {
  const GgufValue& v = g.at(key);
  int64_t x;
  try {
    x = v.as_int();
  } catch (const InputError&) {
    LLM_THROW() << g.path() << ": metadata '" << key << "' is not an integer";
  }
  LLM_REQUIRE(x >= 0 && x <= INT32_MAX) << g.path() << ": metadata '" << key << "' = " << x << " is out of range";
  return int(x);
}

int meta_int_or(const GgufFile& g, const std::string& key, int def) { return g.find(key) ? meta_int(g, key) : def; }

float meta_float_or(const GgufFile& g, const std::string& key, float def) {
  const GgufValue* v = g.find(key);
  if (!v) return def;
  try {
    return float(v->as_float());
  } catch (const InputError&) {
    LLM_THROW() << g.path() << ": metadata '" << key << "' is not a number";
  }
}

// Llama 3.1+ GGUFs carry no rope scaling metadata but a rope_freqs.weight tensor of per-frequency
// divisors, computed by llama.cpp's converter from (factor, low_freq_factor, high_freq_factor,
// original_max_position_embeddings). When the tensor is the standard Llama 3 scaling (factor = the
// largest divisor, 1, 4, 8192) it is read as that (convert can then write it as config.json);
// any other (Llama 3.2's own, another original context) is applied as it is, as llama.cpp does.
RopeScaling llama3_from_rope_freqs(const GgufFile& g, const GgufTensorInfo& t, float theta, int head_dim) {
  LLM_REQUIRE(head_dim >= 2 && head_dim <= ConfigLimits::kMaxHeadDim)
      << g.path() << ": head_dim " << head_dim << " is out of range (2.." << ConfigLimits::kMaxHeadDim << ")";
  Tensor f = g.load(t);
  int64_t n = f.numel();
  LLM_REQUIRE(n == head_dim / 2) << g.path() << ": rope_freqs.weight has " << n << " entries, expected "
                                 << head_dim / 2;
  const float* v = f.ptr<float>();
  RopeScaling r;
  r.type = "llama3";
  r.factor = v[n - 1];
  r.low_freq_factor = 1.0f;
  r.high_freq_factor = 4.0f;
  r.original_max_position_embeddings = 8192;
  const double kPi = 3.14159265358979323846;
  double low_wavelen = r.original_max_position_embeddings / r.low_freq_factor;
  double high_wavelen = r.original_max_position_embeddings / r.high_freq_factor;
  for (int64_t i = 0; i < n; ++i) {
    double freq = 1.0 / std::pow(double(theta), double(2 * i) / head_dim);
    double wavelen = 2 * kPi / freq;
    double expect;
    if (wavelen < high_wavelen) {
      expect = 1.0;
    } else if (wavelen > low_wavelen) {
      expect = r.factor;
    } else {
      double smooth =
          (r.original_max_position_embeddings / wavelen - r.low_freq_factor) / (r.high_freq_factor - r.low_freq_factor);
      expect = 1.0 / ((1 - smooth) / r.factor + smooth);
    }
    if (!(std::fabs(expect - v[i]) <= 1e-3 * std::fabs(expect))) {
      RopeScaling as_is;
      as_is.type = "freq_factors";
      as_is.freq_factors.assign(v, v + n);
      return as_is;  // validate() checks each factor is finite and positive
    }
  }
  return r;
}

}  // namespace

ModelConfig gguf_llama_config(const GgufFile& g) {
  const GgufValue* arch_v = g.find("general.architecture");
  LLM_REQUIRE(arch_v && arch_v->is_string()) << g.path() << ": no general.architecture in the GGUF metadata";
  const std::string& arch = arch_v->as_string();
  ModelConfig c;
  const Architecture* family = nullptr;
  try {
    family = &find_gguf_architecture(arch, &g);
  } catch (const InputError& e) {
    throw InputError(g.path() + ": " + e.what());
  }
  c.architecture = family->name;
  c.model_type = family->model_type;
  c.attention_bias = family->attention_bias;  // Qwen2's q/k/v biases: the tensor check finds them
  c.qk_norm = family->qk_norm;
  const std::string a = arch + ".";  // the family's metadata keys: llama.*, qwen2.*, qwen3.*
  c.hidden_size = meta_int(g, a + "embedding_length");
  c.num_layers = meta_int(g, a + "block_count");
  c.num_heads = meta_int(g, a + "attention.head_count");
  LLM_REQUIRE(c.num_heads > 0) << g.path() << ": " << a << "attention.head_count is 0";
  c.num_kv_heads = meta_int_or(g, a + "attention.head_count_kv", c.num_heads);
  c.intermediate_size = meta_int(g, a + "feed_forward_length");
  c.max_position_embeddings = meta_int_or(g, a + "context_length", c.max_position_embeddings);
  c.rope_theta = meta_float_or(g, a + "rope.freq_base", 10000.0f);
  c.rms_norm_eps = meta_float_or(g, a + "attention.layer_norm_rms_epsilon", 1e-5f);
  c.head_dim = meta_int_or(g, a + "attention.key_length",
                           meta_int_or(g, a + "rope.dimension_count", c.hidden_size / c.num_heads));
  // A rope dimension count below the head size: partial rotary (the heads' first dimensions turn).
  if (const int rope_dims = meta_int_or(g, a + "rope.dimension_count", c.head_dim); rope_dims != c.head_dim)
    c.rotary_dim = rope_dims;
  if (g.find(a + "vocab_size")) {
    c.vocab_size = meta_int(g, a + "vocab_size");
  } else {
    const GgufValue* toks = g.find("tokenizer.ggml.tokens");
    LLM_REQUIRE(toks && toks->is_array())
        << g.path() << ": neither " << a << "vocab_size nor tokenizer.ggml.tokens is present";
    c.vocab_size = int(toks->as_array().size());
  }

  // Rope scaling: explicit metadata (linear, yarn), or llama3 encoded as a rope_freqs tensor.
  const GgufValue* st = g.find(a + "rope.scaling.type");
  std::string stype = st && st->is_string() ? st->as_string() : "none";
  if (stype == "linear") {
    c.rope_scaling.type = "linear";
    c.rope_scaling.factor = meta_float_or(g, a + "rope.scaling.factor", 1.0f);
  } else if (stype == "yarn") {
    // As convert_hf_to_gguf.py writes it from transformers' rope_parameters; what it has no key
    // for (truncate, mscale) takes transformers' default. An extrapolation factor or log
    // multiplier is llama.cpp's own variant: refused, not approximated.
    for (const char* k : {"rope.scaling.yarn_ext_factor", "rope.scaling.yarn_log_multiplier"})
      LLM_REQUIRE(!g.find(a + k)) << g.path() << ": yarn rope with " << a << k << " is not supported";
    RopeScaling& r = c.rope_scaling;
    r.type = "yarn";
    r.factor = meta_float_or(g, a + "rope.scaling.factor", 0.0f);
    LLM_REQUIRE(r.factor > 0) << g.path() << ": yarn rope scaling without a positive " << a << "rope.scaling.factor";
    r.original_max_position_embeddings = meta_int_or(g, a + "rope.scaling.original_context_length", 0);
    r.beta_fast = meta_float_or(g, a + "rope.scaling.yarn_beta_fast", 32.0f);
    r.beta_slow = meta_float_or(g, a + "rope.scaling.yarn_beta_slow", 1.0f);
    r.attention_factor = g.find(a + "rope.scaling.yarn_attn_factor")
                             ? meta_float_or(g, a + "rope.scaling.yarn_attn_factor", 1.0f)
                             : (r.factor <= 1 ? 1.0f : float(0.1 * std::log(double(r.factor)) + 1.0));
  } else if (stype != "none") {
    LLM_THROW() << g.path() << ": rope scaling '" << stype << "' is not supported (linear, yarn, llama3)";
  } else if (!g.find(a + "rope.scaling.factor") && g.find_tensor("rope_freqs.weight")) {
    c.rope_scaling = llama3_from_rope_freqs(g, *g.find_tensor("rope_freqs.weight"), c.rope_theta, c.rotary());
  }

  if (g.find("tokenizer.ggml.bos_token_id")) c.bos_token_ids = {meta_int(g, "tokenizer.ggml.bos_token_id")};
  if (g.find("tokenizer.ggml.eos_token_id")) c.eos_token_ids = {meta_int(g, "tokenizer.ggml.eos_token_id")};
  c.tie_word_embeddings = g.find_tensor("output.weight") == nullptr;
  if (family->gguf_config) family->gguf_config(g, c);  // the family's own conventions (Gemma 3)
  c.validate();
  return c;
}

std::string gguf_to_hf_name(const std::string& name, const Architecture* family) {
  static const std::pair<const char*, const char*> top[] = {
      {"token_embd", "model.embed_tokens"}, {"output_norm", "model.norm"}, {"output", "lm_head"}};
  static const std::pair<const char*, const char*> layer[] = {
      {"attn_q_norm", "self_attn.q_norm"},      {"attn_k_norm", "self_attn.k_norm"},
      {"attn_norm", "input_layernorm"},         {"attn_q", "self_attn.q_proj"},
      {"attn_k", "self_attn.k_proj"},           {"attn_v", "self_attn.v_proj"},
      {"attn_output", "self_attn.o_proj"},      {"ffn_norm", "post_attention_layernorm"},
      {"ffn_gate", "mlp.gate_proj"},            {"ffn_up", "mlp.up_proj"},
      {"ffn_down", "mlp.down_proj"}};
  // Split "<stem>.weight" / "<stem>.bias".
  size_t dot = name.rfind('.');
  if (dot == std::string::npos) return "";
  std::string stem = name.substr(0, dot), suffix = name.substr(dot + 1);
  if (suffix != "weight" && suffix != "bias") return "";
  if (stem.starts_with("blk.")) {  // "blk.<N>.<part>"
    size_t dot2 = stem.find('.', 4);
    if (dot2 == std::string::npos) return "";
    std::string index = stem.substr(4, dot2 - 4), part = stem.substr(dot2 + 1);
    if (index.empty() || index.size() > 6 || index.find_first_not_of("0123456789") != std::string::npos) return "";
    if (family && family->gguf_layer_name)
      if (const char* own = family->gguf_layer_name(part)) return "model.layers." + index + "." + own + "." + suffix;
    for (auto& [from, to] : layer)
      if (part == from) return "model.layers." + index + "." + to + "." + suffix;
    return "";
  }
  for (auto& [from, to] : top)
    if (stem == from) return std::string(to) + "." + suffix;
  return "";
}

Tensor gguf_unpermute_qk(const Tensor& t, int n_head) {
  LLM_CHECK(t.rank() >= 1 && n_head > 0) << "unpermute " << t.shape_str();
  int64_t rows = t.dim(0);
  // rows > 0 also guards the row size below (a zero-row tensor would divide by zero).
  LLM_REQUIRE(rows > 0 && rows % (2 * int64_t(n_head)) == 0)
      << "q/k tensor of shape " << t.shape_str() << " does not split into " << n_head << " heads of even size";
  int64_t half = rows / n_head / 2;
  size_t row_bytes = t.nbytes() / size_t(rows);
  Tensor out = Tensor::empty_host(t.dtype, t.shape);
  const auto* src = static_cast<const uint8_t*>(t.data);
  auto* dst = static_cast<uint8_t*>(out.data);
  for (int64_t h = 0; h < n_head; ++h)
    for (int64_t pair = 0; pair < 2; ++pair)
      for (int64_t i = 0; i < half; ++i) {
        int64_t to = (h * 2 + pair) * half + i;      // HF: first halves then second halves of each head
        int64_t from = h * 2 * half + i * 2 + pair;  // llama.cpp: interleaved pairs
        std::memcpy(dst + to * row_bytes, src + from * row_bytes, row_bytes);
      }
  return out;
}

namespace {

// The linear weights (q/k/v/o, gate/up/down, experts, lm_head) that may stay quantized; the
// embedding is a table lookup and stays dense, unless a tied table is kept packed
// (LoadOptions::quantized_embedding). Routers stay dense (small, and their ranking is the routing).
bool is_linear_weight_name(const std::string& hf_name) {
  return hf_name.ends_with("_proj.weight") || hf_name == "lm_head.weight" ||
         (hf_name.find(".block_sparse_moe.experts.") != std::string::npos);  // Mixtral's w1 / w2 / w3
}

// "blk.<N>.<part>.weight" -> (N, part); N < 0 when the name is not a layer tensor's.
std::pair<int, std::string> layer_part(const std::string& name) {
  if (!name.starts_with("blk.") || !name.ends_with(".weight")) return {-1, ""};
  const size_t dot = name.find('.', 4);
  if (dot == std::string::npos) return {-1, ""};
  const std::string index = name.substr(4, dot - 4);
  if (index.empty() || index.size() > 6 || index.find_first_not_of("0123456789") != std::string::npos) return {-1, ""};
  return {std::stoi(index), name.substr(dot + 1, name.size() - dot - 1 - 7)};
}

// gguf_unpermute_qk's row order as ranges of one row: row `to` of the result is row from[to].
std::vector<quant::IndexRange> unpermute_qk_rows(int64_t rows, int n_head) {
  LLM_REQUIRE(rows > 0 && rows % (2 * int64_t(n_head)) == 0)
      << "q/k tensor of " << rows << " rows does not split into " << n_head << " heads of even size";
  const int64_t half = rows / n_head / 2;
  std::vector<quant::IndexRange> from(static_cast<size_t>(rows));
  for (int64_t h = 0; h < n_head; ++h)
    for (int64_t pair = 0; pair < 2; ++pair)
      for (int64_t i = 0; i < half; ++i) from[size_t((h * 2 + pair) * half + i)] = {h * 2 * half + i * 2 + pair, 1};
  return from;
}

// Blocks from which a tensor's decoding is spread over the global pool's threads (smaller ones:
// the hand-off would cost about what it saves).
constexpr int64_t kParallelDecodeBlocks = 1024;

// A 2-D tensor of a block type with a group-affine form: one that can be kept quantized.
bool has_group_affine_form(const GgufTensorInfo& info) {
  return info.ne.size() == 2 && quant::gguf_group_affine_supported(uint32_t(info.type));
}

// A 2-D tensor of a block type with a group-affine form (has_group_affine_form), kept
// quantized and decoded when the loader first reads it; q/k rows are put in HF order after decoding
// (unpermute_heads > 0: the heads the rows split into). Its shape and byte count are checked now; the
// file's blocks are read, and then released from resident memory, only by the decoding.
QuantizedEntry deferred_group_affine(const std::shared_ptr<const GgufFile>& g, const GgufTensorInfo& info,
                                     int unpermute_heads) {
  const std::vector<int64_t> shape = info.shape();
  const std::string what = g->path() + ": tensor '" + info.name + "'";
  try {
    quant::check_gguf_group_affine_shape(uint32_t(info.type), info.nbytes, shape[0], shape[1]);
  } catch (const std::invalid_argument& e) {
    LLM_THROW() << what << ": " << e.what();
  }
  // `rows` x `cols` of the tensor's blocks at `blocks` (`bytes` long), in group-affine form.
  // The blocks are converted on the pool's threads (each block on its own: the same values however
  // they are split).
  auto decode_blocks = [info, what](const uint8_t* blocks, size_t bytes, int64_t rows, int64_t cols) {
    const auto type = uint32_t(info.type);
    quant::GroupAffineWeight w;
    int64_t count = 0;
    try {
      w = quant::gguf_group_affine_shell(type, bytes, rows, cols);
      count = quant::gguf_group_affine_blocks(type, rows, cols);
    } catch (const std::invalid_argument& e) {
      LLM_THROW() << what << ": " << e.what();
    }
    auto convert = [&](int64_t b0, int64_t b1) { quant::gguf_group_affine_convert(type, blocks, b0, b1, w); };
    if (count >= kParallelDecodeBlocks)
      ThreadPool::global().parallel_for(count, convert);  // in-range chunks: convert cannot throw
    else
      convert(0, count);
    return w;
  };
  // Rows [first, first + count) of the file's tensor (before any unpermutation).
  auto decode_run = [g, info, shape, decode_blocks](int64_t first, int64_t count) {
    const size_t row_bytes = info.nbytes / size_t(shape[0]);  // whole blocks per row: shape checked above
    return decode_blocks(static_cast<const uint8_t*>(info.data) + first * row_bytes, size_t(count) * row_bytes, count,
                         shape[1]);
  };
  auto decode = [info, shape, unpermute_heads, decode_run] {
    quant::GroupAffineWeight w = decode_run(0, shape[0]);
    release_mapped_pages(info.data, info.nbytes);  // decoded into its own memory
    if (unpermute_heads > 0) w = quant::select_rows(w, unpermute_qk_rows(w.n, unpermute_heads));
    return w;
  };
  // A tensor-parallel rank's rows alone: the smallest run of file rows that holds them (a rank's
  // heads are contiguous, and the q/k permutation stays inside each head), decoded, then the wanted
  // rows taken from it in order (a whole-tensor decode would be the rank's largest transient).
  auto decode_rows = [info, shape, unpermute_heads, decode_run](const std::vector<quant::IndexRange>& ranges) {
    const std::vector<quant::IndexRange> from =
        unpermute_heads > 0 ? unpermute_qk_rows(shape[0], unpermute_heads) : std::vector<quant::IndexRange>{};
    std::vector<quant::IndexRange> rows;  // file rows, one each, in the order wanted
    int64_t lo = shape[0], hi = 0;
    for (const auto& [begin, length] : ranges)
      for (int64_t r = begin; r < begin + length; ++r) {
        const int64_t src = from.empty() ? r : from[size_t(r)].first;
        rows.emplace_back(src, 1);
        lo = std::min(lo, src);
        hi = std::max(hi, src + 1);
      }
    LLM_CHECK(!rows.empty()) << "no rows asked of a quantized tensor";
    const quant::GroupAffineWeight cover = decode_run(lo, hi - lo);
    release_mapped_pages(info.data, info.nbytes);
    for (quant::IndexRange& r : rows) r.first -= lo;
    return quant::select_rows(cover, rows);
  };
  // A row-parallel rank's input columns alone: the whole blocks that hold them, cut from every row
  // and decoded, then the columns taken from those. q and k (unpermute_heads > 0) are split by rows.
  QuantizedEntry::ColumnsDecoder decode_columns;
  if (unpermute_heads == 0)
    decode_columns = [info, shape, what, decode_blocks](const std::vector<quant::IndexRange>& ranges) {
      quant::GgmlBlockLayout block;
      LLM_CHECK(quant::ggml_block_layout(uint32_t(info.type), &block)) << what << ": unknown block type";
      const quant::ColumnCover cover = quant::cover_columns(ranges, block.block_size, shape[1]);
      const size_t row_bytes = info.nbytes / size_t(shape[0]);
      int64_t cols = 0;
      for (const auto& r : cover.cover) cols += r.second;
      std::vector<uint8_t> blocks;  // [rows, cols / block_size] blocks
      blocks.reserve(size_t(shape[0] * (cols / block.block_size)) * block.type_size);
      const auto* data = static_cast<const uint8_t*>(info.data);
      for (int64_t r = 0; r < shape[0]; ++r)
        for (const auto& [begin, length] : cover.cover) {
          const uint8_t* from = data + size_t(r) * row_bytes + size_t(begin / block.block_size) * block.type_size;
          blocks.insert(blocks.end(), from, from + size_t(length / block.block_size) * block.type_size);
        }
      release_mapped_pages(info.data, info.nbytes);
      return quant::select_columns(decode_blocks(blocks.data(), blocks.size(), shape[0], cols), cover.within);
    };
  return QuantizedEntry::deferred(what, shape[0], shape[1], std::move(decode), std::move(decode_rows),
                                  std::move(decode_columns));
}

}  // namespace

Checkpoint load_gguf_checkpoint(std::shared_ptr<const GgufFile> g, const LoadOptions& opts) {
  Checkpoint ck;
  ck.config = gguf_llama_config(*g);
  ck.source_path = g->path();
  ck.source_format = "gguf";
  const Architecture& family = find_architecture(ck.config.architecture);
  // HF shapes by name: llama.cpp drops a weight's leading 1-sized dimensions (Qwen2-MoE's
  // shared_expert_gate [1, H] is stored as [H]); such a tensor takes its HF shape back.
  std::map<std::string, std::vector<int64_t>> hf_shape;
  for (WeightSpec& s : family.tensor_specs(ck.config)) hf_shape.emplace(std::move(s.name), std::move(s.shape));
  const bool permuted = family.gguf_qk_permuted;  // llama.cpp's q/k row order
  std::map<std::string, int64_t> dense_quantized;  // GGUF type label -> linears dequantized though kept
  // One tensor of the file (or one expert's slice of a stacked one) under its HF name.
  auto add = [&](const GgufTensorInfo& info, std::string name) {
    const bool block_type = quant::ggml_can_dequantize(uint32_t(info.type));
    const bool group_affine = has_group_affine_form(info);
    if (opts.quantized_embedding && name == "model.embed_tokens.weight" && group_affine) {
      // tied: the lm_head's copy only; else the table alone, packed (never an f32 copy: 2.1 GB for
      // Llama 3 8B's 128256 x 4096, a 0.28 GB Q4_K table in its file)
      ck.quantized.emplace(ck.config.tie_word_embeddings ? "lm_head.weight" : std::move(name),
                           deferred_group_affine(g, info, 0));
      return;
    }
    if (opts.keep_quantized && block_type && is_linear_weight_name(name) && info.ne.size() == 2) {
      if (group_affine) {
        const int heads = !permuted                         ? 0
                          : name.ends_with("q_proj.weight") ? ck.config.num_heads
                          : name.ends_with("k_proj.weight") ? ck.config.num_kv_heads
                                                            : 0;
        ck.quantized.emplace(std::move(name), deferred_group_affine(g, info, heads));
        return;
      }
      ++dense_quantized[quant::ggml_type_label(uint32_t(info.type))];
    }
    Tensor t = g->load(info, /*keep_float=*/true);
    if (t.data != info.data) release_mapped_pages(info.data, info.nbytes);  // dequantized into a copy
    if (family.gguf_norm_shift != 0.0f && name.ends_with("norm.weight")) {  // back to HF's form, in f32
      const Tensor stored = t;
      t = Tensor::empty_host(DType::F32, stored.shape);
      const Tensor f = stored.dtype == DType::F32 ? stored : convert_host(stored, DType::F32);
      for (int64_t i = 0; i < t.numel(); ++i) t.ptr<float>()[i] = f.ptr<float>()[i] - family.gguf_norm_shift;
    }
    if (opts.dtype && *opts.dtype != t.dtype) t = convert_host(t, *opts.dtype);
    if (auto it = hf_shape.find(name); it != hf_shape.end() && it->second.size() == t.shape.size() + 1 &&
                                        it->second.front() == 1 &&
                                        std::equal(t.shape.begin(), t.shape.end(), it->second.begin() + 1))
      t.shape = it->second;
    ck.tensors.emplace(std::move(name), std::move(t));
  };
  for (const GgufTensorInfo& info : g->tensors()) {
    if (info.name == "rope_freqs.weight") continue;  // folded into config.rope_scaling
    if ((info.name == "rope_factors_long.weight" || info.name == "rope_factors_short.weight") &&
        ck.config.rope_scaling.type == "longrope")
      continue;  // read by the family's config hook (Phi-3) into config.rope_scaling
    if (family.gguf_stacked_name && info.ne.size() == 3) {  // experts stacked [E, rows, cols]: one tensor each
      const auto [layer, part] = layer_part(info.name);
      const int64_t E = info.ne[2];
      LLM_REQUIRE(layer >= 0 && E == ck.config.num_experts && E > 0 && info.nbytes % size_t(E) == 0 &&
                  !family.gguf_stacked_name(part, layer, 0).empty())
          << g->path() << ": unexpected 3-D tensor '" << info.name << "' in a " << ck.config.architecture
          << " GGUF file (" << ck.config.num_experts << " experts)";
      for (int64_t e = 0; e < E; ++e) {
        GgufTensorInfo one = info;
        one.name = info.name + "[" + std::to_string(e) + "]";
        one.ne = {info.ne[0], info.ne[1]};
        one.nbytes = info.nbytes / size_t(E);
        one.data = info.data + size_t(e) * one.nbytes;
        add(one, family.gguf_stacked_name(part, layer, int(e)));
      }
      continue;
    }
    std::string name = gguf_to_hf_name(info.name, &family);
    LLM_REQUIRE(!name.empty()) << g->path() << ": unexpected tensor '" << info.name << "' in a "
                               << ck.config.architecture << " GGUF file";
    add(info, std::move(name));
  }
  // Shapes against the config before the q/k rows are reordered by head.
  ck.notes = check_checkpoint_tensors(ck);
  refuse_non_finite_weights(ck);
  // A tied output projection over a quantized embedding table: the lm_head also kept quantized (a
  // second, packed copy of the table), so decoding does not read the f32 table every token.
  if (opts.keep_quantized && ck.config.tie_word_embeddings && !ck.quantized.count("lm_head.weight"))
    if (const GgufTensorInfo* e = g->find_tensor("token_embd.weight"); e && has_group_affine_form(*e))
      ck.quantized.emplace("lm_head.weight", deferred_group_affine(g, *e, 0));
  if (!dense_quantized.empty()) {
    std::string types;
    for (const auto& [type, count] : dense_quantized)
      types += (types.empty() ? "" : ", ") + std::to_string(count) + " " + type;
    ck.notes.push_back(g->path() + ": linear weights of types with no group-affine form the quantized kernels run (" +
                       types + ") are loaded dense (dequantized to f32)");
  }
  if (permuted)  // Qwen's q/k rows are stored in HF order
    for (auto& [name, t] : ck.tensors) {
      const bool q = name.ends_with("q_proj.weight") || name.ends_with("q_proj.bias");
      const bool k = name.ends_with("k_proj.weight") || name.ends_with("k_proj.bias");
      if (q || k) t = gguf_unpermute_qk(t, q ? ck.config.num_heads : ck.config.num_kv_heads);
    }
  const DType emb = ck.has("model.embed_tokens.weight") ? ck.get("model.embed_tokens.weight").dtype : DType::F32;
  ck.config.torch_dtype = emb == DType::F16 ? "float16" : emb == DType::BF16 ? "bfloat16" : "float32";
  ck.gguf = std::move(g);
  return ck;
}

}  // namespace llmctl
