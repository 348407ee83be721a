// Syntax tree of a parsed template. Plain structs: one Expr and one Stmt type with a kind tag;
// which fields a kind uses is listed beside it.
#pragma once
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "engine/tokenizer/jinja/value.h"

namespace llmctl::jinja {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;
using Kwargs = std::vector<std::pair<std::string, ExprPtr>>;

struct Expr {
  enum class Kind {
    Const,    // value
    Name,     // name
    List,     // items
    Tuple,    // items
    Dict,     // items: key, value, key, value, ...
    Getattr,  // a.name
    Getitem,  // a[b]
    Slice,    // items: start, stop, step (each may be null)
    Call,     // a(items..., kwargs...)
    Filter,   // a | name(items..., kwargs...)
    Test,     // a is name(items..., kwargs...)
    Unary,    // name(op) a: "-", "+", "not"
    Binary,   // a name(op) b: arithmetic, "~", "and", "or"
    Compare,  // a ops[0] items[0] ops[1] items[1] ...: ==, !=, <, <=, >, >=, in, notin
    Cond,     // a if b else c (c may be null)
  };
  Kind kind;
  int line = 0;
  Value value;
  std::string name;
  std::vector<ExprPtr> items;
  Kwargs kwargs;
  std::vector<std::string> ops;
  ExprPtr a, b, c;
};

struct Stmt;
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

// Left side of `set` / `for`: names (tuple unpacking when several), or `ns.attr`.
struct Target {
  std::vector<std::string> names;
  bool is_tuple = false;
  std::string attr;  // non-empty: namespace attribute assignment names[0].attr
};

struct Stmt {
  enum class Kind {
    Text,      // text
    Print,     // expr
    If,        // branches (condition, body), else_body
    For,       // target in expr [if cond]: body, else_body
    Set,       // target = expr
    SetBlock,  // target = rendered body
    Macro,     // text(name), params, body
    Break,
    Continue,
    With,      // params (assignments), body
    Group,     // body rendered in place (the `generation` tag of transformers)
  };
  Kind kind;
  int line = 0;
  std::string text;
  ExprPtr expr, cond;
  std::vector<std::pair<ExprPtr, Body>> branches;
  Body body, else_body;
  Target target;
  Kwargs params;  // Macro: name and default (may be null); With: name and value
};

struct Template {
  Body body;
};

}  // namespace llmctl::jinja
