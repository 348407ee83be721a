#include "engine/model/quantized_entry.h"

#include <stdexcept>
#include <utility>

#include "engine/core/error.h"

namespace llmctl {

QuantizedEntry::QuantizedEntry(quant::GroupAffineWeight w) : n_(w.n), k_(w.k), w_(std::move(w)) {}

QuantizedEntry QuantizedEntry::deferred(std::string what, int64_t n, int64_t k, Decoder decode) {
  LLM_CHECK(decode) << "a deferred quantized weight needs a decoder";
  QuantizedEntry e;
  e.n_ = n;
  e.k_ = k;
  e.what_ = std::move(what);
  e.decode_ = std::move(decode);
  return e;
}

const quant::GroupAffineWeight& QuantizedEntry::weight() const {
  if (decode_) {
    quant::GroupAffineWeight w = decode_();
    LLM_CHECK(w.n == n_ && w.k == k_) << what_ << ": decoded to [" << w.n << ", " << w.k << "], announced as ["
                                      << n_ << ", " << k_ << "]";
    try {
      w.validate();
    } catch (const std::invalid_argument& e) {
      throw InputError(what_ + ": " + e.what());
    }
    w_ = std::move(w);
    decode_ = nullptr;
  }
  LLM_CHECK(w_.has_value()) << "a released quantized weight was read (Checkpoint::release_after_upload: a "
                               "checkpoint built for one model was read twice)";
  return *w_;
}

quant::GroupAffineWeight& QuantizedEntry::weight() {
  return const_cast<quant::GroupAffineWeight&>(static_cast<const QuantizedEntry&>(*this).weight());
}

void QuantizedEntry::release() {
  w_.reset();
  decode_ = nullptr;
}

}  // namespace llmctl
