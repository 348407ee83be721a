#include "engine/tokenizer/jinja/value.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

#include "engine/tokenizer/jinja/limits.h"
#include "engine/tokenizer/jinja/unicode.h"

namespace llmctl::jinja {

namespace {

// Containers whose last reference is going away wait here instead of being freed inside their
// parent's destructor, so freeing a deep value takes constant stack.
thread_local std::vector<Value> t_pending_free;
thread_local bool t_freeing = false;

void defer_free(Value& v) {
  if ((v.list && v.list.use_count() == 1) || (v.dict && v.dict.use_count() == 1) || (v.fn && v.fn.use_count() == 1))
    t_pending_free.push_back(std::move(v));
}

void free_pending() {
  if (t_freeing) return;  // an outer destructor is already draining the queue
  t_freeing = true;
  while (!t_pending_free.empty()) {
    Value v = std::move(t_pending_free.back());
    t_pending_free.pop_back();
  }
  t_freeing = false;
}

}  // namespace

ListData::~ListData() {
  for (auto& v : items) defer_free(v);
  free_pending();
}

DictData::~DictData() {
  for (auto& [k, v] : items) {
    defer_free(k);
    defer_free(v);
  }
  free_pending();
}

Value Value::undefined(std::string hint) {
  Value v;
  v.s = std::move(hint);
  return v;
}
Value Value::none() {
  Value v;
  v.kind = Kind::None;
  return v;
}
Value Value::boolean(bool x) {
  Value v;
  v.kind = Kind::Bool;
  v.b = x;
  return v;
}
Value Value::integer(int64_t x) {
  Value v;
  v.kind = Kind::Int;
  v.i = x;
  return v;
}
Value Value::number(double x) {
  Value v;
  v.kind = Kind::Float;
  v.f = x;
  return v;
}
Value Value::string(std::string x) {
  Value v;
  v.kind = Kind::String;
  v.s = std::move(x);
  return v;
}
Value Value::make_list(std::vector<Value> items, bool tuple) {
  Value v;
  v.kind = Kind::List;
  v.list = std::make_shared<ListData>();
  v.list->items = std::move(items);
  v.list->is_tuple = tuple;
  return v;
}
Value Value::make_dict() {
  Value v;
  v.kind = Kind::Dict;
  v.dict = std::make_shared<DictData>();
  return v;
}
Value Value::make_namespace() {
  Value v = make_dict();
  v.kind = Kind::Namespace;
  if (Budget* b = Budget::current()) b->adopt_namespace(v.dict);
  return v;
}
Value Value::function(std::string name, std::function<Value(Args&)> call) {
  Value v;
  v.kind = Kind::Function;
  v.fn = std::make_shared<Function>(Function{std::move(name), std::move(call)});
  return v;
}

// Lookups and inserts scan the items (dicts in templates are small): the scan is charged so a
// template cannot make a quadratic loop out of a big one.
const Value* DictData::find(const Value& key) const {
  charge(static_cast<int64_t>(items.size()));
  for (const auto& [k, v] : items)
    if (equals(k, key)) return &v;
  return nullptr;
}

const Value* DictData::find(std::string_view key) const {
  for (const auto& [k, v] : items)
    if (k.kind == Value::Kind::String && k.s == key) return &v;
  return nullptr;
}

void DictData::set(Value key, Value value) {
  charge(static_cast<int64_t>(items.size()));
  for (auto& [k, v] : items) {
    if (equals(k, key)) {
      v = std::move(value);
      return;
    }
  }
  items.emplace_back(std::move(key), std::move(value));
}

const Value* Args::get(size_t index, std::string_view name) const {
  if (index < pos.size()) return &pos[index];
  for (const auto& [k, v] : kw)
    if (k == name) return &v;
  return nullptr;
}

Value Args::get_or(size_t index, std::string_view name, Value fallback) const {
  const Value* v = get(index, name);
  return v ? *v : std::move(fallback);
}

void Args::check(const char* fn, size_t max_pos, std::initializer_list<std::string_view> names) const {
  if (pos.size() > max_pos)
    JINJA_FAIL() << fn << "() takes at most " << max_pos << " positional arguments (" << pos.size()
                 << " given)";
  for (const auto& [k, v] : kw) {
    bool known = false;
    for (auto n : names) known = known || n == k;
    if (!known) JINJA_FAIL() << fn << "() got an unexpected keyword argument '" << k << "'";
  }
}

const char* type_name(const Value& v) {
  switch (v.kind) {
    case Value::Kind::Undefined: return "Undefined";
    case Value::Kind::None: return "NoneType";
    case Value::Kind::Bool: return "bool";
    case Value::Kind::Int: return "int";
    case Value::Kind::Float: return "float";
    case Value::Kind::String: return "str";
    case Value::Kind::List: return v.list->is_tuple ? "tuple" : "list";
    case Value::Kind::Dict: return "dict";
    case Value::Kind::Namespace: return "Namespace";
    case Value::Kind::Function: return "function";
  }
  return "object";
}

void fail_undefined(const Value& v) {
  if (v.s.empty()) JINJA_FAIL() << "value is undefined";
  JINJA_FAIL() << "'" << v.s << "' is undefined";
}

bool truthy(const Value& v) {
  switch (v.kind) {
    case Value::Kind::Undefined:
    case Value::Kind::None: return false;
    case Value::Kind::Bool: return v.b;
    case Value::Kind::Int: return v.i != 0;
    case Value::Kind::Float: return v.f != 0.0;
    case Value::Kind::String: return !v.s.empty();
    case Value::Kind::List: return !v.list->items.empty();
    case Value::Kind::Dict: return !v.dict->items.empty();
    default: return true;
  }
}

// Python's repr(float): the shortest round-trip digits, positional for exponents -4..15,
// scientific (at least two exponent digits) outside, and always a '.0' on integral values.
std::string py_float_repr(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof(buf), d, std::chars_format::scientific);
  std::string s(buf, res.ptr);
  std::string sign;
  if (s[0] == '-') {
    sign = "-";
    s.erase(0, 1);
  }
  size_t e = s.find('e');
  std::string digits;
  for (size_t k = 0; k < e; ++k)
    if (s[k] != '.') digits += s[k];
  int exp = std::stoi(s.substr(e + 1));
  int decpt = exp + 1;
  std::string out;
  if (decpt <= -4 || decpt > 16) {
    out = digits.substr(0, 1);
    if (digits.size() > 1) out += "." + digits.substr(1);
    char eb[16];
    std::snprintf(eb, sizeof(eb), "e%c%02d", exp < 0 ? '-' : '+', std::abs(exp));
    out += eb;
  } else if (decpt <= 0) {
    out = "0." + std::string(-decpt, '0') + digits;
  } else if (decpt >= static_cast<int>(digits.size())) {
    out = digits + std::string(decpt - digits.size(), '0') + ".0";
  } else {
    out = digits.substr(0, decpt) + "." + digits.substr(decpt);
  }
  return sign + out;
}

