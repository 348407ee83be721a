// A model vocabulary larger than its tokenizer (padded embeddings): the ids past the tokenizer are
// never drawn, on the host or in a device sampling job, even with logit_bias +100 on them. And a
// sequence whose draw or detokenization throws fails its own request only: the others in the same
// step go on.
#include <doctest/doctest.h>

#include "engine/backend/backend.h"
#include "engine/core/error.h"
#include "engine/engine.h"
#include "engine/executor/local_executor.h"
#include "engine/model/registry.h"
#include "engine/model/random_checkpoint.h"
#include "engine/sample/device_sampling.h"
#include "engine/sample/sampler.h"
#include "tiny_config.h"

using namespace llmctl;

namespace {

constexpr int kModelVocab = 64, kTokVocab = 48, kPoison = 40;

// Token i is the text "<i>"; token kPoison cannot be decoded (a stand-in for any per-sequence
// failure after the draw).
class NumberTokenizer final : public Tokenizer {
 public:
  explicit NumberTokenizer(int vocab) : vocab_(vocab) { eos_id_ = -1; }
  std::vector<int> encode(std::string_view, bool) const override { return {1, 2, 3}; }
  std::string decode(const std::vector<int>& ids, bool) const override {
    std::string s;
    for (int id : ids) s += token_bytes(id);
    return s;
  }
  std::string token_bytes(int id) const override {
    LLM_REQUIRE(id >= 0 && id < vocab_) << "token id " << id << " is outside the vocabulary";
    LLM_REQUIRE(id != kPoison) << "token " << id << " cannot be decoded";
    return "<" + std::to_string(id) + ">";
  }
  std::string token_text(int id) const override { return token_bytes(id); }
  int token_to_id(std::string_view) const override { return -1; }
  int vocab_size() const override { return vocab_; }
  bool is_special(int) const override { return false; }
  nlohmann::json to_hf_tokenizer_json() const override { return nullptr; }

 private:
  int vocab_;
};

ModelConfig tiny_config() {
  ModelConfig c = test::tiny_llama_config(kModelVocab, 1);
  return c;
}

struct Fixture {
  std::unique_ptr<Backend> be = make_cpu_backend(1);
  Checkpoint ck = random_checkpoint(tiny_config(), 3, 0.3f);
  std::unique_ptr<Model> model = make_model(ck, *be);
  LocalExecutor exec{*model};
  NumberTokenizer tok{kTokVocab};
  EngineConfig cfg() {
    EngineConfig ec;
    ec.num_blocks = 64;
    return ec;
  }
};

}  // namespace

TEST_CASE("padded vocabulary: the host sampler never draws past the tokenizer") {
  std::vector<float> row(kModelVocab, 0.0f);
  row[kModelVocab - 1] = 50.0f;  // the padding row would win every draw
  SamplingParams p;
  p.logit_bias[60] = 100.0f;
  for (float temp : {0.0f, 1.0f}) {
    p.temperature = temp;
    for (uint64_t seed = 0; seed < 200; ++seed) {
      SequenceState st(p, std::vector<int>{1}, seed, 0, std::vector<int>{});
      const int t = sample(row.data(), kTokVocab, p, st, 0).token;
      CHECK(t < kTokVocab);
    }
  }
  // The device job carries the bound, and drops edits past it.
  SequenceState st(p, std::vector<int>{1}, 1, 0, std::vector<int>{});
  SampleJob job = make_sample_job(p, st, 0, 0, kTokVocab);
  CHECK(job.vocab == kTokVocab);
  CHECK(job.edits.empty());
}

