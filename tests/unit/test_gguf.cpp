// GGUF reader: a valid small file, then truncated / corrupted variants (each must raise InputError
// with a message naming the problem), then a fixed-seed mutation fuzz loop.
#include <doctest/doctest.h>

#include <random>
#include <string>

#include "engine/core/error.h"
#include "engine/model/gguf.h"
#include "format_test_util.h"

using namespace llmctl;
using namespace llmctl::test;

namespace {

// A small valid file: metadata of several types and three tensors (F32, F16, Q8_0).
GgufBuilder valid_builder() {
  GgufBuilder g;
  g.kv_str("general.architecture", "llama");
  g.kv_u32("llama.block_count", 2);
  g.kv_f32("llama.rope.freq_base", 10000.0f);
  g.kv_bool("tokenizer.ggml.add_bos_token", true);
  g.kv_str_array("tokenizer.ggml.tokens", {"a", "b", "\xc3\xa9t\xc3\xa9"});
  g.kv_i32_array("tokenizer.ggml.token_type", {1, 1, 3});
  g.tensor("a", 0, {3, 2}, f32_bytes({1, 2, 3, 4, 5, 6}));
  g.tensor("b", 1, {2}, Bytes{0x00, 0x3c, 0x00, 0xc0});  // f16 1.0, -2.0
  Bytes q8(34);
  q8[0] = 0x00, q8[1] = 0x38;  // d = 0.5
  for (int i = 0; i < 32; ++i) q8[2 + i] = uint8_t(int8_t(i - 16));
  g.tensor("c", 8, {32}, q8);
  return g;
}

// Opens bytes as a GGUF file; returns the InputError message ("" when it opened).
std::string open_error(const ScratchDir& dir, const Bytes& b, const std::string& name = "x.gguf") {
  std::string path = dir.file(name);
  write_bytes(path, b);
  try {
    auto g = GgufFile::open(path);
    for (const auto& t : g->tensors()) (void)g->load(t);
    return "";
  } catch (const InputError& e) {
    return e.what();
  }
}

}  // namespace

TEST_CASE("gguf: reads a valid file") {
  ScratchDir dir("gguf_valid");
  write_bytes(dir.file("v.gguf"), valid_builder().build());
  auto g = GgufFile::open(dir.file("v.gguf"));
  CHECK(g->version() == 3);
  CHECK(g->at("general.architecture").as_string() == "llama");
  CHECK(g->at("llama.block_count").as_int() == 2);
  CHECK(g->at("llama.rope.freq_base").as_float() == 10000.0);
  CHECK(g->at("tokenizer.ggml.add_bos_token").as_bool());
  CHECK(g->at("tokenizer.ggml.tokens").as_array().size() == 3);
  CHECK(g->at("tokenizer.ggml.tokens").as_array()[2].as_string() == "\xc3\xa9t\xc3\xa9");
  CHECK(g->at("tokenizer.ggml.token_type").as_array()[2].as_int() == 3);
  CHECK(g->find("nope") == nullptr);
  CHECK_THROWS_WITH_AS(g->at("nope"), doctest::Contains("nope"), InputError);
  CHECK_THROWS_AS(g->at("llama.block_count").as_string(), InputError);
  REQUIRE(g->tensors().size() == 3);

  const GgufTensorInfo* a = g->find_tensor("a");
  REQUIRE(a);
  CHECK(a->shape() == std::vector<int64_t>{2, 3});
  Tensor ta = g->load(*a);
  CHECK(ta.dtype == DType::F32);
  CHECK(ta.ptr<float>()[5] == 6.0f);

  Tensor tb = g->load(*g->find_tensor("b"));
  CHECK(tb.ptr<float>()[0] == 1.0f);
  CHECK(tb.ptr<float>()[1] == -2.0f);
  Tensor tb16 = g->load(*g->find_tensor("b"), /*keep_float=*/true);
  CHECK(tb16.dtype == DType::F16);
  CHECK(tb16.ptr<uint16_t>()[0] == 0x3c00);

  Tensor tc = g->load(*g->find_tensor("c"));
  for (int i = 0; i < 32; ++i) CHECK(tc.ptr<float>()[i] == 0.5f * float(i - 16));

  // Version 2 has the same layout for what we read.
  GgufBuilder v2 = valid_builder();
  v2.version = 2;
  write_bytes(dir.file("v2.gguf"), v2.build());
  CHECK(GgufFile::open(dir.file("v2.gguf"))->version() == 2);
}

