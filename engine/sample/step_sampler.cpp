#include "engine/sample/step_sampler.h"

#include <cmath>
#include <unordered_map>

#include "engine/core/error.h"
#include "engine/sample/device_sampling.h"
#include "engine/sample/unmasked_draw.h"
#include "engine/structured/mask_fill.h"

namespace llmctl {

namespace {

// Whether the row after a chain row that drew `token` is still drawn: it drew its draft, which does
// not end the sequence (a stop token does; stop strings and max_tokens are the engine's to check).
bool chain_goes_on(int32_t token, const DrawSpec& d, std::span<const int> eos_ids) {
  return d.draft >= 0 && token == d.draft && !is_stop_token(token, *d.params, eos_ids);
}

bool on_device(const DrawSpec& d) { return d.allowed.empty() && !d.matcher && device_samplable(*d.params); }

// Host rows of the step's logits: the tensor itself on the host; on a device all of it when most
// rows are needed (`rows_needed`), else each row on first use.
class HostRows {
 public:
  HostRows(Backend& backend, const Tensor& logits, size_t rows_needed) : backend_(backend), logits_(logits) {
    width_ = logits.dim(1);
    if (logits.device == Device::CPU)
      whole_ = logits;
    else if (rows_needed * 2 >= size_t(logits.dim(0)))
      whole_ = backend.to_host_f32(logits);
  }
  const float* row(int r) {
    if (whole_.data) return whole_.ptr<float>() + int64_t(r) * width_;
    auto it = copies_.find(r);
    if (it == copies_.end()) {
      Tensor view = Tensor::view(static_cast<float*>(logits_.data) + int64_t(r) * width_, DType::F32, {1, width_});
      view.device = logits_.device;
      it = copies_.emplace(r, backend_.to_host_f32(view)).first;
    }
    return it->second.ptr<float>();
  }

 private:
  Backend& backend_;
  const Tensor& logits_;
  int64_t width_ = 0;
  Tensor whole_;
  std::unordered_map<int, Tensor> copies_;
};

// The row with the ids the mask does not allow at -inf (a copy; the row is not modified).
const float* masked_row(const float* row, int vocab, std::span<const uint32_t> allowed) {
  if (allowed.empty()) return row;
  thread_local std::vector<float> work;
  work.assign(row, row + vocab);
  for (int id = 0; id < vocab; ++id)
    if (!mask_allows(allowed, id)) work[size_t(id)] = -INFINITY;
  return work.data();
}

}  // namespace

StepOutput sample_step(Backend& backend, const Tensor& logits, const StepSampling& s) {
  StepOutput out;
  out.draws.resize(s.draws.size());
  if (s.empty()) return out;
  if (s.masks_ready.valid()) s.masks_ready.get();  // (rethrows nothing: a failed fill leaves an empty mask)
  LLM_CHECK(logits.dtype == DType::F32 && logits.shape.size() == 2 && logits.dim(1) >= s.vocab && s.vocab > 0)
      << "sample_step: logits of another shape than the step's rows";
  const auto& draws = s.draws;
  const bool device = logits.device != Device::CPU && backend.caps().sampling;
  // Device jobs are built before any token is known: row j of a chain gets the state with drafts
  // 0..j-1 appended (`ahead`), which is the sequence's state whenever that row's draw is used.
  std::vector<SampleJob> jobs;
  std::vector<size_t> job_draw, host_draws;
  SequenceState ahead;
  int chain_pos = 0;
  bool chain_on_device = false;  // a chain's rows go where its first row goes
  for (size_t i = 0; i < draws.size(); ++i) {
    const DrawSpec& d = draws[i];
    if (!d.chained) chain_on_device = device && on_device(d);
    if (!chain_on_device) {
      host_draws.push_back(i);
      continue;
    }
    const SequenceState* st = d.state;
    chain_pos = d.chained ? chain_pos + 1 : 0;
    if (d.chained) {
      if (chain_pos == 1) ahead = *d.state;
      ahead.append(draws[i - 1].draft, 0.0f);
      st = &ahead;
    }
    jobs.push_back(make_sample_job(*d.params, *st, uint64_t(d.state->num_generated() + chain_pos), d.row, s.vocab));
    job_draw.push_back(i);
  }
  bool chain_on = false;  // the previous draw of a chain drew its draft: this row counts
  if (!jobs.empty()) {
    const std::vector<int32_t> tokens = backend.sample(logits, jobs);
    LLM_CHECK(tokens.size() == jobs.size()) << "Backend::sample returned " << tokens.size() << " tokens for "
                                            << jobs.size() << " jobs";
    for (size_t j = 0; j < jobs.size(); ++j) {
      const DrawSpec& d = draws[job_draw[j]];
      DrawOutcome& o = out.draws[job_draw[j]];
      if (d.chained && !chain_on) {
        o.skipped = true;
        continue;
      }
      chain_on = false;
      o.res.token = tokens[j];
      if (tokens[j] < 0 || tokens[j] >= s.vocab) {
        o.error = "every token is suppressed (no token can be drawn)";
        continue;
      }
      d.state->append(tokens[j], 0.0f);
      chain_on = chain_goes_on(tokens[j], d, s.eos_ids);
    }
  }
  if (host_draws.empty() && s.prompt_rows.empty()) return out;
  HostRows rows(backend, logits, host_draws.size() + s.prompt_rows.size());
  // Draws under a grammar whose mask is not filled (DrawSpec::matcher) ask the grammar about single
  // tokens first (unmasked_draw.h); those that find none get their masks filled together (in
  // parallel), then draw under them.
  std::vector<size_t> refused;
  std::vector<MaskJob> refused_masks;
  std::vector<uint64_t> fallback_counters;
  chain_on = false;
  for (size_t i : host_draws) {
    const DrawSpec& d = draws[i];
    DrawOutcome& o = out.draws[i];
    if (d.chained && !chain_on) {
      o.skipped = true;
      continue;
    }
    chain_on = false;
    try {
      if (d.matcher) {  // (never a chain: a constrained sequence has no drafts)
        const UnmaskedDraw u =
            draw_unmasked(rows.row(d.row), s.vocab, *d.params, *d.state, uint64_t(d.state->num_generated()), *d.matcher);
        if (u.token >= 0) {
          o.res.token = u.token;
          o.matched = true;
          d.state->append(u.token, 0.0f);  // as sample() records a draw without logprobs
        } else {
          refused.push_back(i);
          refused_masks.push_back(MaskJob{d.matcher, d.mask});
          fallback_counters.push_back(u.fallback_counter);
        }
        continue;
      }
      const float* row = masked_row(rows.row(d.row), s.vocab, d.allowed);
      o.res = sample(row, s.vocab, *d.params, *d.state, uint64_t(d.state->num_generated()));
      chain_on = chain_goes_on(o.res.token, d, s.eos_ids);
    } catch (const std::exception& e) {
      o.error = e.what();
    }
  }
  fill_masks(refused_masks);
  for (size_t r = 0; r < refused.size(); ++r) {
    const size_t i = refused[r];
    const DrawSpec& d = draws[i];
    try {
      const float* row = masked_row(rows.row(d.row), s.vocab, d.mask);
      out.draws[i].res = sample(row, s.vocab, *d.params, *d.state, fallback_counters[r]);
    } catch (const std::exception& e) {
      out.draws[i].error = e.what();
    }
  }
  out.prompt_rows.reserve(s.prompt_rows.size());
  for (const PromptRowSpec& p : s.prompt_rows)
    out.prompt_rows.push_back(token_logprobs(rows.row(p.row), s.vocab, p.target, p.top_n));
  return out;
}

}  // namespace llmctl
