// Tree-walking interpreter for parsed templates. Scoping follows jinja2: `for` bodies and macros
// get a fresh scope per iteration/call (so `set` inside a loop does not leak out, hence
// namespace()), `if` shares the enclosing one.
#pragma once
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "engine/tokenizer/jinja/ast.h"
#include "engine/tokenizer/jinja/limits.h"

namespace llmctl::jinja {

class Scope {
 public:
  explicit Scope(std::shared_ptr<Scope> parent = nullptr) : parent_(std::move(parent)) {}
  const Value* find(const std::string& name) const;  // this scope, then the enclosing ones
  void set(const std::string& name, Value v);

 private:
  std::vector<std::pair<std::string, Value>> vars_;  // few names per scope: a vector is enough
  std::shared_ptr<Scope> parent_;
};
using ScopePtr = std::shared_ptr<Scope>;

class Interpreter {
 public:
  // `context` is a dict of top-level variables. Runtime errors become InputError with the
  // template line; raise_exception() messages pass through unchanged. Runs under the thread's
  // current Budget (ChatTemplate::render installs one), or under default RenderLimits.
  std::string render(const Template& t, const Value& context);

 private:
  enum class Flow { Normal, Break, Continue };
  Flow exec(const Body& body, const ScopePtr& scope, std::string& out);
  Flow exec_stmt(const Stmt& s, const ScopePtr& scope, std::string& out);
  Flow exec_for(const Stmt& s, const ScopePtr& scope, std::string& out);
  Value eval(const Expr& e, const ScopePtr& scope);
  Value eval_node(const Expr& e, const ScopePtr& scope);
  void emit(std::string& out, std::string_view text);
  Value lookup(const std::string& name, const ScopePtr& scope) const;
  Args eval_args(const Expr& e, const ScopePtr& scope);
  bool compare_op(const std::string& op, const Value& l, const Value& r);
  void assign(const Target& t, Value v, const ScopePtr& scope);
  Value make_macro(const Stmt& s, const ScopePtr& scope);

  int line_ = 0;  // line of the statement/expression being evaluated, for error messages
  Budget* budget_ = nullptr;
};

}  // namespace llmctl::jinja
