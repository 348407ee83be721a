#include "engine/structured/grammar_compiler.h"

#include <algorithm>
#include <condition_variable>
#include <cstdio>
#include <list>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_map>

#include <dlpack/dlpack.h>
#include <xgrammar/xgrammar.h>

#include "engine/core/error.h"
#include "engine/core/json_bounded.h"
#include "engine/structured/bounded_strings.h"

namespace llmctl {

const char* ConstraintSpec::kind_name() const {
  switch (kind) {
    case ConstraintKind::json_schema: return "json_schema";
    case ConstraintKind::json_object: return "json_object";
    case ConstraintKind::regex: return "regex";
    case ConstraintKind::grammar: return "grammar";
    case ConstraintKind::choice: return "choice";
    case ConstraintKind::structural_tag: return "structural_tag";
  }
  return "?";
}

std::string ConstraintSpec::cache_key() const {
  std::string key = std::string(kind_name()) + (strict ? "|strict|" : "|loose|");
  if (kind == ConstraintKind::choice) {
    for (const std::string& c : choices) key += std::to_string(c.size()) + ":" + c;
  } else {
    key += text;
  }
  return key;
}

std::string choice_grammar(std::span<const std::string> choices) {
  std::string g = "root ::= ";
  for (size_t i = 0; i < choices.size(); ++i) {
    if (i) g += " | ";
    g += '"';
    for (unsigned char c : choices[i]) {
      if (c == '"' || c == '\\') {
        g += '\\', g += char(c);
      } else if (c < 0x20 || c == 0x7f) {
        char buf[8];
        std::snprintf(buf, sizeof buf, "\\u%04x", unsigned(c));
        g += buf;
      } else {
        g += char(c);  // UTF-8 bytes pass as they are
      }
    }
    g += '"';
  }
  return g;
}

namespace {

// words as xgrammar's bitmask tensor: int32 [shape], on the host.
DLTensor mask_tensor(std::span<uint32_t> words, int64_t* shape) {
  DLTensor t{};
  t.data = words.data();
  t.device = DLDevice{kDLCPU, 0};
  t.ndim = 1;
  t.dtype = xgrammar::GetBitmaskDLType();
  t.shape = shape;
  t.strides = nullptr;
  t.byte_offset = 0;
  return t;
}

class XgrammarMatcher final : public ConstraintMatcher {
 public:
  XgrammarMatcher(const xgrammar::CompiledGrammar& g, std::vector<int> stop_ids, int vocab)
      : m_(g, std::move(stop_ids), false, -1), words_(size_t(xgrammar::GetBitmaskSize(vocab))), vocab_(vocab) {}
  void fill_mask(std::span<uint32_t> words) override {
    LLM_CHECK(words.size() >= words_) << "token mask of " << words.size() << " words, " << words_ << " needed";
    int64_t shape = int64_t(words_);
    DLTensor t = mask_tensor(words, &shape);
    m_.FillNextTokenBitmask(&t);
    // The last word's bits past the vocabulary: xgrammar may leave them set (seen where a character
    // budget, bounded_strings.h, is open); no such id exists.
    if (vocab_ % 32) words[words_ - 1] &= (1u << (vocab_ % 32)) - 1u;
  }
  bool accept(int32_t token) override { return m_.AcceptToken(token); }
  void rollback(int n) override { m_.Rollback(n); }
  bool terminated() const override { return m_.IsTerminated(); }
  bool next_byte_forced() override { return !m_.IsTerminated() && !m_.FindJumpForwardString().empty(); }
  size_t mask_words() const override { return words_; }

 private:
  xgrammar::GrammarMatcher m_;
  size_t words_;
  int vocab_;
};

class XgrammarConstraint final : public CompiledConstraint {
 public:
  XgrammarConstraint(ConstraintSpec spec, xgrammar::CompiledGrammar g, int vocab)
      : spec_(std::move(spec)), g_(std::move(g)), vocab_(vocab) {}
  std::unique_ptr<ConstraintMatcher> matcher(std::span<const int> stop_ids) const override {
    return std::make_unique<XgrammarMatcher>(g_, std::vector<int>(stop_ids.begin(), stop_ids.end()), vocab_);
  }
  size_t memory_bytes() const override { return g_.MemorySizeBytes(); }
  const ConstraintSpec& spec() const override { return spec_; }

