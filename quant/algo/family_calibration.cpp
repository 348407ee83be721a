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

namespace {
// The loaded weight of a layer at `site`.
const LinearWeight& linear_weight(const DecoderWeights::Layer& L, LinearSite site) {
  if (site.group == LinearGroup::Qkv) return L.attention.qkv;
  if (site.group == LinearGroup::O) return L.attention.o_proj;
  LLM_CHECK(site.expert == kNoExpert || !L.moe.empty()) << "calibration: expert " << site.expert << " of a dense layer";
  const GatedMlp& mlp = site.expert == kNoExpert      ? L.mlp
                        : site.expert == kSharedExpert ? L.moe.shared
                                                       : L.moe.experts.at(size_t(site.expert));
  return site.group == LinearGroup::GateUp ? mlp.gate_up : mlp.down;
}
}  // namespace

// The CPU backend with the layer's linears and KV writes watched: a linear whose weight is one the
// layer quantizes (its four groups; a mixture of experts' expert weights) goes through `before`
// first; every KV write updates the maxima.
class FamilyCalibration::Observer final : public ForwardingBackend {
 public:
  using ForwardingBackend::ForwardingBackend;

  // stop_group: `before` sees that group's input, and neither its linear nor a later group's is
  // computed (a probe; 4: every linear runs). attention: Record keeps the layer's attention output
  // and o's output; Replay puts the kept ones in their place, the q/k/v and o linears and the
  // attention not computed (a probe of the MLP only).
  enum class Attention { Compute, Record, Replay };
  void arm(std::vector<std::pair<const void*, LinearSite>> groups, const BeforeLinear* before, KvAbsMax* amax,
           int stop_group = 4, Attention attention = Attention::Compute) {
    groups_ = std::move(groups);
    before_ = before;
    amax_ = amax;
    stop_group_ = stop_group;
    attention_mode_ = attention;
    calls_.assign(groups_.size(), 0);
  }
  void forget_attention() { recorded_ = recorded_o_ = Tensor{}; }
  bool has_attention() const { return !recorded_.empty() && !recorded_o_.empty(); }
  // How often each armed weight ran since arm().
  const std::vector<int>& calls() const { return calls_; }

