#include "engine/engine_request.h"

#include "engine/core/error.h"

namespace llmctl {

void EngineRequest::accept_token(int child, const SampleResult& res, const StopContext& stop, double now) {
  EngineSequence& s = seqs[size_t(child)];
  if (result.first_token_seconds == 0) result.first_token_seconds = now;
  s.out.cumulative_logprob = s.state.cumulative_logprob;  // includes a final stop token, as best_of ranks it
  if (is_stop_token(res.token, params, stop.eos_ids)) {
    finish_sequence(child, "stop");
    return;
  }
  if (s.matcher) {
    LLM_CHECK(s.matcher->accept(res.token)) << "token " << res.token << " is not allowed by the request's "
                                            << params.constraint->spec().kind_name();
    if (s.matcher->terminated()) {  // a stop token the request does not stop on (ignore_eos)
      finish_sequence(child, "stop");
      return;
    }
  }
  s.out.token_ids.push_back(res.token);
  if (params.logprobs) s.out.logprobs.push_back(res);
  std::string piece = s.text.push(stop.tokenizer.token_bytes(res.token));
  if (s.text.stopped()) {
    if (!piece.empty()) emit(child, piece, false);
    finish_sequence(child, "stop");
    return;
  }
  if (!piece.empty()) emit(child, piece, false);
  const int total = int(prompt.size()) + int(s.out.token_ids.size());
  if (int(s.out.token_ids.size()) >= params.max_tokens || total >= stop.max_context) finish_sequence(child, "length");
}

void EngineRequest::finish_sequence(int child, const std::string& reason) {
  EngineSequence& s = seqs[size_t(child)];
  if (s.done) return;
  s.done = true;
  s.out.finish_reason = reason;
  std::string tail = s.text.finish();
  s.out.text = s.text.text();
  emit(child, tail, true);
}

void EngineRequest::emit(int child, std::string_view piece, bool done) {
  if (!on_text || child >= params.n || params.best_of) return;
  EngineSequence& s = seqs[size_t(child)];
  StreamEvent e;
  e.request_id = id;
  e.index = child;
  e.text = piece;
  e.token_ids = std::span<const int>(s.out.token_ids).subspan(s.streamed);
  if (!s.out.logprobs.empty()) e.logprobs = std::span<const TokenLogprobs>(s.out.logprobs).subspan(s.streamed);
  e.done = done;
  if (done) e.finish_reason = s.out.finish_reason;
  s.streamed = s.out.token_ids.size();
  on_text(e);
}

void EngineRequest::fail(const std::string& message) {
  result.error = message;
  for (EngineSequence& s : seqs) {
    s.done = true;
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
  for (size_t k = 0; k < order.size(); ++k) {
    SequenceOutput o = seqs[size_t(order[k])].out;
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
