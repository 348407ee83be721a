// safetensors: round trip, sharded directories, malformed headers (each an InputError naming the
// problem), and a fixed-seed mutation fuzz loop.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>
#include <random>
#include <string>

#include "engine/core/error.h"
#include "engine/model/safetensors.h"
#include "format_test_util.h"

using namespace llmctl;
using namespace llmctl::test;

namespace {

Tensor iota(DType dt, std::vector<int64_t> shape, float start) {
  if (dt == DType::I32) {
    Tensor t = Tensor::empty_host(dt, shape);
    for (int64_t i = 0; i < t.numel(); ++i) t.ptr<int32_t>()[i] = int32_t(start) + int32_t(i) * 3;
    return t;
  }
  Tensor f = Tensor::empty_host(DType::F32, shape);
  for (int64_t i = 0; i < f.numel(); ++i) f.ptr<float>()[i] = start + 0.25f * float(i);
  return convert_host(f, dt);
}

// A file from a header text and data bytes (header length computed, no padding).
Bytes st_file(const std::string& header, const Bytes& data) {
  Bytes b(8 + header.size() + data.size());
  uint64_t n = header.size();
  std::memcpy(b.data(), &n, 8);
  std::memcpy(b.data() + 8, header.data(), header.size());
  if (!data.empty()) std::memcpy(b.data() + 8 + n, data.data(), data.size());
  return b;
}

std::string open_error(const ScratchDir& dir, const Bytes& b, const std::string& name = "x.safetensors") {
  write_bytes(dir.file(name), b);
  try {
    auto f = SafetensorsFile::open(dir.file(name));
    double sum = 0;  // touch every byte the views claim
    for (const auto& [n, t] : f->tensors())
      for (size_t i = 0; i < t.nbytes(); ++i) sum += static_cast<const uint8_t*>(t.data)[i];
    (void)sum;
    return "";
  } catch (const InputError& e) {
    return e.what();
  }
}

}  // namespace

TEST_CASE("safetensors: write then read round trip") {
  ScratchDir dir("st_roundtrip");
  Tensor i64 = Tensor::empty_host(DType::I64, {3});
  for (int i = 0; i < 3; ++i) i64.ptr<int64_t>()[i] = int64_t(1) << (40 + i);
  Tensor u8 = Tensor::empty_host(DType::U8, {5});
  for (int i = 0; i < 5; ++i) u8.ptr<uint8_t>()[i] = uint8_t(250 + i);
  std::vector<std::pair<std::string, Tensor>> in = {
      {"z.weight", iota(DType::F32, {2, 3}, 1.0f)},
      {"a.weight", iota(DType::BF16, {4}, -1.0f)},
      {"m.f16", iota(DType::F16, {3, 1, 2}, 0.5f)},
      {"ids", i64},
      {"bytes", u8},  // 5 bytes: the following tensor starts unaligned
      {"after", iota(DType::I32, {2}, 0.0f)},
      {"scalar", iota(DType::F32, {}, 7.0f)},
      {"empty", Tensor::empty_host(DType::F32, {0, 4})},
  };
  write_safetensors(dir.file("m.safetensors"), in, {{"format", "pt"}, {"note", "llmctl test"}});

  Bytes raw = read_bytes(dir.file("m.safetensors"));
  uint64_t n;
  std::memcpy(&n, raw.data(), 8);
  CHECK(n % 8 == 0);  // padded like the reference implementation
  CHECK(raw[8 + n - 1] != 0);

  auto f = SafetensorsFile::open(dir.file("m.safetensors"));
  CHECK(f->metadata().at("format") == "pt");
  CHECK(f->metadata().at("note") == "llmctl test");
  REQUIRE(f->tensors().size() == in.size());
  for (const auto& [name, t] : in) {
    CAPTURE(name);
    const Tensor& r = f->get(name);
    CHECK(r.dtype == t.dtype);
    CHECK(r.shape == t.shape);
    REQUIRE(r.nbytes() == t.nbytes());
    CHECK(std::memcmp(r.data, t.data, t.nbytes()) == 0);
    CHECK(reinterpret_cast<uintptr_t>(r.data) % dtype_size(r.dtype) == 0);
  }
  CHECK_THROWS_WITH_AS(f->get("missing"), doctest::Contains("missing"), InputError);
  // The views keep the mapping alive after the file object is gone.
  Tensor keep = f->get("z.weight");
  f.reset();
  CHECK(keep.ptr<float>()[5] == 1.0f + 0.25f * 5);

  CHECK_THROWS_AS(write_safetensors(dir.file("bad.safetensors"), {{"__metadata__", i64}}), InputError);
  CHECK_THROWS_AS(write_safetensors(dir.file("bad.safetensors"), {{"a", i64}, {"a", i64}}), InputError);
}