namespace {
std::string str_repr(const std::string& s) {
  std::u32string u = utf8_decode(s);
  bool has_single = u.find(U'\'') != std::u32string::npos;
  bool has_double = u.find(U'"') != std::u32string::npos;
  char32_t quote = has_single && !has_double ? U'"' : U'\'';
  std::string out;
  utf8_append(out, quote);
  for (char32_t c : u) {
    char buf[16];
    if (c == quote || c == U'\\') {
      out += '\\';
      utf8_append(out, c);
    } else if (c == U'\n') {
      out += "\\n";
    } else if (c == U'\r') {
      out += "\\r";
    } else if (c == U'\t') {
      out += "\\t";
    } else if (!py_isprintable(c)) {
      if (c <= 0xFF)
        std::snprintf(buf, sizeof(buf), "\\x%02x", static_cast<unsigned>(c));
      else if (c <= 0xFFFF)
        std::snprintf(buf, sizeof(buf), "\\u%04x", static_cast<unsigned>(c));
      else
        std::snprintf(buf, sizeof(buf), "\\U%08x", static_cast<unsigned>(c));
      out += buf;
    } else {
      utf8_append(out, c);
    }
  }
  utf8_append(out, quote);
  return out;
}
}  // namespace

std::string repr(const Value& v) {
  switch (v.kind) {
    case Value::Kind::Undefined: return "Undefined";
    case Value::Kind::String: charge_bytes(v.s.size()); return str_repr(v.s);
    case Value::Kind::List: {
      DepthGuard depth(DepthGuard::Value);
      const auto& items = v.list->items;
      std::string out = v.list->is_tuple ? "(" : "[";
      for (size_t k = 0; k < items.size(); ++k) {
        if (k) out += ", ";
        out += repr(items[k]);
        check_size(out.size(), "repr()");  // shared sublists can print exponentially long
      }
      if (v.list->is_tuple && items.size() == 1) out += ",";
      return out + (v.list->is_tuple ? ")" : "]");
    }
    case Value::Kind::Dict: {
      DepthGuard depth(DepthGuard::Value);
      std::string out = "{";
      bool first = true;
      for (const auto& [k, x] : v.dict->items) {
        if (!first) out += ", ";
        first = false;
        out += repr(k) + ": " + repr(x);
        check_size(out.size(), "repr()");
      }
      return out + "}";
    }
    case Value::Kind::Namespace: {
      Value d = v;
      d.kind = Value::Kind::Dict;
      return "<Namespace " + repr(d) + ">";
    }
    default: return to_str(v);
  }
}

std::string to_str(const Value& v) {
  switch (v.kind) {
    case Value::Kind::Undefined: return "";
    case Value::Kind::None: return "None";
    case Value::Kind::Bool: return v.b ? "True" : "False";
    case Value::Kind::Int: return std::to_string(v.i);
    case Value::Kind::Float: return py_float_repr(v.f);
    case Value::Kind::String: return v.s;
    case Value::Kind::Function: return "<function " + v.fn->name + ">";
    default: return repr(v);
  }
}

