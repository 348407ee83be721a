#include "engine/tokenizer/jinja/eval.h"

#include <new>
#include <optional>
#include <stdexcept>

#include "engine/tokenizer/jinja/builtins.h"

namespace llmctl::jinja {

const Value* Scope::find(const std::string& name) const {
  for (const Scope* s = this; s; s = s->parent_.get())
    for (const auto& [k, v] : s->vars_)
      if (k == name) return &v;
  return nullptr;
}

void Scope::set(const std::string& name, Value v) {
  for (auto& [k, x] : vars_) {
    if (k == name) {
      x = std::move(v);
      return;
    }
  }
  vars_.emplace_back(name, std::move(v));
}

std::string Interpreter::render(const Template& t, const Value& context) {
  std::optional<Budget> own;
  if (!Budget::current()) own.emplace(RenderLimits{});
  budget_ = Budget::current();
  std::string out;
  try {
    auto root = std::make_shared<Scope>();
    if (context.is_dict())
      for (const auto& [k, v] : context.dict->items) root->set(to_str(k), v);
    exec(t.body, root, out);
  } catch (const RaisedError&) {
    throw;
  } catch (const TemplateError& e) {
    LLM_THROW() << "chat template error (line " << line_ << "): " << e.what();
  } catch (const std::bad_alloc&) {  // a limit should have stopped it first; still no crash
    LLM_THROW() << "chat template error (line " << line_ << "): out of memory";
  } catch (const std::length_error&) {
    LLM_THROW() << "chat template error (line " << line_ << "): value too large";
  }
  return out;
}

void Interpreter::emit(std::string& out, std::string_view text) {
  const size_t max = budget_->limits().max_output_bytes;
  if (out.size() + text.size() > max)
    JINJA_FAIL() << "rendered output is larger than the limit (max_output_bytes = " << max << ")";
  charge_bytes(text.size());
  out += text;
}

Interpreter::Flow Interpreter::exec(const Body& body, const ScopePtr& scope, std::string& out) {
  for (const auto& s : body) {
    Flow f = exec_stmt(*s, scope, out);
    if (f != Flow::Normal) return f;
  }
  return Flow::Normal;
}

Interpreter::Flow Interpreter::exec_stmt(const Stmt& s, const ScopePtr& scope, std::string& out) {
  line_ = s.line;
  DepthGuard depth(DepthGuard::Eval);
  budget_->step();
  switch (s.kind) {
    case Stmt::Kind::Text: emit(out, s.text); return Flow::Normal;
    case Stmt::Kind::Print: emit(out, to_str(eval(*s.expr, scope))); return Flow::Normal;
    case Stmt::Kind::If:
      for (const auto& [cond, body] : s.branches)
        if (truthy(eval(*cond, scope))) return exec(body, scope, out);
      return exec(s.else_body, scope, out);
    case Stmt::Kind::For: return exec_for(s, scope, out);
    case Stmt::Kind::Set: assign(s.target, eval(*s.expr, scope), scope); return Flow::Normal;
    case Stmt::Kind::SetBlock: {
      std::string captured;
      exec(s.body, scope, captured);
      assign(s.target, Value::string(std::move(captured)), scope);
      return Flow::Normal;
    }
    case Stmt::Kind::Macro: scope->set(s.text, make_macro(s, scope)); return Flow::Normal;
    case Stmt::Kind::Break: return Flow::Break;
    case Stmt::Kind::Continue: return Flow::Continue;
    case Stmt::Kind::With: {
      auto inner = std::make_shared<Scope>(scope);
      for (const auto& [name, value] : s.params) inner->set(name, eval(*value, scope));
      return exec(s.body, inner, out);
    }
    case Stmt::Kind::Group: return exec(s.body, scope, out);
  }
  return Flow::Normal;
}

namespace {

// Out of line so its temporaries stay out of exec_for's frame, which nested loops recurse through.
[[gnu::noinline]] Value loop_variable(const std::vector<Value>& items, int64_t i) {
  const int64_t n = static_cast<int64_t>(items.size());
  Value loop = Value::make_dict();
  auto put = [&](const char* k, Value v) { loop.dict->items.emplace_back(Value::string(k), std::move(v)); };
  put("index", Value::integer(i + 1));
  put("index0", Value::integer(i));
  put("revindex", Value::integer(n - i));
  put("revindex0", Value::integer(n - i - 1));
  put("first", Value::boolean(i == 0));
  put("last", Value::boolean(i == n - 1));
  put("length", Value::integer(n));
  put("depth", Value::integer(1));
  put("depth0", Value::integer(0));
  if (i > 0) put("previtem", items[i - 1]);
  if (i + 1 < n) put("nextitem", items[i + 1]);
  put("cycle", Value::function("loop.cycle", [i](Args& a) {
        if (a.pos.empty()) JINJA_FAIL() << "no items for cycling given";
        return a.pos[static_cast<size_t>(i) % a.pos.size()];
      }));
  return loop;
}

}  // namespace

Interpreter::Flow Interpreter::exec_for(const Stmt& s, const ScopePtr& scope, std::string& out) {
  std::vector<Value> items = iterate(eval(*s.expr, scope));
  if (s.cond) {  // `for x in xs if cond`: loop.* counts the kept items only
    std::vector<Value> kept;
    for (auto& item : items) {
      budget_->loop_iteration();
      auto tmp = std::make_shared<Scope>(scope);
      assign(s.target, item, tmp);
      if (truthy(eval(*s.cond, tmp))) kept.push_back(std::move(item));
    }
    items = std::move(kept);
  }
  if (items.empty()) return exec(s.else_body, scope, out);
  const int64_t n = static_cast<int64_t>(items.size());
  for (int64_t i = 0; i < n; ++i) {
    budget_->loop_iteration();
    auto iter = std::make_shared<Scope>(scope);
    assign(s.target, items[i], iter);
    iter->set("loop", loop_variable(items, i));
    if (exec(s.body, iter, out) == Flow::Break) break;
  }
  return Flow::Normal;
}

void Interpreter::assign(const Target& t, Value v, const ScopePtr& scope) {
  if (!t.attr.empty()) {
    const Value* ns = scope->find(t.names[0]);
    if (!ns || ns->kind != Value::Kind::Namespace)
      JINJA_FAIL() << "cannot assign attribute on non-namespace object '" << t.names[0] << "'";
    ns->dict->set(Value::string(t.attr), std::move(v));
    return;
  }
  if (!t.is_tuple) {
    scope->set(t.names[0], std::move(v));
    return;
  }
  std::vector<Value> parts = iterate(v);
  if (parts.size() != t.names.size())
    JINJA_FAIL() << (parts.size() > t.names.size() ? "too many" : "not enough") << " values to unpack (expected "
                 << t.names.size() << ", got " << parts.size() << ")";
  for (size_t k = 0; k < parts.size(); ++k) scope->set(t.names[k], std::move(parts[k]));
}

Value Interpreter::make_macro(const Stmt& s, const ScopePtr& scope) {
  const Stmt* def = &s;
  // The macro lives in `scope`; a weak reference avoids a scope -> macro -> scope cycle.
  std::weak_ptr<Scope> weak = scope;
  return Value::function(s.text, [this, def, weak](Args& a) {
    ScopePtr scope = weak.lock();
    if (!scope) JINJA_FAIL() << "macro '" << def->text << "' called outside the scope it was defined in";
    if (a.pos.size() > def->params.size())
      JINJA_FAIL() << "macro '" << def->text << "' takes not more than " << def->params.size() << " argument(s)";
    auto local = std::make_shared<Scope>(scope);
    for (size_t k = 0; k < def->params.size(); ++k) {
      const auto& [name, default_expr] = def->params[k];
      const Value* given = a.get(k, name);
      local->set(name, given ? *given : default_expr ? eval(*default_expr, local) : Value::undefined(name));
    }
    for (const auto& [k, v] : a.kw) {
      bool known = false;
      for (const auto& p : def->params) known = known || p.first == k;
      if (!known) JINJA_FAIL() << "macro '" << def->text << "' got an unexpected keyword argument '" << k << "'";
    }
    int saved = line_;
    std::string out;
    exec(def->body, local, out);
    line_ = saved;
    return Value::string(std::move(out));
  });
}

Value Interpreter::lookup(const std::string& name, const ScopePtr& scope) const {
  if (const Value* v = scope->find(name)) return *v;
  return global(name);
}

Args Interpreter::eval_args(const Expr& e, const ScopePtr& scope) {
  Args a;
  for (const auto& x : e.items) a.pos.push_back(eval(*x, scope));
  for (const auto& [k, x] : e.kwargs) a.kw.emplace_back(k, eval(*x, scope));
  return a;
}

bool Interpreter::compare_op(const std::string& op, const Value& l, const Value& r) {
  if (op == "==") return equals(l, r);
  if (op == "!=") return !equals(l, r);
  if (op == "in") return contains(r, l);
  if (op == "notin") return !contains(r, l);
  int c = compare(l, r);
  if (op == "<") return c < 0;
  if (op == "<=") return c <= 0;
  if (op == ">") return c > 0;
  return c >= 0;
}

Value Interpreter::eval(const Expr& e, const ScopePtr& scope) {
  line_ = e.line;
  DepthGuard depth(DepthGuard::Eval);
  budget_->step();
  Value v = eval_node(e, scope);
  if (v.is_string()) charge_bytes(v.s.size());  // strings are copied by value: their size is work
  return v;
}

Value Interpreter::eval_node(const Expr& e, const ScopePtr& scope) {
  switch (e.kind) {
    case Expr::Kind::Const: return e.value;
    case Expr::Kind::Name: return lookup(e.name, scope);
    case Expr::Kind::List:
    case Expr::Kind::Tuple: {
      std::vector<Value> items;
      for (const auto& x : e.items) items.push_back(eval(*x, scope));
      return Value::make_list(std::move(items), e.kind == Expr::Kind::Tuple);
    }
    case Expr::Kind::Dict: {
      Value d = Value::make_dict();
      for (size_t k = 0; k + 1 < e.items.size(); k += 2) {
        Value key = eval(*e.items[k], scope);
        d.dict->set(std::move(key), eval(*e.items[k + 1], scope));
      }
      return d;
    }
    case Expr::Kind::Getattr: return get_attr(eval(*e.a, scope), e.name);
    case Expr::Kind::Getitem: {
      Value obj = eval(*e.a, scope);
      if (e.b->kind == Expr::Kind::Slice) {
        auto part = [&](size_t k) { return e.b->items[k] ? eval(*e.b->items[k], scope) : Value::none(); };
        return get_slice(obj, part(0), part(1), part(2));
      }
      return get_item(obj, eval(*e.b, scope));
    }
    case Expr::Kind::Slice: JINJA_FAIL() << "slice outside of a subscript";
    case Expr::Kind::Call: {
      Value fn = eval(*e.a, scope);
      Args a = eval_args(e, scope);
      if (fn.kind == Value::Kind::Function) {
        Value r = fn.fn->call(a);
        line_ = e.line;
        return r;
      }
      if (fn.is_undefined()) fail_undefined(fn);
      JINJA_FAIL() << "'" << type_name(fn) << "' object is not callable";
    }
    case Expr::Kind::Filter: {
      Value v = eval(*e.a, scope);
      Args a = eval_args(e, scope);
      line_ = e.line;
      return apply_filter(e.name, v, a);
    }
    case Expr::Kind::Test: {
      Value v = eval(*e.a, scope);
      Args a = eval_args(e, scope);
      line_ = e.line;
      return Value::boolean(apply_test(e.name, v, a));
    }
    case Expr::Kind::Unary: return unary_op(e.name, eval(*e.a, scope));
    case Expr::Kind::Binary: {
      Value l = eval(*e.a, scope);
      if (e.name == "and") return truthy(l) ? eval(*e.b, scope) : l;
      if (e.name == "or") return truthy(l) ? l : eval(*e.b, scope);
      Value r = eval(*e.b, scope);
      line_ = e.line;
      if (e.name == "~") {
        std::string ls = to_str(l), rs = to_str(r);
        check_size(ls.size() + rs.size(), "'~'");
        return Value::string(ls + rs);
      }
      return binary_op(e.name, l, r);
    }
    case Expr::Kind::Compare: {
      Value l = eval(*e.a, scope);
      for (size_t k = 0; k < e.ops.size(); ++k) {
        Value r = eval(*e.items[k], scope);
        line_ = e.line;
        if (!compare_op(e.ops[k], l, r)) return Value::boolean(false);
        l = std::move(r);
      }
      return Value::boolean(true);
    }
    case Expr::Kind::Cond:
      if (truthy(eval(*e.b, scope))) return eval(*e.a, scope);
      return e.c ? eval(*e.c, scope) : Value::undefined();
  }
  return Value::undefined();
}

}  // namespace llmctl::jinja