TEST_CASE("gguf: honours general.alignment") {
  ScratchDir dir("gguf_align");
  GgufBuilder g;
  g.alignment = 64;
  g.kv_u32("general.alignment", 64);
  g.tensor("a", 0, {4}, f32_bytes({1, 2, 3, 4}));
  g.tensor("b", 0, {4}, f32_bytes({5, 6, 7, 8}));
  CHECK(open_error(dir, g.build()) == "");
  auto f = GgufFile::open(dir.file("x.gguf"));
  CHECK(f->find_tensor("b")->offset == 64);
  CHECK(f->load(*f->find_tensor("b")).ptr<float>()[0] == 5.0f);

  // An alignment below the element size: keep_float views become aligned copies.
  GgufBuilder small;
  small.alignment = 2;
  small.kv_u32("general.alignment", 2);
  small.tensor("h", 1, {1}, Bytes{0x00, 0x3c});
  small.tensor("f", 0, {2}, f32_bytes({3.5f, -1.0f}));
  REQUIRE(open_error(dir, small.build()) == "");
  auto s = GgufFile::open(dir.file("x.gguf"));
  Tensor tf = s->load(*s->find_tensor("f"), /*keep_float=*/true);
  CHECK(reinterpret_cast<uintptr_t>(tf.data) % 4 == 0);
  CHECK(tf.ptr<float>()[0] == 3.5f);
  CHECK(tf.ptr<float>()[1] == -1.0f);

  GgufBuilder bad;
  bad.kv_u32("general.alignment", 24);
  CHECK(open_error(dir, bad.build()).find("alignment") != std::string::npos);
}

TEST_CASE("gguf: malformed files raise InputError naming the problem") {
  ScratchDir dir("gguf_bad");
  const Bytes valid = valid_builder().build();
  REQUIRE(open_error(dir, valid) == "");

  auto expect = [&](const Bytes& b, const std::string& needle) {
    std::string msg = open_error(dir, b);
    CAPTURE(needle);
    CAPTURE(msg);
    CHECK(!msg.empty());
    CHECK(msg.find(needle) != std::string::npos);
    CHECK(msg.find("x.gguf") != std::string::npos);  // names the file
  };

  SUBCASE("empty and bad magic") {
    expect({}, "truncated");
    Bytes b = valid;
    b[0] = 'X';
    expect(b, "bad magic");
  }
  SUBCASE("bad version") {
    for (uint32_t v : {0u, 1u, 4u, 0xffffffffu}) {
      GgufBuilder g = valid_builder();
      g.version = v;
      expect(g.build(), "unsupported GGUF version");
    }
  }
  SUBCASE("every truncation") {
    for (size_t n = 0; n < valid.size(); ++n) {
      CAPTURE(n);
      std::string msg = open_error(dir, Bytes(valid.begin(), valid.begin() + n));
      CHECK(!msg.empty());
    }
  }
  SUBCASE("huge counts") {
    GgufBuilder g = valid_builder();
    g.tensor_count_override = int64_t(1) << 62;
    expect(g.build(), "cannot fit");
    g = valid_builder();
    g.kv_count_override = int64_t(1) << 60;
    expect(g.build(), "cannot fit");
  }
  SUBCASE("huge string and array lengths") {
    GgufBuilder g;
    Bytes raw;
    put<uint64_t>(raw, ~uint64_t(0));
    g.kv_raw("s", 8, raw);
    expect(g.build(), "past the end");
    GgufBuilder h;
    Bytes arr;
    put<uint32_t>(arr, 4);
    put<uint64_t>(arr, uint64_t(1) << 61);
    h.kv_raw("arr", 9, arr);
    expect(h.build(), "cannot fit");
    GgufBuilder k;
    Bytes key;
    put<uint64_t>(key, uint64_t(1) << 40);  // a key length past the end
    key.resize(key.size() + 16);
    k.kv = key;
    k.n_kv = 1;
    expect(k.build(), "past the end");
  }
  SUBCASE("bad UTF-8 in metadata") {
    GgufBuilder g = valid_builder();
    g.kv_str("general.name", "ab\xff\xfe");
    expect(g.build(), "UTF-8");
    GgufBuilder h = valid_builder();
    h.kv_str("k\xc0\xaf", "overlong slash in a key");
    expect(h.build(), "UTF-8");
    GgufBuilder t = valid_builder();
    t.kv_str_array("toks", {"ok", "\xed\xa0\x80"});  // a UTF-16 surrogate
    expect(t.build(), "UTF-8");
  }
  SUBCASE("unknown value types, bad bool, duplicate key, deep nesting") {
    GgufBuilder g;
    g.kv_raw("x", 77, {});
    expect(g.build(), "unknown metadata value type");
    GgufBuilder b;
    b.kv_raw("b", 7, {2});
    expect(b.build(), "bool");
    GgufBuilder d = valid_builder();
    d.kv_u32("llama.block_count", 3);
    expect(d.build(), "duplicate metadata key");
    GgufBuilder n;
    Bytes nest;
    put<uint32_t>(nest, 9);                                                       // value type: array
    for (int i = 0; i < 10; ++i) put<uint32_t>(nest, 9), put<uint64_t>(nest, 1);  // of one array ...
    put<uint32_t>(nest, 4), put<uint64_t>(nest, 0);
    n.kv.clear();
    put_str(n.kv, "deep");
    n.kv.insert(n.kv.end(), nest.begin(), nest.end());
    n.n_kv = 1;
    expect(n.build(), "nested");
  }
  SUBCASE("tensor offsets past the end") {
    GgufBuilder g = valid_builder();
    g.tensor("far", 0, {4}, {}, int64_t(1) << 40);
    expect(g.build(), "past the end of the data section");
    GgufBuilder h = valid_builder();
    h.tensor("wrap", 0, {4}, {}, int64_t(0x7fffffffffffffe0));
    expect(h.build(), "past the end of the data section");
  }
  SUBCASE("misaligned offset") {
    GgufBuilder g = valid_builder();
    g.tensor("odd", 0, {1}, {}, 4);
    expect(g.build(), "alignment");
  }
  SUBCASE("overlapping tensors") {
    GgufBuilder g;
    g.tensor("a", 0, {16}, f32_bytes(std::vector<float>(16, 1.0f)));
    g.tensor("b", 0, {8}, {}, 32);  // inside a's bytes [0, 64)
    expect(g.build(), "overlap");
    GgufBuilder h;
    h.tensor("a", 0, {4}, f32_bytes({1, 2, 3, 4}));
    h.tensor("b", 0, {4}, {}, 0);  // same bytes as a
    expect(h.build(), "overlap");
  }
  SUBCASE("dims: too many, overflow, not whole blocks, unknown type, duplicate name") {
    GgufBuilder g;
    g.tensor("many", 0, {1, 1, 1, 1, 1}, f32_bytes({1}));
    expect(g.build(), "dimensions");
    GgufBuilder o;
    o.tensor("big", 0, {uint64_t(1) << 32, uint64_t(1) << 32, uint64_t(1) << 32}, {}, 0);
    expect(o.build(), "overflow");
    GgufBuilder o2;
    o2.tensor("neg", 0, {~uint64_t(0)}, {}, 0);
    expect(o2.build(), "too large");
    GgufBuilder q;
    q.tensor("q", 2, {33}, Bytes(36));
    expect(q.build(), "block size");
    GgufBuilder u;
    u.tensor("u", 123, {4}, Bytes(16));
    expect(u.build(), "unknown GGML type");
    GgufBuilder d;
    d.tensor("same", 0, {1}, f32_bytes({1}));
    d.tensor("same", 0, {1}, f32_bytes({2}));
    expect(d.build(), "duplicate tensor name");
  }
  SUBCASE("a type the reader knows but cannot dequantize") {
    GgufBuilder g;
    g.tensor("q81", 9, {32}, Bytes(40));  // Q8_1 (an activation format llama.cpp never stores)
    expect(g.build(), "cannot dequantize");
  }
}

