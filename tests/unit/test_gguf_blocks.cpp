// GGML block dequantization vs the Python gguf package: tests/unit/data/gguf_blocks_ref.gguf holds
// quantized tensors and gguf.quants.dequantize's output (made by make_gguf_blocks_ref.py).
#include <doctest/doctest.h>

#include <cstring>
#include <initializer_list>
#include <string>

#include "engine/model/gguf.h"
#include "quant/format/gguf_blocks.h"
#include "source_dir.h"

using namespace llmctl;

TEST_CASE("gguf blocks: layout table") {
  quant::GgmlBlockLayout l;
  REQUIRE(quant::ggml_block_layout(2, &l));
  CHECK(l.block_size == 32);
  CHECK(l.type_size == 18);
  REQUIRE(quant::ggml_block_layout(14, &l));
  CHECK(l.block_size == 256);
  CHECK(l.type_size == 210);
  CHECK_FALSE(quant::ggml_block_layout(4, &l));  // Q4_2 was removed from GGML
  CHECK(std::string(quant::ggml_type_label(12)) == "Q4_K");
  CHECK_FALSE(quant::ggml_can_dequantize(0));
  float out[32];
  CHECK_FALSE(quant::dequantize_row(2, nullptr, out, 31));  // not a whole block
}

namespace {

// Each "<TYPE>.q" of a reference file loads (dequantized by llmctl) to its "<TYPE>.ref" bit for bit.
void check_against_reference(const std::string& file, std::initializer_list<const char*> types) {
  auto g = GgufFile::open(std::string(llmctl::test::source_dir()) + "/tests/unit/data/" + file);
  for (const std::string name : types) {
    CAPTURE(name);
    const GgufTensorInfo* q = g->find_tensor(std::string(name) + ".q");
    const GgufTensorInfo* ref = g->find_tensor(std::string(name) + ".ref");
    REQUIRE(q);
    REQUIRE(ref);
    CHECK(std::string(ggml_type_name(q->type)) == name);
    Tensor a = g->load(*q);
    Tensor b = g->load(*ref);
    REQUIRE(a.shape == b.shape);
    REQUIRE(a.shape == std::vector<int64_t>{3, 512});
    // Bitwise comparison: exactness, not closeness.
    CHECK(std::memcmp(a.data, b.data, a.nbytes()) == 0);
    int64_t mismatches = 0;
    for (int64_t i = 0; i < a.numel(); ++i) mismatches += a.ptr<float>()[i] != b.ptr<float>()[i];
    CHECK(mismatches == 0);
  }
}

}  // namespace

TEST_CASE("gguf blocks: bit-exact with gguf.quants.dequantize") {
  check_against_reference("gguf_blocks_ref.gguf", {"Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q2_K", "Q3_K", "Q4_K",
                                                   "Q5_K", "Q6_K", "IQ4_NL", "IQ4_XS", "MXFP4"});
}

// The IQ grids (generated from the gguf package's quants.py) and the ternary formats: random blocks,
// every grid index and sign pattern (make_gguf_code_blocks_ref.py).
TEST_CASE("gguf blocks: IQ grid and ternary formats bit-exact with gguf.quants.dequantize") {
  check_against_reference("gguf_code_blocks_ref.gguf",
                          {"IQ2_XXS", "IQ2_XS", "IQ2_S", "IQ3_XXS", "IQ3_S", "IQ1_S", "IQ1_M", "TQ1_0", "TQ2_0"});
}