  void linear(const Tensor& x, const Tensor& w, const Tensor* bias, Tensor& out) override {
    for (size_t g = 0; g < groups_.size(); ++g) {
      if (groups_[g].first != w.data) continue;
      ++calls_[g];
      const LinearSite site = groups_[g].second;
      const LinearGroup group = site.group;
      if (int(group) > stop_group_) return;  // past a probe's end
      if (attention_mode_ == Attention::Replay && group == LinearGroup::Qkv) return;  // the attention is replayed
      if (attention_mode_ == Attention::Replay && group == LinearGroup::O) return copy(recorded_o_, out);
      const Tensor swapped = *before_ ? (*before_)(site, x, w) : Tensor{};
      if (int(group) == stop_group_) return;  // the probe's end: its input seen
      if (!swapped.empty()) {
        LLM_CHECK(swapped.dtype == DType::F32 && swapped.shape == w.shape)
            << "calibration: a weight " << swapped.shape_str() << " swapped in for " << w.shape_str();
      }
      inner().linear(x, swapped.empty() ? w : swapped, bias, out);
      if (attention_mode_ == Attention::Record && group == LinearGroup::O) recorded_o_ = kept(out);
      return;
    }
    inner().linear(x, w, bias, out);
  }
  void attention(const Tensor& qkv, const KvLayer& cache, const DeviceBatch& b, int hq, int hkv, float scale,
                 Tensor& out, int window, float softcap) override {
    if (attention_mode_ == Attention::Replay) return copy(recorded_, out);
    inner().attention(qkv, cache, b, hq, hkv, scale, out, window, softcap);
    if (attention_mode_ == Attention::Record) recorded_ = kept(out);
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
  static Tensor kept(const Tensor& t) {
    Tensor k = Tensor::empty_host(DType::F32, t.shape);
    std::memcpy(k.data, t.data, t.nbytes());
    return k;
  }
  static void copy(const Tensor& from, Tensor& to) {
    LLM_CHECK(from.shape == to.shape) << "calibration: no recorded " << to.shape_str() << " output to replay";
    std::memcpy(to.data, from.data, to.nbytes());
  }
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

  std::vector<std::pair<const void*, LinearSite>> groups_;
  const BeforeLinear* before_ = nullptr;
  KvAbsMax* amax_ = nullptr;
  int stop_group_ = 4;
  Attention attention_mode_ = Attention::Compute;
  Tensor recorded_, recorded_o_;  // the attention's and o's outputs of the built layer's recording probe
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
  const std::vector<int64_t> cache = {num_blocks, kCalibrationBlockSize, c.num_kv_heads, c.head_dim};
  kv_.emplace_back(Tensor::empty_host(DType::F32, cache), Tensor::empty_host(DType::F32, cache));
}

// The step buffers for the whole batch at the model's widths (the widest MLP of any layer, the
// mixture-of-experts scratch), made with the first layer; hidden and residual carry each layer's
// output to the next.
void FamilyCalibration::allocate_buffers(const ActivationWidths& w) {
  const int64_t T = tokens();
  auto rows = [&](int64_t width) { return Tensor::empty_host(DType::F32, {T, width}); };
  buffers_.hidden = rows(w.hidden);
  buffers_.residual = rows(w.hidden);
  buffers_.normed = rows(w.hidden);
  buffers_.qkv = rows(w.qkv);
  buffers_.attn = rows(w.attn);
  buffers_.gate_up = rows(w.gate_up);
  buffers_.act = rows(w.act);
  if (w.experts > 0) {
    buffers_.router = rows(w.experts);
    buffers_.expert_in = rows(w.expert_slots * w.hidden);
    buffers_.expert_out = rows(w.expert_slots * w.hidden);
    buffers_.expert_gate_up = rows(w.expert_slots * w.expert_gate_up);
    buffers_.expert_act = rows(w.expert_slots * w.expert_gate_up / 2);
  }
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
  if (buffers_.hidden.empty()) allocate_buffers(layer_->activation_widths());
  for (const LinearSite& site : sites()) {
    const LinearWeight& w = linear_weight(decoder->weights().layers[0], site);
    LLM_CHECK(w.format == WeightFormat::DenseF32 && w.data.dtype == DType::F32)
        << "calibration: layer " << layer << " loaded a linear as " << weight_format_name(w.format);
  }
}

std::vector<LinearSite> FamilyCalibration::sites() const {
  LLM_CHECK(layer_) << "calibration: no layer built";
  const DecoderWeights::Layer& L = static_cast<const DecoderModel&>(*layer_).weights().layers[0];
  std::vector<LinearSite> out = {{LinearGroup::Qkv}, {LinearGroup::O}};
  std::vector<int> mlps;  // the MLPs' experts
  if (L.moe.empty()) {
    mlps.push_back(kNoExpert);
  } else {
    for (int e = 0; e < int(L.moe.experts.size()); ++e) mlps.push_back(e);
    if (L.moe.shared.gate_up.n > 0) mlps.push_back(kSharedExpert);
  }
  for (int e : mlps) {
    out.push_back({LinearGroup::GateUp, e});
    out.push_back({LinearGroup::Down, e});
  }
  return out;
}

const Tensor& FamilyCalibration::weight(LinearSite site) const {
  LLM_CHECK(layer_) << "calibration: no layer built";
  return linear_weight(static_cast<const DecoderModel&>(*layer_).weights().layers[0], site).data;
}

Tensor FamilyCalibration::linear(const Tensor& x, const Tensor& w) {
  Tensor out = Tensor::empty_host(DType::F32, {x.dim(0), w.dim(0)});
  cpu_->linear(x, w, nullptr, out);
  return out;
}

void FamilyCalibration::run(const BeforeLinear& before, KvAbsMax* amax, int stop_group, int attention) {
  const ModelConfig& c = ck_.config;
  LLM_CHECK(layer_) << "calibration: no layer built";
  const std::vector<LinearSite> all = sites();
  std::vector<std::pair<const void*, LinearSite>> groups;
  for (const LinearSite& site : all) groups.emplace_back(weight(site).data, site);
  observer_->arm(std::move(groups), &before, amax, stop_group, Observer::Attention(attention));
  AttentionPlan ap;
  ap.batch = &batch_;
  ap.tokens = tokens();
  ap.rows = 0;  // no logits: the last stage stops after the final norm
  ap.softmax_scale = c.softmax_scale();
  layer_->forward(ap, buffers_, kv_);
  const std::vector<int> calls = observer_->calls();
  observer_->arm({}, nullptr, nullptr);
  for (size_t i = 0; i < all.size(); ++i) {
    // a routed expert runs once, or not at all when no token is routed to it
    const bool routed = all[i].expert >= 0;
    LLM_CHECK(calls[i] == 1 || (routed && calls[i] == 0))
        << c.architecture << ": layer " << layer_index_ << " ran one of its linears " << calls[i]
        << " times (calibration expects each once)";
  }
}

void FamilyCalibration::advance(const BeforeLinear& before, KvAbsMax* amax) {
  run(before, amax, 4, int(Observer::Attention::Compute));
  layer_.reset();  // its output waits for the next layer
  observer_->forget_attention();
}

void FamilyCalibration::probe(const BeforeLinear& before, LinearGroup last, ProbeAttention attention) {
  LLM_CHECK(attention != ProbeAttention::Replay || observer_->has_attention())
      << "calibration: a probe replays an attention output no probe of this layer recorded";
  comm_->set_replay(true);  // the layer's input stays for the runs after this one, its output is dropped
  try {
    run(before, nullptr, int(last),
        int(attention == ProbeAttention::Record   ? Observer::Attention::Record
            : attention == ProbeAttention::Replay ? Observer::Attention::Replay
                                                  : Observer::Attention::Compute));
  } catch (...) {
    comm_->set_replay(false);
    throw;
  }
  comm_->set_replay(false);
}

void FamilyCalibration::run_layer(int layer, const BeforeLinear& before, KvAbsMax* amax) {
  begin_layer(layer);
  advance(before, amax);
}

}  // namespace llmctl::quant
