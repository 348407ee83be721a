#include "quant/algo/family_calibration.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <utility>

#include "engine/backend/forwarding_backend.h"
#include "engine/core/error.h"
#include "engine/model/decoder_model.h"
#include "engine/model/registry.h"
#include "engine/parallel/loopback_comm.h"
#include "engine/parallel/parallel_context.h"

namespace llmctl::quant {

// The CPU backend with the layer's linears and KV writes watched: a linear whose weight is one of
// the layer's four goes through `before` first; every KV write updates the maxima.
class FamilyCalibration::Observer final : public ForwardingBackend {
 public:
  using ForwardingBackend::ForwardingBackend;

  // last_group: linears of later groups are skipped (a probe). attention: Record keeps the layer's
  // attention output; Replay puts the kept one in its place, its q/k/v linear skipped (a probe of
  // the MLP only).
  enum class Attention { Compute, Record, Replay };
  void arm(std::vector<std::pair<const void*, LinearGroup>> groups, const BeforeLinear* before, KvAbsMax* amax,
           int last_group = 3, Attention attention = Attention::Compute) {
    groups_ = std::move(groups);
    before_ = before;
    amax_ = amax;
    last_group_ = last_group;
    attention_mode_ = attention;
    calls_.assign(groups_.size(), 0);
  }
  void forget_attention() { recorded_ = Tensor{}; }
  bool has_attention() const { return !recorded_.empty(); }
  // How often each armed weight ran since arm().
  const std::vector<int>& calls() const { return calls_; }

  void linear(const Tensor& x, const Tensor& w, const Tensor* bias, Tensor& out) override {
    for (size_t g = 0; g < groups_.size(); ++g) {
      if (groups_[g].first != w.data) continue;
      ++calls_[g];
      if (int(groups_[g].second) > last_group_) return;  // a probe stops computing here
      if (groups_[g].second == LinearGroup::Qkv && attention_mode_ == Attention::Replay) return;  // not read
      const Tensor swapped = *before_ ? (*before_)(groups_[g].second, x, w) : Tensor{};
      if (!swapped.empty()) {
        LLM_CHECK(swapped.dtype == DType::F32 && swapped.shape == w.shape)
            << "calibration: a weight " << swapped.shape_str() << " swapped in for " << w.shape_str();
      }
      return inner().linear(x, swapped.empty() ? w : swapped, bias, out);
    }
    inner().linear(x, w, bias, out);
  }
  void attention(const Tensor& qkv, const KvLayer& cache, const DeviceBatch& b, int hq, int hkv, float scale,
                 Tensor& out, int window, float softcap) override {
    if (attention_mode_ == Attention::Replay) {
      LLM_CHECK(recorded_.shape == out.shape) << "calibration: no recorded attention output to replay";
      std::memcpy(out.data, recorded_.data, out.nbytes());
      return;
    }
    inner().attention(qkv, cache, b, hq, hkv, scale, out, window, softcap);
    if (attention_mode_ == Attention::Record) {
      recorded_ = Tensor::empty_host(DType::F32, out.shape);
      std::memcpy(recorded_.data, out.data, out.nbytes());
    }
  }
  void write_kv(const Tensor& qkv, const DeviceBatch& b, int hq, int hkv, KvLayer& cache) override {
    inner().write_kv(qkv, b, hq, hkv, cache);
    record(qkv, hq, hkv, cache.k.dim(3));
  }
  void rope_write_kv(Tensor& qkv, const DeviceBatch& b, const RopeParams& p, int hq, int hkv,
                     KvLayer& cache) override {
    inner().rope_write_kv(qkv, b, p, hq, hkv, cache);  // rotates qkv's q and k in place
    record(qkv, hq, hkv, cache.k.dim(3));
  }

 private:
  // The maxima of |k| (rotated) and |v| per kv head over every token of qkv [T, (Hq + 2 Hkv) D].
  void record(const Tensor& qkv, int64_t hq, int64_t hkv, int64_t D) {
    if (!amax_) return;
    amax_->k.assign(size_t(hkv), 0.0f);
    amax_->v.assign(size_t(hkv), 0.0f);
    const int64_t W = qkv.dim(1);
    const float* p = qkv.ptr<float>();
    for (int64_t t = 0; t < qkv.dim(0); ++t)
      for (int64_t h = 0; h < hkv; ++h)
        for (int64_t d = 0; d < D; ++d) {
          amax_->k[size_t(h)] = std::max(amax_->k[size_t(h)], std::fabs(p[t * W + (hq + h) * D + d]));
          amax_->v[size_t(h)] = std::max(amax_->v[size_t(h)], std::fabs(p[t * W + (hq + hkv + h) * D + d]));
        }
  }

