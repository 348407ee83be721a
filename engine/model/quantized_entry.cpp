#include "engine/model/quantized_entry.h"

#include <stdexcept>
#include <utility>

#include "engine/core/error.h"

namespace llmctl {

QuantizedEntry::QuantizedEntry(quant::GroupAffineWeight w) : n_(w.n), k_(w.k), w_(std::move(w)) {}

QuantizedEntry QuantizedEntry::deferred(std::string what, int64_t n, int64_t k, Decoder decode, RowsDecoder decode_rows,
                                        ColumnsDecoder decode_columns) {
  LLM_CHECK(decode) << "a deferred quantized weight needs a decoder";
  QuantizedEntry e;
  e.n_ = n;
  e.k_ = k;
  e.what_ = std::move(what);
  e.decode_ = std::move(decode);
  e.decode_rows_ = std::move(decode_rows);
  e.decode_columns_ = std::move(decode_columns);
  return e;
}

quant::GroupAffineWeight QuantizedEntry::checked(quant::GroupAffineWeight w, int64_t rows, int64_t cols) const {
  LLM_CHECK(w.n == rows && w.k == cols) << what_ << ": decoded to [" << w.n << ", " << w.k << "], announced as ["
                                        << rows << ", " << cols << "]";
  try {
    w.validate();
  } catch (const std::invalid_argument& e) {
    throw InputError(what_ + ": " + e.what());
  }
  return w;
}

const quant::GroupAffineWeight& QuantizedEntry::weight() const {
  if (decode_) {
    w_ = checked(decode_(), n_, k_);
    decode_ = nullptr;
  }
  LLM_CHECK(w_.has_value()) << "a released quantized weight was read (Checkpoint::release_after_upload: a "
                               "checkpoint built for one model was read twice)";
  return *w_;
}

quant::GroupAffineWeight& QuantizedEntry::weight() {
  return const_cast<quant::GroupAffineWeight&>(static_cast<const QuantizedEntry&>(*this).weight());
}

int64_t QuantizedEntry::total_length(const std::vector<quant::IndexRange>& ranges, int64_t extent,
                                     const char* what) const {
  int64_t total = 0;
  for (const auto& [begin, length] : ranges) {
    LLM_CHECK(begin >= 0 && length >= 0 && begin + length <= extent)
        << what_ << ": " << what << " [" << begin << ", " << begin + length << ") of " << extent;
    total += length;
  }
  return total;
}

quant::GroupAffineWeight QuantizedEntry::rows(const std::vector<quant::IndexRange>& ranges) const {
  const int64_t rows = total_length(ranges, n_, "rows");
  if (decode_ && decode_rows_) return checked(decode_rows_(ranges), rows, k_);
  return quant::select_rows(weight(), ranges);
}

quant::GroupAffineWeight QuantizedEntry::columns(const std::vector<quant::IndexRange>& ranges) const {
  const int64_t cols = total_length(ranges, k_, "columns");
  if (decode_ && decode_columns_) return checked(decode_columns_(ranges), n_, cols);
  return quant::select_columns(weight(), ranges);
}

quant::GroupAffineWeight QuantizedEntry::take() {
  std::optional<quant::GroupAffineWeight> w;
  if (decode_) w = checked(decode_(), n_, k_);
  else if (w_) w = std::move(w_);
  LLM_CHECK(w.has_value()) << "a released quantized weight was taken (Checkpoint::release_after_upload: a "
                              "checkpoint built for one model was read twice)";
  release();
  return std::move(*w);
}

void QuantizedEntry::release() {
  w_.reset();
  decode_ = nullptr;
  decode_rows_ = nullptr;
  decode_columns_ = nullptr;
}

}  // namespace llmctl