 private:
  ConstraintSpec spec_;
  xgrammar::CompiledGrammar g_;
  int vocab_;
};

// The vocabulary as xgrammar reads it: each token's bytes ("RAW"), special and control tokens
// empty (xgrammar never allows an empty token inside a grammar); ids past the tokenizer's
// vocabulary are padding (TokenizerInfo's vocab_size).
std::vector<std::string> vocabulary_pieces(const Tokenizer& tok, int vocab) {
  const int n = std::min(tok.vocab_size(), vocab);
  std::vector<std::string> pieces(static_cast<size_t>(n));
  for (int id = 0; id < n; ++id)
    if (!tok.is_special(id)) pieces[size_t(id)] = tok.token_bytes(id);
  return pieces;
}

// Size, nesting and shape checks before anything reaches the grammar engine.
void check_spec(const ConstraintSpec& s, const CompileLimits& l) {
  const std::string& field = s.field.empty() ? std::string(s.kind_name()) : s.field;
  if (s.kind == ConstraintKind::choice) {
    LLM_REQUIRE(!s.choices.empty()) << field << ": the list of choices is empty";
    LLM_REQUIRE(s.choices.size() <= l.max_choices) << field << ": " << s.choices.size() << " choices, at most "
                                                   << l.max_choices;
    size_t bytes = 0;
    for (const std::string& c : s.choices) {
      LLM_REQUIRE(!c.empty()) << field << ": a choice is empty";
      bytes += c.size();
    }
    LLM_REQUIRE(bytes <= l.max_text_bytes) << field << ": the choices take " << bytes << " bytes, at most "
                                           << l.max_text_bytes;
    return;
  }
  if (s.kind == ConstraintKind::json_object) return;
  LLM_REQUIRE(!s.text.empty()) << field << " is empty";
  LLM_REQUIRE(s.text.size() <= l.max_text_bytes) << field << " has " << s.text.size() << " bytes, at most "
                                                 << l.max_text_bytes;
  if (s.kind == ConstraintKind::json_schema || s.kind == ConstraintKind::structural_tag) {
    const nlohmann::json j = parse_json_bounded(s.text, JsonLimits{l.max_text_bytes, l.max_json_depth}, field);
    LLM_REQUIRE(j.is_object() || (j.is_boolean() && s.kind == ConstraintKind::json_schema))
        << field << " must be a JSON object";
    // The schema is parsed again in order (rewrite_formats), whose objects find keys linearly.
    const size_t widest = widest_object(j);
    LLM_REQUIRE(widest <= l.max_object_keys) << field << " has an object with " << widest << " keys, at most "
                                             << l.max_object_keys;
  }
}

// An IPv4 address as JSON Schema validators read "format": "ipv4" (dotted decimal, no leading
// zeros); xgrammar's own pattern for it also takes "01.002.0.0".
constexpr const char* kIpv4Pattern =
    "^(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])(\\.(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])){3}$";

void rewrite_formats(nlohmann::ordered_json& v, int depth) {
  if (depth > 128) return;  // (the schema's nesting was bounded when it was checked)
  if (v.is_object()) {
    auto f = v.find("format");
    if (f != v.end() && *f == "ipv4" && !v.contains("pattern")) {
      v.erase("format");
      v["pattern"] = kIpv4Pattern;
    }
  }
  if (v.is_structured())
    for (auto& child : v) rewrite_formats(child, depth + 1);
}

// The schema handed to xgrammar: the client's, in its key order, with the formats above rewritten.
std::string schema_for_xgrammar(const std::string& text) {
  if (text.find("ipv4") == std::string::npos) return text;
  nlohmann::ordered_json j = nlohmann::ordered_json::parse(text);
  rewrite_formats(j, 0);
  return j.dump();
}

}  // namespace

// One compile in flight; every request asking for the same spec meanwhile waits on it.
struct CompileJob {
  std::chrono::steady_clock::time_point start;
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  std::shared_ptr<const CompiledConstraint> result;
  std::string error;
};

struct GrammarCompiler::Impl {
  CompileLimits limits;
  int vocab = 0;
  std::vector<int> eos_ids;
  // xgrammar's vocabulary tables (sorted tokens, tries: a few hundred ms for 49k tokens), built by
  // the first compile, so that a compiler costs nothing until structured output is asked for.
  std::vector<std::string> pieces;
  std::once_flag tables_once;
  std::optional<xgrammar::TokenizerInfo> info;
  std::optional<xgrammar::GrammarCompiler> xg_;

