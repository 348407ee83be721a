// ForwardingBackend: a Backend that hands every call to another one (not owned). A decorator
// derives from it and overrides only the ops it watches or changes (quantize's calibration observes
// each linear's input this way; tests record what the loader uploads).
#pragma once
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "engine/backend/backend.h"

namespace llmctl {

class ForwardingBackend : public Backend {
 public:
  explicit ForwardingBackend(Backend& inner) : inner_(inner) { caps_ = inner.caps(); }

  Device device() const override { return inner_.device(); }
  std::string name() const override { return inner_.name(); }
  DType activation_dtype() const override { return inner_.activation_dtype(); }
  Tensor alloc(DType dtype, std::vector<int64_t> shape) override { return inner_.alloc(dtype, std::move(shape)); }
  Tensor upload(const Tensor& host, std::optional<DType> dtype = std::nullopt) override {
    return inner_.upload(host, dtype);
  }
  Tensor to_host_f32(const Tensor& t) override { return inner_.to_host_f32(t); }
  void copy_to_host(const Tensor& t, void* host) override { inner_.copy_to_host(t, host); }
  void copy_from_host(const void* host, Tensor& t) override { inner_.copy_from_host(host, t); }
  DeviceBatch prepare_batch(const BatchPlan& plan) override { return inner_.prepare_batch(plan); }
  void synchronize() override { inner_.synchronize(); }
  std::optional<size_t> kv_cache_budget(double fraction, size_t reserve) override {
    return inner_.kv_cache_budget(fraction, reserve);
  }
  void run_graph(uint64_t key, const std::function<void()>& body) override { inner_.run_graph(key, body); }
  void clear_graphs() override { inner_.clear_graphs(); }
  void step_timer_begin() override { inner_.step_timer_begin(); }
  double step_timer_end() override { return inner_.step_timer_end(); }
  std::optional<LoopAccount> thread_model_account() const override { return inner_.thread_model_account(); }
  std::vector<int32_t> sample(const Tensor& logits, const std::vector<SampleJob>& jobs) override {
    return inner_.sample(logits, jobs);
  }
  void embed(const Tensor& table, const DeviceBatch& b, Tensor& out, int64_t vocab_begin) override {
    inner_.embed(table, b, out, vocab_begin);
  }
  void embed_quantized(const LinearWeight& table, const DeviceBatch& b, Tensor& out, int64_t vocab_begin) override {
    inner_.embed_quantized(table, b, out, vocab_begin);
  }
  void rms_norm(const Tensor& x, const Tensor& w, float eps, Tensor& out, Tensor* residual) override {
    inner_.rms_norm(x, w, eps, out, residual);
  }
  void head_rms_norm(Tensor& qkv, const Tensor& q_w, const Tensor& k_w, float eps, int num_q_heads,
                     int num_kv_heads) override {
    inner_.head_rms_norm(qkv, q_w, k_w, eps, num_q_heads, num_kv_heads);
  }
  void linear(const Tensor& x, const Tensor& w, const Tensor* bias, Tensor& out) override {
    inner_.linear(x, w, bias, out);
  }
  LinearWeight upload_quantized(const LinearWeight& canonical) override { return inner_.upload_quantized(canonical); }
  void copy_exact_rows(std::vector<KvLayer>& cache, const std::vector<int32_t>& pairs) override {
    inner_.copy_exact_rows(cache, pairs);
  }
  void reserve_exact_slots(std::vector<KvLayer>& cache, int slots) override { inner_.reserve_exact_slots(cache, slots); }
  void linear_quantized(const Tensor& x, const LinearWeight& w, const Tensor* bias, Tensor& out) override {
    inner_.linear_quantized(x, w, bias, out);
  }
  void rope(Tensor& qkv, const DeviceBatch& b, const RopeParams& p, int num_q_heads, int num_kv_heads) override {
    inner_.rope(qkv, b, p, num_q_heads, num_kv_heads);
  }
  void write_kv(const Tensor& qkv, const DeviceBatch& b, int num_q_heads, int num_kv_heads, KvLayer& cache) override {
    inner_.write_kv(qkv, b, num_q_heads, num_kv_heads, cache);
  }
  void rope_write_kv(Tensor& qkv, const DeviceBatch& b, const RopeParams& p, int num_q_heads, int num_kv_heads,
                     KvLayer& cache) override {
    inner_.rope_write_kv(qkv, b, p, num_q_heads, num_kv_heads, cache);
  }
  void attention(const Tensor& qkv, const KvLayer& cache, const DeviceBatch& b, int num_q_heads, int num_kv_heads,
                 float scale, Tensor& out, int window = 0, float softcap = 0.0f) override {
    inner_.attention(qkv, cache, b, num_q_heads, num_kv_heads, scale, out, window, softcap);
  }
  void silu_mul(const Tensor& gate_up, Tensor& out) override { inner_.silu_mul(gate_up, out); }
  void gelu_tanh_mul(const Tensor& gate_up, Tensor& out) override { inner_.gelu_tanh_mul(gate_up, out); }
  void scale(Tensor& x, float s) override { inner_.scale(x, s); }
  void soft_cap(Tensor& x, float cap) override { inner_.soft_cap(x, cap); }
  void gather_rows(const Tensor& x, const DeviceBatch& b, Tensor& out) override { inner_.gather_rows(x, b, out); }
  // run_linear_group is not forwarded: Backend's default runs each item through linear() here, so
  // a subclass that watches linear() sees every expert's.
  void gather_token_rows(const Tensor& x, std::span<const int32_t> rows, Tensor& out) override {
    inner_.gather_token_rows(x, rows, out);
  }
  void scatter_add_rows(const Tensor& y, std::span<const int32_t> rows, std::span<const float> weights,
                        Tensor& out) override {
    inner_.scatter_add_rows(y, rows, weights, out);
  }
  void fill_zero(Tensor& t) override { inner_.fill_zero(t); }
  void copy_blocks(std::vector<KvLayer>& cache, const std::vector<std::pair<int, int>>& pairs) override {
    inner_.copy_blocks(cache, pairs);
  }

 protected:
  Backend& inner() const { return inner_; }

 private:
  Backend& inner_;
};

}  // namespace llmctl
