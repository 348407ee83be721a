#include "engine/engine_request.h"

#include <algorithm>
#include <bit>

#include "engine/core/error.h"

namespace llmctl {

void EngineRequest::init_sequences(std::span<const int> prompt, std::span<const int> eos_ids) {
  seqs.resize(size_t(params.num_generated_sequences()));
  for (int i = 0; i < int(seqs.size()); ++i) {
    EngineSequence& s = seqs[size_t(i)];
    s.state = SequenceState(params, prompt, seed, i, eos_ids);
    s.text = StreamingText(params.stop);
    s.out.index = i;
    s.out.scored = params.logprobs.has_value() || (params.best_of && *params.best_of > params.n);
    if (params.constraint) {
      // EOS ends a grammar's output even with ignore_eos (the sequence then stops when it is drawn).
      std::vector<int> ends = s.state.stop_ids;
      ends.insert(ends.end(), eos_ids.begin(), eos_ids.end());
      s.matcher = params.constraint->matcher(ends);
      s.mask.resize(s.matcher->mask_words());
    }
  }
}

void EngineRequest::keep_unscheduled(int child, std::optional<int32_t> first) {
  auto own = std::make_shared<Sequence>();
  own->state = SeqStatus::finished;
  own->prompt_len = prompt_len;
  own->tokens.assign(prompt().begin(), prompt().end());
  if (first) own->tokens.push_back(*first);
  seqs[size_t(child)].seq = std::move(own);
}

bool EngineRequest::accept_token(int child, const SampleResult& res, const StopContext& stop, double now,
                                 bool matched) {
  EngineSequence& s = seqs[size_t(child)];
  if (result.first_token_seconds == 0) result.first_token_seconds = now;
  s.out.cumulative_logprob = s.state.cumulative_logprob;  // includes a final stop token, as best_of ranks it
  if (is_stop_token(res.token, params, stop.eos_ids)) {
    finish_sequence(child, "stop");
    return false;
  }
  if (s.matcher) {
    LLM_CHECK(matched || s.matcher->accept(res.token)) << "token " << res.token << " is not allowed by the request's "
                                                       << params.constraint->spec().kind_name();
    if (s.matcher->terminated()) {  // a stop token the request does not stop on (ignore_eos)
      finish_sequence(child, "stop");
      return false;
    }
  }
  const std::string bytes = stop.tokenizer.token_bytes(res.token);  // (may throw: nothing recorded yet)
  ++s.num_out;
  if (params.logprobs) s.out.logprobs.push_back(res);
  s.unsent += s.text.push(bytes);
  if (s.text.stopped()) {
    finish_sequence(child, "stop");
    return true;
  }
  if (s.num_out >= params.max_tokens || prompt_len + s.num_out >= stop.max_context) finish_sequence(child, "length");
  return true;
}

void EngineRequest::finish_sequence(int child, const std::string& reason) {
  EngineSequence& s = seqs[size_t(child)];
  if (s.done) return;
  s.done = true;
  s.out.finish_reason = reason;
  s.unsent += s.text.finish();
  s.out.text = s.text.text();
}

int EngineRequest::forced_token(int child, std::span<const int> eos_ids, int vocab) {
  EngineSequence& s = seqs[size_t(child)];
  // Most positions allow many bytes: decided without a pass over the vocabulary, the mask is left to
  // the draw (which fills masks in parallel, or not at all: DrawSpec::matcher).
  if (!s.matcher->next_byte_forced()) return -1;
  s.matcher->fill_mask(s.mask);
  s.mask_current = true;  // (the next draw's mask, when no token is forced)
  int only = -1;
  for (size_t w = 0; w < s.mask.size(); ++w) {
    if (s.mask[w] == 0) continue;
    if (only >= 0 || (s.mask[w] & (s.mask[w] - 1)) != 0) return -1;  // more than one token
    only = int(w * 32) + std::countr_zero(s.mask[w]);
  }
  // A stop token is left to the draw (min_tokens may suppress it; EOS ends the sequence there).
  if (only < 0 || only >= vocab || is_stop_token(only, params, eos_ids) ||
      std::find(eos_ids.begin(), eos_ids.end(), only) != eos_ids.end())
    return -1;
  s.mask_current = false;
  return only;
}

std::span<const int32_t> EngineRequest::output(int child) const {
  const EngineSequence& s = seqs[size_t(child)];
  if (s.num_out == 0) return {};
  LLM_CHECK(s.seq && s.seq->tokens.size() >= size_t(prompt_len + s.num_out))
      << "engine: sequence " << s.seq_id << " holds fewer tokens than its " << s.num_out << " outputs";
  return std::span<const int32_t>(s.seq->tokens).subspan(size_t(prompt_len), size_t(s.num_out));
}

void EngineRequest::flush(int child) {
  EngineSequence& s = seqs[size_t(child)];
  if (!result.error.empty()) {  // failed: no stream event (the error is the last word)
    s.unsent.clear();
    return;
  }
  const bool report_done = s.done && !s.done_reported;
  if (s.unsent.empty() && !report_done) return;  // tokens without text wait for their text
  std::string piece;
  piece.swap(s.unsent);
  s.done_reported = s.done;
  if (!on_text || child >= params.n || params.best_of) return;
  StreamEvent e;
  e.request_id = id;
  e.index = child;
  e.text = piece;
  e.token_ids = output(child).subspan(s.streamed);
  if (!s.out.logprobs.empty()) e.logprobs = std::span<const TokenLogprobs>(s.out.logprobs).subspan(s.streamed);
  e.done = report_done;
  if (report_done) e.finish_reason = s.out.finish_reason;
  s.streamed = size_t(s.num_out);
  on_text(e);
}

void EngineRequest::fail(const std::string& message) {
  result.error = message;
  for (EngineSequence& s : seqs) {
    s.done = true;
    s.done_reported = true;  // no stream event: the error is the last word
    s.unsent.clear();
    s.out.finish_reason = "error";
    s.out.text = s.text.text();
  }
}

bool EngineRequest::all_done() const {
  for (const EngineSequence& s : seqs)
    if (!s.done) return false;
  return true;
}

RequestResult EngineRequest::take_result(double now) {
  std::vector<int> order;
  if (params.best_of) {
    std::vector<double> cum;
    for (const EngineSequence& s : seqs) cum.push_back(s.out.cumulative_logprob);
    order = best_of_ranking(cum, params.n);
  } else {
    for (int i = 0; i < int(seqs.size()); ++i) order.push_back(i);
  }
  if (!seqs.empty() && seqs[0].seq) result.prompt_ids.assign(prompt().begin(), prompt().end());
  for (size_t k = 0; k < order.size(); ++k) {
    SequenceOutput o = std::move(seqs[size_t(order[k])].out);
    const std::span<const int32_t> tokens = output(order[k]);
    o.token_ids.assign(tokens.begin(), tokens.end());
    o.index = int(k);
    result.outputs.push_back(std::move(o));
  }
  result.finished = true;
  result.finish_seconds = now;
  if (on_text && params.best_of && result.error.empty())  // best_of results are only known at the end
    for (const SequenceOutput& o : result.outputs) {
      StreamEvent e;
      e.request_id = id;
      e.index = o.index;
      e.text = o.text;
      e.token_ids = o.token_ids;
      e.logprobs = o.logprobs;
      e.done = true;
      e.finish_reason = o.finish_reason;
      on_text(e);
    }
  return std::move(result);
}

}  // namespace llmctl
