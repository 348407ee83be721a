// One linear weight a checkpoint keeps quantized (Checkpoint::quantized), in group-affine form.
// States: deferred -> decoded -> released.
//   deferred: a decoder over the file's bytes, run on first use (a GGUF's blocks are decoded when
//             the loader reaches the weight, so a rank decodes only the weights it loads, one at a
//             time, and the model's canonical forms never all live at once); with a row decoder,
//             rows() decodes just the rows a tensor-parallel rank takes and the entry stays deferred;
//             a column decoder does the same for columns();
//   decoded:  the weight in memory (an entry made from a weight starts here);
//   released: freed once a model holds its own copy (Checkpoint::release_after_upload); the name
//             stays, and reading it again is refused.
// Not thread-safe: one loader reads a checkpoint at a time.
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "quant/format/group_affine.h"

namespace llmctl {

class QuantizedEntry {
 public:
  using Decoder = std::function<quant::GroupAffineWeight()>;
  // The listed row ranges of the weight, in order: [sum of the lengths, k].
  using RowsDecoder = std::function<quant::GroupAffineWeight(const std::vector<quant::IndexRange>&)>;
  // The listed column ranges, in order: [n, sum of the lengths], as quant::select_columns gives them.
  using ColumnsDecoder = RowsDecoder;

  QuantizedEntry() = default;                        // released (no weight)
  QuantizedEntry(quant::GroupAffineWeight w);        // NOLINT(google-explicit-constructor): decoded
  // Decoded on first use by `decode`, whose result must be [n, k] and pass validate(); `what` names
  // the weight in those errors ("<file>: tensor '<name>'"). `decode_rows` and `decode_columns`, when
  // given, serve rows() and columns().
  static QuantizedEntry deferred(std::string what, int64_t n, int64_t k, Decoder decode, RowsDecoder decode_rows = {},
                                 ColumnsDecoder decode_columns = {});

  int64_t n() const { return n_; }
  int64_t k() const { return k_; }
  bool is_deferred() const { return static_cast<bool>(decode_); }
  bool released() const { return !w_ && !decode_; }

  // The weight, decoded now if deferred (the decoder's errors pass through). InternalError on a
  // released entry.
  const quant::GroupAffineWeight& weight() const;
  quant::GroupAffineWeight& weight();
  // The listed row ranges ([begin, begin + length) each, inside [0, n)) as one weight: while deferred
  // with a row decoder, decoded from those rows alone (checked and validated as weight() is; the
  // entry stays deferred); otherwise selected from weight(). InternalError for a range outside the
  // weight or a released entry.
  quant::GroupAffineWeight rows(const std::vector<quant::IndexRange>& ranges) const;
  // The same for column ranges (inside [0, k)), as quant::select_columns of weight() would give them
  // (a range may cut a quantization group: select_columns says how). Throws std::invalid_argument
  // for an act-order weight (select_columns), which has no column decoder.
  quant::GroupAffineWeight columns(const std::vector<quant::IndexRange>& ranges) const;
  // The weight moved out (decoded now if deferred, checked as weight() is), the entry released: for
  // a loader that would release it next anyway, without the copy weight() would lead to.
  quant::GroupAffineWeight take();
  // Frees the weight (or drops the decoder): the entry becomes released.
  void release();

 private:
  int64_t n_ = 0, k_ = 0;
  std::string what_;
  mutable std::optional<quant::GroupAffineWeight> w_;
  mutable Decoder decode_;
  RowsDecoder decode_rows_;
  ColumnsDecoder decode_columns_;

  // The sum of the ranges' lengths; InternalError, naming the weight, for one outside [0, extent).
  int64_t total_length(const std::vector<quant::IndexRange>& ranges, int64_t extent, const char* what) const;
  // w of [rows, cols], valid (validate()); the errors name the weight.
  quant::GroupAffineWeight checked(quant::GroupAffineWeight w, int64_t rows, int64_t cols) const;
};

}  // namespace llmctl
