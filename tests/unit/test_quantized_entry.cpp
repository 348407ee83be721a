// QuantizedEntry's states (deferred -> decoded -> released) and the checks a deferred decoder's
// result goes through.
#include <doctest/doctest.h>

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

}  // namespace llmctl