TEST_CASE("safetensors: directories, single and sharded") {
  ScratchDir dir("st_dir");
  CHECK_THROWS_WITH_AS(load_safetensors_dir(dir.path.string()), doctest::Contains("no model.safetensors"), InputError);

  write_safetensors(dir.file("model-00001-of-00002.safetensors"), {{"a", iota(DType::F32, {2}, 1)}});
  write_safetensors(dir.file("model-00002-of-00002.safetensors"), {{"b", iota(DType::F16, {3}, 2)}});
  CHECK_THROWS_WITH_AS(load_safetensors_dir(dir.path.string()), doctest::Contains("several"), InputError);

  nlohmann::json index = {
      {"metadata", {{"total_size", 14}}},
      {"weight_map", {{"a", "model-00001-of-00002.safetensors"}, {"b", "model-00002-of-00002.safetensors"}}}};
  write_text(dir.file("model.safetensors.index.json"), index.dump());
  auto all = load_safetensors_dir(dir.path.string());
  REQUIRE(all.size() == 2);
  CHECK(all.at("a").ptr<float>()[1] == 1.25f);
  CHECK(all.at("b").dtype == DType::F16);

  index["weight_map"]["c"] = "model-00002-of-00002.safetensors";
  write_text(dir.file("model.safetensors.index.json"), index.dump());
  CHECK_THROWS_WITH_AS(load_safetensors_dir(dir.path.string()), doctest::Contains("'c'"), InputError);

  index["weight_map"].erase("c");
  index["weight_map"]["a"] = "../elsewhere.safetensors";
  write_text(dir.file("model.safetensors.index.json"), index.dump());
  CHECK_THROWS_WITH_AS(load_safetensors_dir(dir.path.string()), doctest::Contains("plain file name"), InputError);

  index["weight_map"]["a"] = "missing.safetensors";
  write_text(dir.file("model.safetensors.index.json"), index.dump());
  CHECK_THROWS_WITH_AS(load_safetensors_dir(dir.path.string()), doctest::Contains("missing.safetensors"), InputError);

  write_text(dir.file("model.safetensors.index.json"), "{not json");
  CHECK_THROWS_WITH_AS(load_safetensors_dir(dir.path.string()), doctest::Contains("JSON"), InputError);
}