TEST_CASE("padded vocabulary: a logit_bias of +100 on a masked id never samples it") {
  Fixture f;
  Engine engine(f.exec, f.tok, f.cfg());
  CHECK(engine.sample_vocab() == kTokVocab);
  std::vector<int64_t> ids;
  for (float temp : {0.0f, 1.0f}) {
    SamplingParams p;
    p.temperature = temp;
    p.max_tokens = 16;
    p.seed = 5;
    p.ignore_eos = true;
    p.logit_bias[kModelVocab - 2] = 100.0f;  // a model id the tokenizer lacks: accepted, masked
    p.logit_bias[kPoison] = -100.0f;
    ids.push_back(engine.submit({1, 2, 3}, p));
  }
  engine.drain();
  for (int64_t id : ids) {
    RequestResult r = *engine.take_result(id);
    CHECK_MESSAGE(r.error.empty(), r.error);
    REQUIRE(r.outputs.size() == 1);
    CHECK(r.outputs[0].token_ids.size() == 16);
    for (int t : r.outputs[0].token_ids) CHECK(t < kTokVocab);
  }
  // Prompt ids are the tokenizer's; the model's padding ids are refused (400 at the server).
  CHECK_THROWS_WITH_AS(engine.submit({1, kModelVocab - 2}, SamplingParams{}),
                       doctest::Contains("prompt token id 62 is outside the vocabulary (48 tokens)"), InputError);
  // A tokenizer larger than the model: refused, both numbers named.
  NumberTokenizer big(kModelVocab + 1);
  CHECK_THROWS_WITH_AS(Engine(f.exec, big, f.cfg()),
                       doctest::Contains("the tokenizer has 65 tokens but the model's vocabulary has 64"), InputError);
}

TEST_CASE("an exception in one sequence fails its request only, not the step") {
  Fixture f;
  Engine engine(f.exec, f.tok, f.cfg());
  auto params = [](int max_tokens) {
    SamplingParams p;
    p.temperature = 0;
    p.max_tokens = max_tokens;
    p.ignore_eos = true;
    p.logit_bias[kPoison] = -100.0f;  // never drawn unless a request asks for it
    return p;
  };
  const int64_t a = engine.submit({1, 2, 3}, params(6));
  // Detokenization throws: the draw is forced onto the token that cannot be decoded.
  SamplingParams pb = params(6);
  pb.logit_bias[kPoison] = 100.0f;  // replaces the -100
  std::vector<std::string> streamed;
  const int64_t b = engine.submit({4, 5}, pb, [&](const StreamEvent& e) { streamed.emplace_back(e.text); });
  // Sampling throws: every id suppressed before min_tokens (temperature > 0 needs a candidate).
  SamplingParams pc = params(6);
  pc.temperature = 1.0f;
  pc.min_tokens = 3;
  for (int id = 0; id < kTokVocab; ++id) pc.stop_token_ids.push_back(id);
  const int64_t c = engine.submit({6, 7, 8, 9}, pc);
  // n = 2: the second child's first draw (from the prompt's row) fails: the whole request fails.
  SamplingParams pd = params(4);
  pd.n = 2;
  pd.temperature = 1.0f;
  pd.seed = 1;
  pd.logit_bias[kPoison] = 100.0f;
  const int64_t d = engine.submit({2, 3}, pd);
  const int64_t e = engine.submit({3, 2, 1}, params(5));
  CHECK_NOTHROW(engine.drain());

  RequestResult ra = *engine.take_result(a), re = *engine.take_result(e);
  CHECK(ra.error.empty());
  CHECK(ra.outputs.at(0).token_ids.size() == 6);
  CHECK(ra.outputs.at(0).finish_reason == "length");
  CHECK(re.error.empty());
  CHECK(re.outputs.at(0).token_ids.size() == 5);
  RequestResult rb = *engine.take_result(b);
  CHECK(rb.finished);
  CHECK(rb.error.find("token 40 cannot be decoded") != std::string::npos);
  CHECK(rb.outputs.at(0).finish_reason == "error");
  CHECK(streamed.empty());  // no done event for a failed sequence: the error is its last word
  RequestResult rc = *engine.take_result(c);
  CHECK(rc.error.find("every token is suppressed") != std::string::npos);
  RequestResult rd = *engine.take_result(d);
  CHECK(rd.error.find("cannot be decoded") != std::string::npos);
  CHECK_FALSE(engine.has_unfinished());
  // Nothing leaked: the whole cache is free again.
  CHECK(engine.stats().kv.usage == 0.0);
  // The engine goes on serving.
  const int64_t g = engine.submit({1, 2}, params(3));
  engine.drain();
  CHECK(engine.take_result(g)->outputs.at(0).token_ids.size() == 3);
}