  std::mutex mu;
  // LRU: most recent at the front
  std::list<std::pair<std::string, std::shared_ptr<const CompiledConstraint>>> lru;
  std::unordered_map<std::string, decltype(lru)::iterator> index;
  size_t cached_bytes = 0;
  std::unordered_map<std::string, std::shared_ptr<CompileJob>> inflight;  // by cache key
  GrammarCompilerStats stats;

  Impl(const Tokenizer& tok, int v, std::span<const int> eos, CompileLimits l)
      : limits(l), vocab(v), eos_ids(eos.begin(), eos.end()), pieces(vocabulary_pieces(tok, v)) {}

  xgrammar::GrammarCompiler& xg() {
    std::call_once(tables_once, [this] {
      info.emplace(pieces, xgrammar::VocabType::RAW, vocab, std::vector<int32_t>(eos_ids.begin(), eos_ids.end()), false);
      xg_.emplace(*info, limits.threads, false);
    });
    return *xg_;
  }

  std::shared_ptr<const CompiledConstraint> lookup_locked(const std::string& key) {
    auto it = index.find(key);
    if (it == index.end()) return nullptr;
    lru.splice(lru.begin(), lru, it->second);
    ++stats.cache_hits;
    return it->second->second;
  }
  void store_locked(const std::string& key, std::shared_ptr<const CompiledConstraint> c) {
    if (index.count(key)) return;
    const size_t bytes = c->memory_bytes() + key.size();
    if (bytes > limits.cache_bytes) return;
    lru.emplace_front(key, std::move(c));
    index[key] = lru.begin();
    cached_bytes += bytes;
    while (cached_bytes > limits.cache_bytes && !lru.empty()) {
      cached_bytes -= lru.back().second->memory_bytes() + lru.back().first.size();
      index.erase(lru.back().first);
      lru.pop_back();
    }
  }

  xgrammar::CompiledGrammar compile_now(const ConstraintSpec& s) {
    switch (s.kind) {
      case ConstraintKind::json_schema: {
        // Compact separators, no free whitespace: a small model cannot wander into endless blanks.
        const std::string schema = schema_for_xgrammar(s.text);
        const auto separators = std::make_pair(std::string(","), std::string(":"));
        if (schema.find("Length\"") == std::string::npos)
          return xg().CompileJSONSchema(schema, false, std::nullopt, separators, s.strict);
        // minLength / maxLength: bounded_strings.h, on the schema's grammar (converted once)
        const xgrammar::Grammar g = xgrammar::Grammar::FromJSONSchema(schema, false, std::nullopt, separators, s.strict);
        if (auto budgeted = budget_bounded_strings(g.ToString())) {
          try {
            return xg().CompileGrammar(xgrammar::Grammar::FromEBNF(*budgeted, "root"));
          } catch (const std::exception&) {
            // (a printed form xgrammar does not read back: the grammar compiles as it is)
          }
        }
        return xg().CompileGrammar(g);
      }
      case ConstraintKind::json_object:  // any object, written compactly like the schemas' output
        return xg().CompileJSONSchema(R"({"type":"object"})", false, std::nullopt,
                                    std::make_pair(std::string(","), std::string(":")), false);
      case ConstraintKind::regex: return xg().CompileRegex(s.text);
      case ConstraintKind::grammar: return xg().CompileGrammar(s.text, "root");
      case ConstraintKind::choice: return xg().CompileGrammar(choice_grammar(s.choices), "root");
      case ConstraintKind::structural_tag: return xg().CompileStructuralTag(schema_for_xgrammar(s.text));
    }
    throw Error("unknown constraint kind");
  }

