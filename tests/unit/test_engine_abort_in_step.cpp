// Aborting a request of the running step from a stream callback (engine/engine.h: abort() may be
// called "in any state"): a request that aborts itself from its own callback, and one that aborts
// another request scheduled later in the same step. Both once broke step() (a use after free, and
// "engine: draws out of step"); the step now looks requests up by id after the first callback.
#include <doctest/doctest.h>

#include <string>

#include "engine_test_util.h"

using namespace llmctl;
using namespace llmctl::test;

TEST_CASE("engine: abort of requests of the running step from a stream callback") {
  TinyModel m;
  SamplingParams p;
  p.temperature = 0;
  p.max_tokens = 20;
  p.ignore_eos = true;
  auto engine = make_engine(m);
  int64_t a = 0, b = 0;
  int a_tokens = 0, a_done = 0, b_done = 0;
  std::string a_reason, b_reason;
  a = engine->submit(prompt_of(18, 1), p, [&](const StreamEvent& e) {
    a_tokens += int(e.token_ids.size());
    if (e.done) {
      ++a_done;
      a_reason = std::string(e.finish_reason);
    } else if (a_tokens >= 3 && a_done == 0) {
      engine->abort(b);  // another request of the same step, scheduled after a, before c
      engine->abort(a);  // itself, from inside its own event
    }
  });
  b = engine->submit(prompt_of(25, 2), p, [&](const StreamEvent& e) {
    if (e.done) ++b_done, b_reason = std::string(e.finish_reason);
  });
  const int64_t c = engine->submit(prompt_of(9, 3), p);
  engine->drain();
  const RequestResult ra = *engine->take_result(a), rb = *engine->take_result(b), rc = *engine->take_result(c);
  CHECK(ra.outputs[0].finish_reason == "abort");
  CHECK(ra.outputs[0].token_ids.size() >= 3);
  CHECK(ra.outputs[0].token_ids.size() < 20);
  CHECK(a_done == 1);
  CHECK(a_reason == "abort");
  CHECK(rb.outputs[0].finish_reason == "abort");
  CHECK(b_done == 1);
  CHECK(b_reason == "abort");
  // The request nobody aborted is untouched: equal to its run alone.
  CHECK(rc.outputs[0].finish_reason == "length");
  CHECK(rc.outputs[0].token_ids == run_alone(m, prompt_of(9, 3), p).outputs[0].token_ids);
  CHECK(engine->scheduler().kv().stats().used_blocks == 0);
  CHECK_FALSE(engine->has_unfinished());
}
