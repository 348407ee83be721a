// QuantizedEntry's states (deferred -> decoded -> released) and the checks a deferred decoder's
// result goes through.
#include <doctest/doctest.h>

#include <algorithm>
#include <functional>
#include <stdexcept>
#include <string>

#include "engine/core/error.h"
#include "engine/model/quantized_entry.h"

namespace llmctl {
namespace {

quant::GroupAffineWeight small_weight(int64_t n, int64_t k, uint8_t code) {
  quant::GroupAffineWeight w;
  w.bits = 4;
  w.n = n;
  w.k = k;
  w.group = int(k);
  w.codes.assign(size_t(n * k), code);
  w.scale.assign(size_t(n), 0.5f);
  w.offset.assign(size_t(n), -1.0f);
  return w;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("a deferred quantized entry decodes once, on first read, and is refused once released") {
  int calls = 0;
  QuantizedEntry e = QuantizedEntry::deferred("file.gguf: tensor 'blk.0.attn_q.weight'", 4, 32, [&] {
    ++calls;
    return small_weight(4, 32, 7);
  });
  CHECK(e.is_deferred());
  CHECK(!e.released());
  CHECK(e.n() == 4);
  CHECK(e.k() == 32);
  CHECK(calls == 0);
  const QuantizedEntry& c = e;
  CHECK(c.weight().codes.at(5) == 7);
  CHECK(c.weight().codes.size() == 4 * 32);
  CHECK(calls == 1);
  CHECK(!e.is_deferred());
  e.release();
  CHECK(e.released());
  CHECK(error_of([&] { (void)c.weight(); }).find("released") != std::string::npos);

  QuantizedEntry never = QuantizedEntry::deferred("x", 4, 32, [&] {
    ++calls;
    return small_weight(4, 32, 1);
  });
  never.release();  // a weight this rank never loads is never decoded
  CHECK(never.released());
  CHECK(calls == 1);
}

TEST_CASE("a deferred decoder's result is checked against its announced shape and validated") {
  QuantizedEntry wrong_shape =
      QuantizedEntry::deferred("m.gguf: tensor 'a'", 4, 64, [] { return small_weight(4, 32, 1); });
  const std::string shape_error = error_of([&] { (void)wrong_shape.weight(); });
  CHECK(shape_error.find("m.gguf: tensor 'a'") != std::string::npos);
  CHECK(shape_error.find("[4, 32]") != std::string::npos);

  QuantizedEntry bad_code =
      QuantizedEntry::deferred("m.gguf: tensor 'b'", 2, 32, [] { return small_weight(2, 32, 16); });
  std::string code_error;
  try {
    (void)bad_code.weight();
  } catch (const InputError& e) {
    code_error = e.what();
  }
  CHECK(code_error.find("m.gguf: tensor 'b'") != std::string::npos);
  CHECK(bad_code.is_deferred());  // not decoded: a later read fails the same way

  QuantizedEntry eager = small_weight(3, 32, 2);  // made from a weight: decoded
  CHECK(!eager.is_deferred());
  CHECK(eager.n() == 3);
  CHECK(eager.weight().codes.at(0) == 2);
}


TEST_CASE("rows(): a row decoder serves a rank's rows without decoding the whole weight") {
  // Row r's codes are r: which rows came back is visible in the codes.
  auto numbered = [](int64_t n) {
    quant::GroupAffineWeight w = small_weight(n, 32, 0);
    for (int64_t r = 0; r < n; ++r) std::fill_n(w.codes.begin() + r * 32, 32, uint8_t(r));
    return w;
  };
  int whole = 0, partial = 0;
  QuantizedEntry e = QuantizedEntry::deferred(
      "m.gguf: tensor 'output.weight'", 12, 32,
      [&] {
        ++whole;
        return numbered(12);
      },
      [&](const std::vector<quant::IndexRange>& ranges) {
        ++partial;
        return quant::select_rows(numbered(12), ranges);
      });
  const std::vector<quant::IndexRange> ranges = {{8, 3}, {2, 1}};
  const quant::GroupAffineWeight r = e.rows(ranges);
  CHECK(r.n == 4);
  CHECK(r.codes[0] == 8);
  CHECK(r.codes[3 * 32] == 2);
  CHECK(partial == 1);
  CHECK(whole == 0);
  CHECK(e.is_deferred());
  CHECK(error_of([&] { (void)e.rows({{10, 3}}); }).find("rows [10, 13) of 12") != std::string::npos);
  CHECK(e.weight().codes[11 * 32] == 11);  // a full read still decodes the whole weight
  CHECK(whole == 1);
  CHECK(e.rows(ranges).codes == r.codes);  // decoded now: selected from the weight
  CHECK(partial == 1);

  // Without a row decoder, rows() decodes the whole weight (once) and selects.
  int calls = 0;
  QuantizedEntry plain = QuantizedEntry::deferred("x", 12, 32, [&] {
    ++calls;
    return numbered(12);
  });
  CHECK(plain.rows(ranges).codes == r.codes);
  CHECK(!plain.is_deferred());
  CHECK(calls == 1);

  // The row decoder's result is checked like the decoder's.
  QuantizedEntry short_rows = QuantizedEntry::deferred(
      "m.gguf: tensor 'a'", 12, 32, [&] { return numbered(12); },
      [&](const std::vector<quant::IndexRange>&) { return numbered(2); });
  CHECK(error_of([&] { (void)short_rows.rows(ranges); }).find("announced as [4, 32]") != std::string::npos);
  short_rows.release();
  CHECK(error_of([&] { (void)short_rows.rows(ranges); }).find("released") != std::string::npos);
}


TEST_CASE("columns(): a column decoder serves a rank's input columns without decoding the whole weight") {
  // Column c's codes are c % 16: which columns came back is visible in the codes.
  auto numbered = [] {
    quant::GroupAffineWeight w = small_weight(3, 64, 0);
    for (int64_t i = 0; i < 3 * 64; ++i) w.codes[size_t(i)] = uint8_t(i % 64 % 16);
    return w;
  };
  int whole = 0, partial = 0;
  QuantizedEntry e = QuantizedEntry::deferred(
      "m.gguf: tensor 'blk.0.ffn_down.weight'", 3, 64,
      [&] {
        ++whole;
        return numbered();
      },
      {},
      [&](const std::vector<quant::IndexRange>& ranges) {
        ++partial;
        return quant::select_columns(numbered(), ranges);
      });
  const std::vector<quant::IndexRange> ranges = {{36, 4}, {3, 1}};
  const quant::GroupAffineWeight c = e.columns(ranges);
  CHECK(c.k == 5);
  CHECK(c.codes == quant::Codes{4, 5, 6, 7, 3, 4, 5, 6, 7, 3, 4, 5, 6, 7, 3});
  CHECK(partial == 1);
  CHECK(whole == 0);
  CHECK(e.is_deferred());
  CHECK(error_of([&] { (void)e.columns({{60, 5}}); }).find("columns [60, 65) of 64") != std::string::npos);
  CHECK(e.rows({{1, 1}}).codes.size() == 64);  // no row decoder: rows() decodes the whole weight
  CHECK(whole == 1);
  CHECK(e.columns(ranges).codes == c.codes);  // decoded now: selected from the weight
  CHECK(partial == 1);

  QuantizedEntry wrong = QuantizedEntry::deferred(
      "m.gguf: tensor 'a'", 3, 64, [&] { return numbered(); }, {},
      [&](const std::vector<quant::IndexRange>&) { return numbered(); });
  CHECK(error_of([&] { (void)wrong.columns(ranges); }).find("announced as [3, 5]") != std::string::npos);
}

}  // namespace llmctl
