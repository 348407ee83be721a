// Many prompts through the batching engine: a JSONL file in, one JSON line per request out, in
// input order. Each input line is an object with "prompt" (string) or "messages" (chat) plus
// sampling fields (vLLM / OpenAI names). A bad line is answered with {"index", "error"} and does
// not stop the others.
#pragma once
#include <functional>
#include <iosfwd>
#include <memory>

#include "engine/engine.h"
#include "engine/structured/constraint.h"

namespace llmctl {

struct BatchGenerateSummary {
  int requests = 0, errors = 0;
  int64_t prompt_tokens = 0, generated_tokens = 0;
  double seconds = 0;
};

using CompileConstraint = std::function<std::shared_ptr<const CompiledConstraint>(const ConstraintSpec&)>;

// defaults: sampling parameters for fields a line does not set. compile: for a line's structured
// output fields (response_format, structured_outputs, guided_*: engine/structured/constraint_fields.h).
BatchGenerateSummary run_prompts_jsonl(Engine& engine, const Tokenizer& tok, std::istream& in, std::ostream& out,
                                       const SamplingParams& defaults, const CompileConstraint& compile);

}  // namespace llmctl