TEST_CASE("gguf: random mutations give success or InputError, never a crash") {
  ScratchDir dir("gguf_fuzz");
  const Bytes valid = valid_builder().build();
  std::mt19937_64 rng(20240611);
  int ok = 0, rejected = 0;
  for (int iter = 0; iter < 3000; ++iter) {
    Bytes b = valid;
    int kind = int(rng() % 4);
    int edits = 1 + int(rng() % 6);
    for (int e = 0; e < edits; ++e) {
      size_t pos = rng() % b.size();
      if (kind == 0) {
        b[pos] = uint8_t(rng());
      } else if (kind == 1) {  // flip one bit
        b[pos] ^= uint8_t(1u << (rng() % 8));
      } else if (kind == 2 && pos + 8 <= b.size()) {  // plant an extreme 64-bit value
        const uint64_t extremes[] = {0, 1, 0xff, 0x7fffffffffffffffull, 0xffffffffffffffffull, 1ull << 32, 31, 33};
        uint64_t v = extremes[rng() % 8];
        std::memcpy(&b[pos], &v, 8);
      } else {
        b.resize(pos);
        break;
      }
    }
    try {
      std::string msg = open_error(dir, b, "fuzz.gguf");
      (msg.empty() ? ok : rejected)++;
    } catch (const std::exception& e) {
      FAIL("iteration " << iter << ": unexpected exception: " << e.what());
    }
  }
  MESSAGE("gguf fuzz: " << ok << " opened, " << rejected << " rejected");
  CHECK(rejected > 0);
}
