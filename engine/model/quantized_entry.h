// One linear weight a checkpoint keeps quantized (Checkpoint::quantized), in group-affine form.
// States: deferred -> decoded -> released.
//   deferred: a decoder over the file's bytes, run on first use (a GGUF's blocks are decoded when
//             the loader reaches the weight, so a rank decodes only the weights it loads, one at a
//             time, and the model's canonical forms never all live at once);
//   decoded:  the weight in memory (an entry made from a weight starts here);
//   released: freed once a model holds its own copy (Checkpoint::release_after_upload); the name
//             stays, and reading it again is refused.
// Not thread-safe: one loader reads a checkpoint at a time.
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "quant/format/group_affine.h"

namespace llmctl {

class QuantizedEntry {
 public:
  using Decoder = std::function<quant::GroupAffineWeight()>;

  QuantizedEntry() = default;                        // released (no weight)
  QuantizedEntry(quant::GroupAffineWeight w);        // NOLINT(google-explicit-constructor): decoded
  // Decoded on first use by `decode`, whose result must be [n, k] and pass validate(); `what` names
  // the weight in those errors ("<file>: tensor '<name>'").
  static QuantizedEntry deferred(std::string what, int64_t n, int64_t k, Decoder decode);

  int64_t n() const { return n_; }
  int64_t k() const { return k_; }
  bool is_deferred() const { return static_cast<bool>(decode_); }
  bool released() const { return !w_ && !decode_; }

  // The weight, decoded now if deferred (the decoder's errors pass through). InternalError on a
  // released entry.
  const quant::GroupAffineWeight& weight() const;
  quant::GroupAffineWeight& weight();
  // Frees the weight (or drops the decoder): the entry becomes released.
  void release();

 private:
  int64_t n_ = 0, k_ = 0;
  std::string what_;
  mutable std::optional<quant::GroupAffineWeight> w_;
  mutable Decoder decode_;
};

}  // namespace llmctl