TEST_CASE("safetensors: malformed files raise InputError naming the problem") {
  ScratchDir dir("st_bad");
  const std::string good = R"({"t":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]}})";
  const Bytes data(16, 0x3f);
  REQUIRE(open_error(dir, st_file(good, data)) == "");

  auto expect = [&](const Bytes& b, const std::string& needle) {
    std::string msg = open_error(dir, b);
    CAPTURE(needle);
    CAPTURE(msg);
    CHECK(!msg.empty());
    CHECK(msg.find(needle) != std::string::npos);
    CHECK(msg.find("x.safetensors") != std::string::npos);
  };
  auto header = [&](const std::string& h) { return st_file(h, data); };

  expect(Bytes{1, 2, 3}, "shorter than");
  Bytes b = st_file(good, data);
  uint64_t past = b.size();
  std::memcpy(b.data(), &past, 8);
  expect(b, "past the end");
  uint64_t huge = ~uint64_t(0);
  std::memcpy(b.data(), &huge, 8);
  expect(b, "past the end");
  expect(header(R"({"t":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]})"), "not valid JSON");
  expect(header("[1,2]"), "not a JSON object");
  expect(header(R"({"t":{"dtype":"F8_X","shape":[4],"data_offsets":[0,4]}})"), "F8_X");
  expect(header(R"({"t":{"dtype":"F32","shape":[3],"data_offsets":[0,16]}})"), "needing 12 bytes");
  expect(header(R"({"t":{"dtype":"F32","shape":[8],"data_offsets":[0,32]}})"), "outside the data section");
  expect(header(R"({"t":{"dtype":"F32","shape":[1],"data_offsets":[12,8]}})"), "outside the data section");
  expect(header(R"({"t":{"dtype":"F32","shape":[2],"data_offsets":[18446744073709551615,7]}})"), "outside");
  expect(
      header(
          R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})"),
      "overlap");
  expect(header(R"({"t":{"dtype":"U8","shape":[4294967296,4294967296,4294967296],"data_offsets":[0,0]}})"), "overflow");
  expect(header(R"({"t":{"dtype":"U8","shape":[9223372036854775808,2],"data_offsets":[0,0]}})"), "overflow");
  expect(header(R"({"t":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})"), "non-negative");
  expect(header(R"({"t":{"dtype":"F32","shape":[1.5],"data_offsets":[0,4]}})"), "non-negative");
  expect(header(R"({"t":{"dtype":"F32","shape":[1],"data_offsets":[0]}})"), "data_offsets");
  expect(header(R"({"t":{"shape":[1],"data_offsets":[0,4]}})"), "no dtype");
  expect(header(R"({"t":[1,2]})"), "not an object");
  expect(header(R"({"__metadata__":{"a":1}})"), "__metadata__");
  expect(header("{\"t\xff\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}"), "not valid JSON");
  for (size_t n = 0; n < st_file(good, data).size(); ++n) {
    Bytes full = st_file(good, data);
    CAPTURE(n);
    CHECK(!open_error(dir, Bytes(full.begin(), full.begin() + n)).empty());
  }
}

TEST_CASE("safetensors: random mutations give success or InputError, never a crash") {
  ScratchDir dir("st_fuzz");
  write_safetensors(
      dir.file("v.safetensors"),
      {{"a", iota(DType::F32, {2, 3}, 1)}, {"b", iota(DType::BF16, {5}, 2)}, {"c", iota(DType::I32, {4}, 0)}});
  const Bytes valid = read_bytes(dir.file("v.safetensors"));
  const std::string digits = "0123456789-[]{},\":e.";
  std::mt19937_64 rng(7);
  int ok = 0, rejected = 0;
  for (int iter = 0; iter < 3000; ++iter) {
    Bytes b = valid;
    int kind = int(rng() % 4);
    int edits = 1 + int(rng() % 4);
    for (int e = 0; e < edits; ++e) {
      size_t pos = rng() % b.size();
      if (kind == 0) {
        b[pos] = uint8_t(rng());
      } else if (kind == 1) {  // JSON-ish characters keep the header parseable more often
        b[pos] = uint8_t(digits[rng() % digits.size()]);
      } else if (kind == 2) {
        b[pos % 8] = uint8_t(rng());  // the header length
      } else {
        b.resize(pos);
        break;
      }
    }
    try {
      (open_error(dir, b, "fuzz.safetensors").empty() ? ok : rejected)++;
    } catch (const std::exception& e) {
      FAIL("iteration " << iter << ": unexpected exception: " << e.what());
    }
  }
  MESSAGE("safetensors fuzz: " << ok << " opened, " << rejected << " rejected");
  CHECK(rejected > 0);
}
