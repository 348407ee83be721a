// Structured output: what a request constrains its output to (ConstraintSpec), the compiled form
// shared by every request that asks for the same thing (CompiledConstraint), and the per-sequence
// matcher that says which tokens may come next (ConstraintMatcher). The engine only sees these
// interfaces; grammar_compiler.h builds them with xgrammar.
//
// A matcher's life, per sequence:  fill_mask -> (draw one token under the mask) -> accept(token)
// -> fill_mask -> ...; a greedy draw may instead offer the model's own token to accept() first and
// fill the mask only when it is refused (step_sampling.h, DrawSpec::matcher). After the grammar's
// end only the stop tokens are allowed, and accepting one terminates it.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace llmctl {

enum class ConstraintKind {
  json_schema,  // text: a JSON schema
  json_object,  // any JSON object (OpenAI's json_object)
  regex,        // text: a regular expression the whole output matches
  grammar,      // text: an EBNF grammar (GBNF / xgrammar syntax) with a `root` rule
  choice,       // choices: the output is exactly one of them
  // text: an xgrammar structural tag (JSON): free text with tagged regions (a tool call's opening
  // text, then arguments under the tool's JSON schema, then its closing text); what tool calls use
  structural_tag,
};

struct ConstraintSpec {
  ConstraintKind kind = ConstraintKind::json_object;
  std::string text;
  std::vector<std::string> choices;
  // json_schema: objects take no properties and arrays no items beyond those the schema lists
  // (additionalProperties / items default to false), as OpenAI's strict mode. Off: JSON Schema's
  // own defaults (an object without additionalProperties may carry other keys).
  bool strict = true;
  // What the request field was called, for errors ("response_format.json_schema.schema").
  std::string field;

  // "json_schema", "regex", ...: for errors and logs.
  const char* kind_name() const;
  // The cache key's content: kind, flags and text.
  std::string cache_key() const;
};

// One sequence's position in a compiled constraint. Not thread-safe: one sequence, one thread.
class ConstraintMatcher {
 public:
  virtual ~ConstraintMatcher() = default;
  // Writes the tokens allowed next into words (bit id % 32 of word id / 32; words.size() >=
  // mask_words()). After the grammar's end only the stop tokens are allowed.
  virtual void fill_mask(std::span<uint32_t> words) = 0;
  // Advances past token; false when the token is not allowed (the state is then unchanged).
  virtual bool accept(int32_t token) = 0;
  // Undoes the last n accepted tokens.
  virtual void rollback(int n) = 0;
  // A stop token was accepted at the grammar's end: nothing more may follow.
  virtual bool terminated() const = 0;
  // Whether the grammar allows only one next byte (and not its end): false means no single token
  // is forced, known without filling a mask.
  virtual bool next_byte_forced() = 0;
  virtual size_t mask_words() const = 0;
};

class CompiledConstraint {
 public:
  virtual ~CompiledConstraint() = default;
  // A matcher at the start; stop_ids are the tokens that may end the output once the grammar is
  // complete (EOS and the request's stop_token_ids).
  virtual std::unique_ptr<ConstraintMatcher> matcher(std::span<const int> stop_ids) const = 0;
  virtual size_t memory_bytes() const = 0;
  virtual const ConstraintSpec& spec() const = 0;
};

}  // namespace llmctl