  // The compile thread: compiles, caches a success, then wakes every request waiting on the job.
  void run(CompileJob& job, const ConstraintSpec& spec, const std::string& key) {
    std::shared_ptr<const CompiledConstraint> result;
    std::string error;
    try {
      auto c = std::make_shared<XgrammarConstraint>(spec, compile_now(spec), vocab);
      // A grammar with no sentence (e.g. `root ::= root "a"`) compiles; it would fail every draw.
      auto m = c->matcher(eos_ids);
      std::vector<uint32_t> words(m->mask_words());
      m->fill_mask(words);
      if (std::all_of(words.begin(), words.end(), [](uint32_t w) { return w == 0; }))
        error = "it allows no output at all";
      else
        result = std::move(c);
    } catch (const std::exception& e) {
      error = e.what();
      if (error.empty()) error = "the grammar engine refused it";
    }
    {
      std::lock_guard lock(mu);
      inflight.erase(key);
      ++stats.compiles;
      stats.last_compile_ms =
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - job.start).count();
      if (result) store_locked(key, result);
      else ++stats.failures;
    }
    std::lock_guard lock(job.mu);
    job.result = std::move(result);
    job.error = std::move(error);
    job.done = true;
    job.cv.notify_all();
  }
};

GrammarCompiler::GrammarCompiler(const Tokenizer& tok, int vocab, std::span<const int> eos_ids, CompileLimits limits) {
  LLM_CHECK(vocab > 0) << "vocab " << vocab;
  impl_ = std::make_shared<Impl>(tok, vocab, eos_ids, limits);
}

GrammarCompiler::~GrammarCompiler() = default;

int GrammarCompiler::vocab() const { return impl_->vocab; }

GrammarCompilerStats GrammarCompiler::stats() const {
  std::lock_guard lock(impl_->mu);
  return impl_->stats;
}

std::shared_ptr<const CompiledConstraint> GrammarCompiler::compile(const ConstraintSpec& spec) {
  const std::string field = spec.field.empty() ? std::string(spec.kind_name()) : spec.field;
  try {
    check_spec(spec, impl_->limits);
  } catch (const InputError&) {
    std::lock_guard lock(impl_->mu);
    ++impl_->stats.failures;
    throw;
  }
  const std::string key = spec.cache_key();
  const auto now = std::chrono::steady_clock::now();
  std::shared_ptr<CompileJob> job;
  {
    std::lock_guard lock(impl_->mu);
    if (auto hit = impl_->lookup_locked(key)) return hit;
    auto running = impl_->inflight.find(key);
    if (running != impl_->inflight.end()) {  // the same spec is being compiled: wait for that one
      job = running->second;
      ++impl_->stats.cache_hits;
    } else {
      int overrunning = 0;
      for (const auto& [_, j] : impl_->inflight) overrunning += now - j->start > impl_->limits.timeout;
      LLM_REQUIRE(overrunning < impl_->limits.max_overrunning)
          << field << ": the server is still compiling earlier grammars that ran past their time limit; try again later";
      job = std::make_shared<CompileJob>();
      job->start = now;
      impl_->inflight[key] = job;
      // On a thread of its own, so that a request waits at most limits.timeout; the thread owns
      // what it needs (the compiler's state included) and ends on its own.
      std::thread([impl = impl_, job, spec, key] { impl->run(*job, spec, key); }).detach();
    }
  }
  std::unique_lock lock(job->mu);
  if (!job->cv.wait_for(lock, impl_->limits.timeout - (now - job->start), [&] { return job->done; })) {
    lock.unlock();
    std::lock_guard g(impl_->mu);
    ++impl_->stats.timeouts;
    throw InputError(field + ": compiling the " + spec.kind_name() + " took longer than " +
                     std::to_string(impl_->limits.timeout.count()) + " ms");
  }
  if (!job->error.empty()) {
    // xgrammar's messages start with its source location; keep what it says after it.
    std::string msg = job->error;
    const size_t cut = msg.find(": ");
    if (msg.rfind('[', 0) == 0 && cut != std::string::npos) msg = msg.substr(cut + 2);
    while (!msg.empty() && (msg.back() == '\n' || msg.back() == ' ')) msg.pop_back();
    throw InputError(field + ": the " + std::string(spec.kind_name()) + " cannot be used: " + msg);
  }
  return job->result;
}

}  // namespace llmctl