bool equals(const Value& a, const Value& b) {
  using K = Value::Kind;
  if (a.is_number() && b.is_number()) {
    if (a.kind == K::Float || b.kind == K::Float) return a.as_double() == b.as_double();
    return a.as_int() == b.as_int();
  }
  if (a.kind != b.kind) return false;
  switch (a.kind) {
    case K::Undefined:
    case K::None: return true;
    case K::String: return a.s == b.s;
    case K::List: {
      if (a.list->is_tuple != b.list->is_tuple) return false;
      DepthGuard depth(DepthGuard::Value);
      charge(static_cast<int64_t>(a.list->items.size()));
      const auto &x = a.list->items, &y = b.list->items;
      if (x.size() != y.size()) return false;
      for (size_t k = 0; k < x.size(); ++k)
        if (!equals(x[k], y[k])) return false;
      return true;
    }
    case K::Dict: {
      if (a.dict->items.size() != b.dict->items.size()) return false;
      DepthGuard depth(DepthGuard::Value);
      charge(static_cast<int64_t>(a.dict->items.size()));
      for (const auto& [k, x] : a.dict->items) {
        const Value* y = b.dict->find(k);
        if (!y || !equals(x, *y)) return false;
      }
      return true;
    }
    case K::Namespace: return a.dict == b.dict;
    case K::Function: return a.fn == b.fn;
    default: return false;
  }
}

int compare(const Value& a, const Value& b) {
  if (a.is_undefined()) fail_undefined(a);
  if (b.is_undefined()) fail_undefined(b);
  if (a.is_number() && b.is_number()) {
    if (a.kind == Value::Kind::Float || b.kind == Value::Kind::Float) {
      double x = a.as_double(), y = b.as_double();
      return x < y ? -1 : x > y ? 1 : 0;
    }
    int64_t x = a.as_int(), y = b.as_int();
    return x < y ? -1 : x > y ? 1 : 0;
  }
  // UTF-8 byte order is code point order, which is how Python orders str.
  if (a.is_string() && b.is_string()) return a.s < b.s ? -1 : a.s > b.s ? 1 : 0;
  if (a.is_list() && b.is_list() && a.list->is_tuple == b.list->is_tuple) {
    DepthGuard depth(DepthGuard::Value);
    const auto &x = a.list->items, &y = b.list->items;
    charge(static_cast<int64_t>(std::min(x.size(), y.size())));
    for (size_t k = 0; k < x.size() && k < y.size(); ++k) {
      if (equals(x[k], y[k])) continue;
      return compare(x[k], y[k]);
    }
    return x.size() < y.size() ? -1 : x.size() > y.size() ? 1 : 0;
  }
  JINJA_FAIL() << "'<' not supported between instances of '" << type_name(a) << "' and '"
               << type_name(b) << "'";
}

int64_t length(const Value& v) {
  switch (v.kind) {
    case Value::Kind::Undefined: return 0;
    case Value::Kind::String: charge_bytes(v.s.size()); return static_cast<int64_t>(utf8_decode(v.s).size());
    case Value::Kind::List: return static_cast<int64_t>(v.list->items.size());
    case Value::Kind::Dict: return static_cast<int64_t>(v.dict->items.size());
    default: JINJA_FAIL() << "object of type '" << type_name(v) << "' has no len()";
  }
}

std::vector<Value> iterate(const Value& v) {
  std::vector<Value> out;
  switch (v.kind) {
    case Value::Kind::Undefined: return out;
    case Value::Kind::List: charge(static_cast<int64_t>(v.list->items.size())); return v.list->items;
    case Value::Kind::Dict:
      charge(static_cast<int64_t>(v.dict->items.size()));
      for (const auto& kv : v.dict->items) out.push_back(kv.first);
      return out;
    case Value::Kind::String:
      charge(static_cast<int64_t>(v.s.size()));  // one Value per character: charged before it is built
      for (char32_t c : utf8_decode(v.s)) {
        std::string ch;
        utf8_append(ch, c);
        out.push_back(Value::string(std::move(ch)));
      }
      return out;
    default: JINJA_FAIL() << "'" << type_name(v) << "' object is not iterable";
  }
}

bool contains(const Value& container, const Value& item) {
  switch (container.kind) {
    case Value::Kind::String:
      if (!item.is_string())
        JINJA_FAIL() << "'in <string>' requires string as left operand, not " << type_name(item);
      return container.s.find(item.s) != std::string::npos;
    case Value::Kind::Dict: return container.dict->find(item) != nullptr;
    case Value::Kind::List:
      charge(static_cast<int64_t>(container.list->items.size()));
      for (const auto& x : container.list->items)
        if (equals(x, item)) return true;
      return false;
    case Value::Kind::Undefined: return false;
    default:
      JINJA_FAIL() << "argument of type '" << type_name(container) << "' is not iterable";
  }
}

}  // namespace llmctl::jinja