  std::vector<std::pair<const void*, LinearGroup>> groups_;
  const BeforeLinear* before_ = nullptr;
  KvAbsMax* amax_ = nullptr;
  int last_group_ = 3;
  Attention attention_mode_ = Attention::Compute;
  Tensor recorded_;  // the attention output of the built layer's recording probe
  std::vector<int> calls_;
};

FamilyCalibration::FamilyCalibration(const Checkpoint& ck, const std::vector<std::vector<int32_t>>& samples,
                                     int threads)
    : ck_(ck), cpu_(make_cpu_backend(threads)) {
  const ModelConfig& c = ck.config;
  find_architecture(c.architecture);  // refused by name before anything is built
  observer_ = std::make_unique<Observer>(*cpu_);
  comm_ = std::make_unique<LoopbackComm>(c.num_layers);
  int num_blocks = 0;
  plan_ = calibration_plan(samples, c.vocab_size, kCalibrationBlockSize, &num_blocks);
  batch_ = cpu_->prepare_batch(plan_);
  const int64_t T = tokens(), A = int64_t(c.num_heads) * c.head_dim;
  auto rows = [&](int64_t width) { return Tensor::empty_host(DType::F32, {T, width}); };
  buffers_.hidden = rows(c.hidden_size);
  buffers_.residual = rows(c.hidden_size);
  buffers_.normed = rows(c.hidden_size);
  buffers_.qkv = rows(A + 2 * int64_t(c.num_kv_heads) * c.head_dim);
  buffers_.attn = rows(A);
  buffers_.gate_up = rows(2 * int64_t(c.intermediate_size));
  buffers_.act = rows(c.intermediate_size);
  const std::vector<int64_t> cache = {num_blocks, kCalibrationBlockSize, c.num_kv_heads, c.head_dim};
  kv_.emplace_back(Tensor::empty_host(DType::F32, cache), Tensor::empty_host(DType::F32, cache));
}

FamilyCalibration::~FamilyCalibration() = default;

void FamilyCalibration::begin_layer(int layer) {
  const ModelConfig& c = ck_.config;
  LLM_CHECK(layer == layer_index_ + 1 && layer < c.num_layers)
      << "calibration: layer " << layer << " built out of order (next: " << layer_index_ + 1 << ")";
  layer_.reset();  // the previous layer's weights go first
  observer_->forget_attention();
  // Layer `layer` alone: stage `layer` of a pipeline of num_layers one-layer stages.
  comm_->set_rank(layer);
  ParallelContext par;
  par.stages = c.num_layers;
  par.stage = layer;
  par.pp_comm = comm_.get();
  layer_ = make_model(ck_, *observer_, DType::F32, par);
  layer_index_ = layer;
  const auto* decoder = dynamic_cast<const DecoderModel*>(layer_.get());
  LLM_REQUIRE(decoder && decoder->weights().layers.size() == 1)
      << c.architecture << ": calibration runs decoder models one layer at a time, which this model is not";
  const DecoderWeights::Layer& L = decoder->weights().layers[0];
  for (const LinearWeight* w : {&L.attention.qkv, &L.attention.o_proj, &L.mlp.gate_up, &L.mlp.down})
    LLM_CHECK(w->format == WeightFormat::DenseF32 && w->data.dtype == DType::F32)
        << "calibration: layer " << layer << " loaded a linear as " << weight_format_name(w->format);
}

const Tensor& FamilyCalibration::weight(LinearGroup group) const {
  LLM_CHECK(layer_) << "calibration: no layer built";
  const DecoderWeights::Layer& L = static_cast<const DecoderModel&>(*layer_).weights().layers[0];
  switch (group) {
    case LinearGroup::Qkv: return L.attention.qkv.data;
    case LinearGroup::O: return L.attention.o_proj.data;
    case LinearGroup::GateUp: return L.mlp.gate_up.data;
    case LinearGroup::Down: return L.mlp.down.data;
  }
  LLM_CHECK(false) << "calibration: linear group " << int(group);
  return L.mlp.down.data;
}

Tensor FamilyCalibration::linear(const Tensor& x, const Tensor& w) {
  Tensor out = Tensor::empty_host(DType::F32, {x.dim(0), w.dim(0)});
  cpu_->linear(x, w, nullptr, out);
  return out;
}

void FamilyCalibration::run(const BeforeLinear& before, KvAbsMax* amax, int last_group, int attention) {
  const ModelConfig& c = ck_.config;
  LLM_CHECK(layer_) << "calibration: no layer built";
  std::vector<std::pair<const void*, LinearGroup>> groups;
  for (LinearGroup g : {LinearGroup::Qkv, LinearGroup::O, LinearGroup::GateUp, LinearGroup::Down})
    groups.emplace_back(weight(g).data, g);
  observer_->arm(std::move(groups), &before, amax, last_group, Observer::Attention(attention));
  AttentionPlan ap;
  ap.batch = &batch_;
  ap.tokens = tokens();
  ap.rows = 0;  // no logits: the last stage stops after the final norm
  ap.softmax_scale = c.softmax_scale();
  layer_->forward(ap, buffers_, kv_);
  const std::vector<int> calls = observer_->calls();
  observer_->arm({}, nullptr, nullptr);
  for (int n : calls)
    LLM_CHECK(n == 1) << c.architecture << ": layer " << layer_index_ << " ran one of its linears " << n
                      << " times (calibration expects each once)";
}

void FamilyCalibration::advance(const BeforeLinear& before, KvAbsMax* amax) {
  run(before, amax, int(LinearGroup::Down), int(Observer::Attention::Compute));
  layer_.reset();  // its output waits for the next layer
  observer_->forget_attention();
}

void FamilyCalibration::probe(const BeforeLinear& before, LinearGroup last, ProbeAttention attention) {
  LLM_CHECK(attention != ProbeAttention::Replay || observer_->has_attention())
      << "calibration: a probe replays an attention output no probe of this layer recorded";
  comm_->save();  // the layer's input, for the runs after this one
  run(before, nullptr, int(last),
      int(attention == ProbeAttention::Record   ? Observer::Attention::Record
          : attention == ProbeAttention::Replay ? Observer::Attention::Replay
                                                : Observer::Attention::Compute));
  comm_->restore();  // and its output dropped
}

void FamilyCalibration::run_layer(int layer, const BeforeLinear& before, KvAbsMax* amax) {
  begin_layer(layer);
  advance(before, amax);
}

}  // namespace llmctl::quant
