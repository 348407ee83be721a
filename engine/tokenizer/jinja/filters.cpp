// jinja2's built-in filters and tests that chat templates use, plus transformers' tojson.
// Filters that return generators in jinja2 (select, map, unique, reverse of a list) return lists
// here; templates only iterate or count them.
#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "engine/tokenizer/jinja/builtins.h"
#include "engine/tokenizer/jinja/limits.h"
#include "engine/tokenizer/jinja/unicode.h"

namespace llmctl::jinja {

namespace {

// `attribute` argument of map/join/sort...: dotted path, digit parts index lists.
Value lookup_path(const Value& item, const std::string& path) {
  Value v = item;
  size_t start = 0;
  while (true) {
    size_t dot = path.find('.', start);
    std::string part = path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    bool digits = !part.empty() && std::all_of(part.begin(), part.end(), [](char c) { return c >= '0' && c <= '9'; });
    v = get_item(v, digits ? Value::integer(std::strtoll(part.c_str(), nullptr, 10)) : Value::string(part));
    if (dot == std::string::npos) return v;
    start = dot + 1;
  }
}

// Comparison key for min/max/sort/unique: strings are case-folded unless case_sensitive.
Value sort_key(const Value& v, bool case_sensitive) {
  if (!case_sensitive && v.is_string()) return Value::string(py_lower(v.s));
  return v;
}

std::string title_filter(const std::string& s) {
  // jinja2 splits before runs of [-\s({[<] and capitalizes each piece.
  std::u32string u = utf8_decode(s), out;
  auto is_sep = [](char32_t c) { return c == '-' || c == '(' || c == '{' || c == '[' || c == '<' || py_isspace(c); };
  bool start = true;
  for (char32_t c : u) {
    if (is_sep(c)) {
      out.push_back(c);
      start = true;
    } else {
      out.push_back(start ? to_upper(c) : to_lower(c));
      start = false;
    }
  }
  return utf8_encode(out);
}

// `width` spaces, or the string itself: the indent argument of indent and tojson.
std::string indent_string(const Value& width, const char* what) {
  if (width.is_string()) return width.s;
  const int64_t n = std::max<int64_t>(0, width.as_int());
  check_size(static_cast<uint64_t>(n), what);
  return std::string(static_cast<size_t>(n), ' ');
}

std::string indent_filter(std::string s, const Value& width, bool first, bool blank) {
  std::string ind = indent_string(width, "indent");
  s += "\n";  // jinja2 appends a newline so splitlines keeps a trailing empty line
  std::vector<std::string> lines = py_splitlines(s);
  if (!ind.empty() && lines.size() > max_value_bytes() / ind.size()) check_size(max_value_bytes() + 1, "indent");
  check_size(s.size() + lines.size() * ind.size(), "indent");
  std::string rv;
  if (blank) {
    for (size_t k = 0; k < lines.size(); ++k) rv += (k ? "\n" + ind : "") + lines[k];
  } else {
    rv = lines.empty() ? "" : lines[0];
    for (size_t k = 1; k < lines.size(); ++k) rv += "\n" + (lines[k].empty() ? "" : ind + lines[k]);
  }
  return first ? ind + rv : rv;
}

Value round_filter(const Value& v, Args& a) {
  int64_t precision = a.get_or(0, "precision", Value::integer(0)).as_int();
  std::string method = to_str(a.get_or(1, "method", Value::string("common")));
  if (!v.is_number()) JINJA_FAIL() << "round() needs a number, not " << type_name(v);
  if (method == "common") {
    if (v.is_int()) {
      if (precision >= 0) return Value::integer(v.as_int());
      if (precision < -19) return Value::integer(0);  // past every digit of an int64
      double p = std::pow(10.0, static_cast<double>(-precision));
      return Value::integer(float_to_int(std::nearbyint(static_cast<double>(v.as_int()) / p) * p));
    }
    if (precision > 400) return v;                                // finer than any double's digits
    if (precision < -400) return Value::number(std::copysign(0.0, v.f));  // 10**400 is not a double
    if (precision < 0) {
      double p = std::pow(10.0, static_cast<double>(-precision));
      return Value::number(std::nearbyint(v.f / p) * p);
    }
    // printf rounds the exact binary value, ties to even: the same as Python's round().
    char buf[512];
    std::snprintf(buf, sizeof(buf), "%.*f", static_cast<int>(precision), v.f);
    return Value::number(std::strtod(buf, nullptr));
  }
  if (method != "ceil" && method != "floor") JINJA_FAIL() << "method must be common, ceil or floor";
  double p = std::pow(10.0, static_cast<double>(precision));
  double x = v.as_double() * p;
  return Value::number((method == "ceil" ? std::ceil(x) : std::floor(x)) / p);
}

Value int_filter(const Value& v, Args& a) {
  Value def = a.get_or(0, "default", Value::integer(0));
  if (v.is_int()) return Value::integer(v.as_int());
  if (v.kind == Value::Kind::Float) return std::isnan(v.f) ? def : Value::integer(float_to_int(v.f));
  if (v.is_string()) {
    std::string t = py_strip(v.s, nullptr, true, true);
    t.erase(std::remove(t.begin(), t.end(), '_'), t.end());
    char* end = nullptr;
    errno = 0;
    long long n = std::strtoll(t.c_str(), &end, 10);
    if (!t.empty() && *end == '\0') {
      if (errno == ERANGE) JINJA_FAIL() << "integer overflow in template: " << t << " does not fit in 64 bits";
      return Value::integer(n);
    }
    double d = std::strtod(t.c_str(), &end);  // "42.23" | int -> 42
    if (!t.empty() && *end == '\0' && std::isfinite(d)) return Value::integer(float_to_int(d));
  }
  return def;
}

Value float_filter(const Value& v, Args& a) {
  if (v.is_number()) return Value::number(v.as_double());
  if (v.is_string()) {
    std::string t = py_strip(v.s, nullptr, true, true);
    char* end = nullptr;
    double d = std::strtod(t.c_str(), &end);
    if (!t.empty() && *end == '\0') return Value::number(d);
  }
  return a.get_or(0, "default", Value::number(0.0));
}

Value tojson_filter(const Value& v, Args& a) {
  a.check("tojson", 4, {"ensure_ascii", "indent", "separators", "sort_keys"});
  DumpOptions opt;
  opt.ensure_ascii = truthy(a.get_or(0, "ensure_ascii", Value::boolean(false)));
  Value indent = a.get_or(1, "indent", Value::none());
  if (!indent.is_none()) {
    opt.has_indent = true;
    opt.indent = indent_string(indent, "tojson indent");
    opt.item_sep = ",";
  }
  Value seps = a.get_or(2, "separators", Value::none());
  if (seps.is_list() && seps.list->items.size() == 2) {
    opt.item_sep = to_str(seps.list->items[0]);
    opt.key_sep = to_str(seps.list->items[1]);
  }
  opt.sort_keys = truthy(a.get_or(3, "sort_keys", Value::boolean(false)));
  return Value::string(to_json(v, opt));
}

// select / reject / selectattr / rejectattr.
Value select_filter(const Value& seq, Args& a, bool attr, bool keep) {
  if (!truthy(seq)) return Value::make_list({});  // jinja2: `if seq:` first, so none gives nothing
  size_t off = attr ? 1 : 0;
  std::string path = attr ? to_str(a.get_or(0, "attribute", Value::string(""))) : "";
  Args targs;
  std::string test;
  if (a.pos.size() > off) {
    test = to_str(a.pos[off]);
    targs.pos.assign(a.pos.begin() + static_cast<long>(off) + 1, a.pos.end());
  }
  std::vector<Value> out;
  for (const Value& item : iterate(seq)) {
    Value x = attr ? lookup_path(item, path) : item;
    bool ok = test.empty() ? truthy(x) : apply_test(test, x, targs);
    if (ok == keep) out.push_back(item);
  }
  return Value::make_list(std::move(out));
}

Value map_filter(const Value& seq, Args& a) {
  // map() applies filters, which may be map() again: each level takes ~3 KB of stack.
  DepthGuard depth(DepthGuard::Eval, 4);
  std::vector<Value> out;
  if (!truthy(seq)) return Value::make_list({});  // jinja2: `if seq:` first, so none gives nothing
  if (a.pos.empty()) {
    const Value* attr = a.get(99, "attribute");
    if (!attr) JINJA_FAIL() << "map() needs a filter name or attribute=";
    const Value* def = a.get(99, "default");
    for (const Value& item : iterate(seq)) {
      Value x = lookup_path(item, to_str(*attr));
      out.push_back(x.is_undefined() && def ? *def : x);
    }
    return Value::make_list(std::move(out));
  }
  std::string name = to_str(a.pos[0]);
  Args fargs;
  fargs.pos.assign(a.pos.begin() + 1, a.pos.end());
  fargs.kw = a.kw;
  for (const Value& item : iterate(seq)) out.push_back(apply_filter(name, item, fargs));
  return Value::make_list(std::move(out));
}

// min / max / sort / unique share the key rules.
Value ordered_filter(const std::string& name, const Value& seq, Args& a) {
  size_t first_pos = name == "sort" ? 1 : 0;  // sort(reverse, case_sensitive, attribute)
  bool cs = truthy(a.get_or(first_pos, "case_sensitive", Value::boolean(false)));
  const Value* attr = a.get(first_pos + 1, "attribute");
  auto key = [&](const Value& v) { return sort_key(attr ? lookup_path(v, to_str(*attr)) : v, cs); };
  std::vector<Value> items = iterate(seq);
  if (name == "unique") {
    std::vector<Value> out, seen;
    for (const Value& v : items) {
      charge(static_cast<int64_t>(seen.size()));  // quadratic: counted so it cannot run unbounded
      Value k = key(v);
      if (std::none_of(seen.begin(), seen.end(), [&](const Value& s) { return equals(s, k); })) {
        seen.push_back(k);
        out.push_back(v);
      }
    }
    return Value::make_list(std::move(out));
  }
  if (name == "sort") {
    bool rev = truthy(a.get_or(0, "reverse", Value::boolean(false)));
    std::stable_sort(items.begin(), items.end(), [&](const Value& x, const Value& y) {
      return rev ? compare(key(y), key(x)) < 0 : compare(key(x), key(y)) < 0;
    });
    return Value::make_list(std::move(items));
  }
  if (items.empty()) return Value::undefined("No aggregated item, sequence was empty.");
  size_t best = 0;
  for (size_t k = 1; k < items.size(); ++k) {
    int c = compare(key(items[k]), key(items[best]));
    if (name == "min" ? c < 0 : c > 0) best = k;
  }
  return items[best];
}

}  // namespace

std::string checked_replace(const std::string& s, const std::string& old, const std::string& repl, int64_t count) {
  if (repl.size() > old.size()) {
    uint64_t n = static_cast<uint64_t>(py_count(s, old));
    if (count >= 0) n = std::min(n, static_cast<uint64_t>(count));
    const uint64_t growth = repl.size() - old.size();
    if (n > max_value_bytes() / growth) n = max_value_bytes() / growth + 1;  // over anyway: no overflow
    check_size(s.size() + n * growth, "replace");
  }
  return py_replace(s, old, repl, count);
}

std::string escape_html(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&#34;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

static Value apply_filter_unchecked(const std::string& name, const Value& v, Args& a) {
  if (name == "default" || name == "d") {
    bool boolean = truthy(a.get_or(1, "boolean", Value::boolean(false)));
    if (v.is_undefined() || (boolean && !truthy(v))) return a.get_or(0, "default_value", Value::string(""));
    return v;
  }
  if (name == "safe") return markup(v.is_string() ? v.s : to_str(v));
  if (name == "string") return Value::string(to_str(v));
  if (name == "trim") {
    Value chars = a.get_or(0, "chars", Value::none());
    return Value::string(py_strip(to_str(v), chars.is_string() ? &chars.s : nullptr, true, true));
  }
  if (name == "upper") return Value::string(py_upper(to_str(v)));
  if (name == "lower") return Value::string(py_lower(to_str(v)));
  if (name == "capitalize") return Value::string(py_capitalize(to_str(v)));
  if (name == "title") return Value::string(title_filter(to_str(v)));
  if (name == "length" || name == "count") return Value::integer(length(v));
  if (name == "tojson") return tojson_filter(v, a);
  if (name == "replace") {
    Value count = a.get_or(2, "count", Value::none());
    return Value::string(checked_replace(to_str(v), to_str(a.get_or(0, "old", Value::string(""))),
                                         to_str(a.get_or(1, "new", Value::string(""))), count.is_none() ? -1 : count.as_int()));
  }
  if (name == "first") {
    if (v.is_undefined()) return v;
    std::vector<Value> items = iterate(v);
    return items.empty() ? Value::undefined("No first item, sequence was empty.") : items.front();
  }
  if (name == "last") {
    if (v.is_undefined()) return v;
    std::vector<Value> items = iterate(v);
    return items.empty() ? Value::undefined("No last item, sequence was empty.") : items.back();
  }
  if (name == "join") {
    std::string sep = to_str(a.get_or(0, "d", Value::string("")));
    const Value* attr = a.get(1, "attribute");
    std::string out;
    bool first = true;
    for (const Value& x : iterate(v)) {
      std::string piece = to_str(attr ? lookup_path(x, to_str(*attr)) : x);
      check_size(out.size() + sep.size() + piece.size(), "join");
      if (!first) out += sep;
      first = false;
      out += piece;
    }
    return Value::string(std::move(out));
  }
  if (name == "list") return Value::make_list(iterate(v));
  if (name == "items") {
    if (v.is_undefined()) return Value::make_list();
    if (!v.is_dict()) JINJA_FAIL() << "Can only get item pairs from a mapping.";
    std::vector<Value> out;
    for (const auto& [k, x] : v.dict->items) out.push_back(Value::make_list({k, x}, true));
    return Value::make_list(std::move(out));
  }
  if (name == "selectattr" || name == "rejectattr") return select_filter(v, a, true, name == "selectattr");
  if (name == "select" || name == "reject") return select_filter(v, a, false, name == "select");
  if (name == "map") return map_filter(v, a);
  if (name == "int") return int_filter(v, a);
  if (name == "float") return float_filter(v, a);
  if (name == "round") return round_filter(v, a);
  if (name == "abs") {
    if (!v.is_number()) JINJA_FAIL() << "bad operand type for abs(): '" << type_name(v) << "'";
    if (v.is_int() && v.as_int() == INT64_MIN) JINJA_FAIL() << "integer overflow in template: abs(" << v.as_int() << ")";
    return v.is_int() ? Value::integer(std::llabs(v.as_int())) : Value::number(std::fabs(v.f));
  }
  if (name == "min" || name == "max" || name == "sort" || name == "unique") return ordered_filter(name, v, a);
  if (name == "reverse") {
    if (v.is_string()) return get_slice(v, Value::none(), Value::none(), Value::integer(-1));
    std::vector<Value> items = iterate(v);
    std::reverse(items.begin(), items.end());
    return Value::make_list(std::move(items));
  }
  if (name == "sum") {
    const Value* attr = a.get(0, "attribute");
    Value total = a.get_or(1, "start", Value::integer(0));
    for (const Value& x : iterate(v)) total = binary_op("+", total, attr ? lookup_path(x, to_str(*attr)) : x);
    return total;
  }
  if (name == "indent") {
    return Value::string(indent_filter(to_str(v), a.get_or(0, "width", Value::integer(4)),
                                       truthy(a.get_or(1, "first", Value::boolean(false))),
                                       truthy(a.get_or(2, "blank", Value::boolean(false)))));
  }
  if (name == "attr") return get_attr(v, to_str(a.get_or(0, "name", Value::string(""))));
  if (name == "escape" || name == "e") return v.is_string() && v.markup ? v : markup(escape_html(to_str(v)));
  if (name == "format") {
    Value args = a.pos.size() == 1 ? a.pos[0] : Value::make_list(a.pos, true);
    if (!a.kw.empty()) {
      args = Value::make_dict();
      for (const auto& [k, x] : a.kw) args.dict->set(Value::string(k), x);
    }
    return Value::string(percent_format(to_str(v), a.pos.empty() && a.kw.empty() ? Value::make_list({}, true) : args));
  }
  if (name == "dictsort") {
    if (!v.is_dict()) JINJA_FAIL() << "You can only sort by either \"key\" or \"value\"";
    bool cs = truthy(a.get_or(0, "case_sensitive", Value::boolean(false)));
    bool by_value = to_str(a.get_or(1, "by", Value::string("key"))) == "value";
    bool rev = truthy(a.get_or(2, "reverse", Value::boolean(false)));
    std::vector<Value> items;
    for (const auto& [k, x] : v.dict->items) items.push_back(Value::make_list({k, x}, true));
    std::stable_sort(items.begin(), items.end(), [&](const Value& p, const Value& q) {
      int c = compare(sort_key(p.list->items[by_value], cs), sort_key(q.list->items[by_value], cs));
      return rev ? c > 0 : c < 0;
    });
    return Value::make_list(std::move(items));
  }
  if (name == "center") {
    std::u32string u = utf8_decode(to_str(v));
    int64_t width = a.get_or(0, "width", Value::integer(80)).as_int();
    if (width <= static_cast<int64_t>(u.size())) return Value::string(to_str(v));
    // Python's str.center puts the extra space on the right when the margin is odd and the width even.
    check_size(static_cast<uint64_t>(width) + to_str(v).size(), "center");
    int64_t margin = width - static_cast<int64_t>(u.size());
    int64_t left = margin / 2 + (margin & width & 1);
    return Value::string(std::string(left, ' ') + to_str(v) + std::string(margin - left, ' '));
  }
  if (name == "batch") {
    int64_t size = a.get_or(0, "linecount", Value::integer(1)).as_int();
    if (size <= 0) JINJA_FAIL() << "batch size must be positive";
    const Value* fill = a.get(1, "fill_with");
    if (fill && static_cast<uint64_t>(size) > max_value_bytes() / sizeof(Value))
      check_size(max_value_bytes() + 1, "batch");  // the last batch is filled up to `size` items
    std::vector<Value> out, cur;
    for (const Value& x : iterate(v)) {
      cur.push_back(x);
      if (static_cast<int64_t>(cur.size()) == size) {
        out.push_back(Value::make_list(std::move(cur)));
        cur.clear();
      }
    }
    if (!cur.empty()) {
      while (fill && static_cast<int64_t>(cur.size()) < size) cur.push_back(*fill);
      out.push_back(Value::make_list(std::move(cur)));
    }
    return Value::make_list(std::move(out));
  }
  if (name == "truncate") {
    std::u32string u = utf8_decode(to_str(v));
    int64_t len = a.get_or(0, "length", Value::integer(255)).as_int();
    bool killwords = truthy(a.get_or(1, "killwords", Value::boolean(false)));
    std::string end = to_str(a.get_or(2, "end", Value::string("...")));
    int64_t leeway = a.get_or(3, "leeway", Value::integer(5)).as_int();
    int64_t room, keep;
    if (__builtin_add_overflow(len, leeway, &room)) room = leeway > 0 ? INT64_MAX : INT64_MIN;
    if (static_cast<int64_t>(u.size()) <= room) return Value::string(to_str(v));
    if (__builtin_sub_overflow(len, static_cast<int64_t>(utf8_decode(end).size()), &keep)) keep = 0;
    keep = std::max<int64_t>(0, keep);
    std::string head = utf8_encode(std::u32string_view(u).substr(0, keep));
    if (!killwords) {
      size_t sp = head.rfind(' ');
      if (sp != std::string::npos) head.resize(sp);
    }
    return Value::string(head + end);
  }
  if (name == "wordcount") return Value::integer(static_cast<int64_t>(py_split(to_str(v), nullptr, -1).size()));
  JINJA_FAIL() << "No filter named '" << name << "'.";
}

Value apply_filter(const std::string& name, const Value& v, Args& a) {
  Value r = apply_filter_unchecked(name, v, a);
  if (r.is_string()) check_size(r.s.size(), name.c_str());  // upper, escape, ...: bounded growth
  return r;
}

bool apply_test(const std::string& name, const Value& v, Args& a) {
  using K = Value::Kind;
  auto arg = [&]() -> const Value& {
    if (a.pos.empty()) JINJA_FAIL() << "test '" << name << "' needs an argument";
    return a.pos[0];
  };
  if (name == "defined") return !v.is_undefined();
  if (name == "undefined") return v.is_undefined();
  if (name == "none") return v.is_none();
  if (name == "boolean") return v.kind == K::Bool;
  if (name == "true") return v.kind == K::Bool && v.b;
  if (name == "false") return v.kind == K::Bool && !v.b;
  if (name == "integer") return v.kind == K::Int;
  if (name == "float") return v.kind == K::Float;
  if (name == "number") return v.is_number();
  if (name == "string") return v.is_string();
  if (name == "mapping") return v.is_dict();
  // Undefined iterates as empty and has len(), so jinja2 calls it iterable and a sequence.
  if (name == "iterable" || name == "sequence")
    return v.is_undefined() || v.is_string() || v.is_list() || v.is_dict();
  if (name == "callable") return v.kind == K::Function;
  if (name == "escaped") return false;
  if (name == "lower" || name == "upper") {
    std::string s = to_str(v);
    bool any = false;
    for (char32_t c : utf8_decode(s)) {
      if (!is_cased(c)) continue;
      any = true;
      if (name == "lower" ? to_lower(c) != c : to_upper(c) != c) return false;
    }
    return any;
  }
  if (name == "odd" || name == "even" || name == "divisibleby") {
    if (!v.is_int()) JINJA_FAIL() << "test '" << name << "' needs an integer";
    if (name == "divisibleby") {
      Value r = binary_op("%", v, arg());
      return r.as_double() == 0;
    }
    bool odd = (v.as_int() % 2) != 0;
    return name == "odd" ? odd : !odd;
  }
  if (name == "eq" || name == "equalto" || name == "==") return equals(v, arg());
  if (name == "ne" || name == "!=") return !equals(v, arg());
  if (name == "lt" || name == "lessthan" || name == "<") return compare(v, arg()) < 0;
  if (name == "le" || name == "<=") return compare(v, arg()) <= 0;
  if (name == "gt" || name == "greaterthan" || name == ">") return compare(v, arg()) > 0;
  if (name == "ge" || name == ">=") return compare(v, arg()) >= 0;
  if (name == "in") return contains(arg(), v);
  if (name == "sameas") {
    const Value& o = arg();
    if (v.kind != o.kind) return false;
    switch (v.kind) {
      case K::List: return v.list == o.list;
      case K::Dict:
      case K::Namespace: return v.dict == o.dict;
      case K::Function: return v.fn == o.fn;
      default: return equals(v, o);
    }
  }
  JINJA_FAIL() << "No test named '" << name << "'.";
}

}  // namespace llmctl::jinja
