// Values of the Jinja interpreter, modelled on the Python objects jinja2 works with: undefined,
// None, bool, int, float, str, list/tuple, dict (insertion ordered), namespace and callables.
// Lists and dicts are shared (as Python references are); the immutable sandbox never mutates them,
// only namespaces are written to.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/core/error.h"

namespace llmctl::jinja {

// A runtime error inside the template (type error, undefined access, ...). The interpreter adds
// the line number before it leaves render().
class TemplateError : public InputError {
 public:
  using InputError::InputError;
};

// raise_exception('msg') called by the template: reaches the caller with the message unchanged.
class RaisedError : public InputError {
 public:
  using InputError::InputError;
};

#define JINJA_FAIL() ::llmctl::detail::Thrower<::llmctl::jinja::TemplateError>(nullptr)

struct Value;
struct Args;

// The destructors free nested containers iteratively: a template can build a list nested far
// deeper than the stack would allow a recursive free.
struct ListData {
  std::vector<Value> items;
  bool is_tuple = false;
  ~ListData();
};

struct DictData {
  std::vector<std::pair<Value, Value>> items;  // insertion order, like a Python dict
  ~DictData();
  const Value* find(const Value& key) const;
  const Value* find(std::string_view key) const;
  void set(Value key, Value value);
};

struct Function {
  std::string name;
  std::function<Value(Args&)> call;
};

struct Value {
  enum class Kind { Undefined, None, Bool, Int, Float, String, List, Dict, Namespace, Function };
  Kind kind = Kind::Undefined;
  bool b = false;
  int64_t i = 0;
  double f = 0;
  std::string s;  // String; for Undefined: the name that was looked up (for messages)
  // String: jinja2's Markup (|safe, |e). `+` with a plain str HTML-escapes the plain one and gives
  // Markup, as markupsafe does even with autoescape off (functionary's template relies on it).
  bool markup = false;
  std::shared_ptr<ListData> list;
  std::shared_ptr<DictData> dict;  // Dict and Namespace
  std::shared_ptr<Function> fn;

  static Value undefined(std::string hint = "");
  static Value none();
  static Value boolean(bool v);
  static Value integer(int64_t v);
  static Value number(double v);
  static Value string(std::string v);
  static Value make_list(std::vector<Value> items = {}, bool tuple = false);
  static Value make_dict();
  static Value make_namespace();
  static Value function(std::string name, std::function<Value(Args&)> call);

  bool is_undefined() const { return kind == Kind::Undefined; }
  bool is_none() const { return kind == Kind::None; }
  bool is_string() const { return kind == Kind::String; }
  bool is_list() const { return kind == Kind::List; }
  bool is_dict() const { return kind == Kind::Dict; }
  // Python ints include bool; numbers include both.
  bool is_int() const { return kind == Kind::Int || kind == Kind::Bool; }
  bool is_number() const { return is_int() || kind == Kind::Float; }
  int64_t as_int() const { return kind == Kind::Bool ? (b ? 1 : 0) : i; }
  double as_double() const { return kind == Kind::Float ? f : static_cast<double>(as_int()); }
};

// Call arguments, bound Python style: positional index or keyword name.
struct Args {
  std::vector<Value> pos;
  std::vector<std::pair<std::string, Value>> kw;
  const Value* get(size_t index, std::string_view name) const;
  Value get_or(size_t index, std::string_view name, Value fallback) const;
  // Rejects more positional arguments than `max_pos` and keywords not in `names`.
  void check(const char* fn, size_t max_pos, std::initializer_list<std::string_view> names) const;
};

// Python semantics.
const char* type_name(const Value& v);
bool truthy(const Value& v);
std::string to_str(const Value& v);  // str(v); undefined prints as ""
std::string repr(const Value& v);    // repr(v)
std::string py_float_repr(double d);
bool equals(const Value& a, const Value& b);
int compare(const Value& a, const Value& b);  // <0, 0, >0; throws TypeError-like on mismatch
int64_t length(const Value& v);
std::vector<Value> iterate(const Value& v);  // for-loop items: list items, dict keys, characters
bool contains(const Value& container, const Value& item);
[[noreturn]] void fail_undefined(const Value& v);

// Operators (jinja/ops.cpp).
Value binary_op(const std::string& op, const Value& a, const Value& b);
Value unary_op(const std::string& op, const Value& a);
std::string percent_format(const std::string& fmt, const Value& args);  // Python's str % args
int64_t float_to_int(double d);  // int(d), truncating; error for NaN, inf and out of range

// JSON (jinja/json.cpp): context in, tojson out (json.dumps with ensure_ascii=False by default).
// Both walk nested values with a depth guard (RenderLimits::max_depth).
Value from_json(const nlohmann::ordered_json& j);
struct DumpOptions {
  bool has_indent = false;
  std::string indent;
  std::string item_sep = ", ";
  std::string key_sep = ": ";
  bool sort_keys = false;
  bool ensure_ascii = false;
};
std::string to_json(const Value& v, const DumpOptions& opt);

}  // namespace llmctl::jinja
