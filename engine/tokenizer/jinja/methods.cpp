// Attribute/item lookup, the Python methods templates call on str, dict and list, and globals.
#include <cctype>
#include <ctime>
#include <optional>

#include "engine/tokenizer/jinja/builtins.h"
#include "engine/tokenizer/jinja/limits.h"
#include "engine/tokenizer/jinja/unicode.h"

namespace llmctl::jinja {

namespace {

std::string str_arg(const Args& a, size_t i, const char* name, const char* fn) {
  const Value* v = a.get(i, name);
  if (!v) JINJA_FAIL() << fn << "() missing required argument '" << name << "'";
  if (!v->is_string()) JINJA_FAIL() << fn << "() argument must be str, not " << type_name(*v);
  return v->s;
}

// `chars` argument of strip(): None or absent means whitespace.
const std::string* opt_chars(const Args& a, std::string& storage) {
  const Value* v = a.get(0, "chars");
  if (!v || v->is_none()) return nullptr;
  if (!v->is_string()) JINJA_FAIL() << "strip arg must be None or str";
  storage = v->s;
  return &storage;
}

Value list_of_strings(const std::vector<std::string>& parts) {
  std::vector<Value> items;
  for (const auto& p : parts) items.push_back(Value::string(p));
  return Value::make_list(std::move(items));
}

bool all_chars(const std::string& s, bool (*pred)(char32_t)) {
  std::u32string u = utf8_decode(s);
  if (u.empty()) return false;
  for (char32_t c : u)
    if (!pred(c)) return false;
  return true;
}

// Prefix test for startswith/endswith: a str or a tuple of str.
bool affix_match(const std::string& s, const Value& arg, bool prefix) {
  auto one = [&](const Value& p) {
    if (!p.is_string()) JINJA_FAIL() << "startswith/endswith arg must be str or a tuple of str";
    if (p.s.size() > s.size()) return false;
    return prefix ? s.compare(0, p.s.size(), p.s) == 0 : s.compare(s.size() - p.s.size(), p.s.size(), p.s) == 0;
  };
  if (arg.is_list()) {
    for (const auto& p : arg.list->items)
      if (one(p)) return true;
    return false;
  }
  return one(arg);
}

// Python's str.format for the fields templates use: "{}" (automatic numbering), "{0}", "{name}",
// an optional !s or !r conversion, "{{" and "}}". Format specs and attribute or index lookups in a
// field are refused by name rather than approximated.
std::string py_format(const std::string& s, Args& a) {
  std::string out;
  size_t next_auto = 0;
  bool numbered = false, automatic = false;
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (c == '}') {
      if (i + 1 < s.size() && s[i + 1] == '}') {
        out += '}', ++i;
        continue;
      }
      JINJA_FAIL() << "Single '}' encountered in format string";
    }
    if (c != '{') {
      out += c;
      continue;
    }
    if (i + 1 < s.size() && s[i + 1] == '{') {
      out += '{', ++i;
      continue;
    }
    const size_t close = s.find('}', i + 1);
    if (close == std::string::npos) JINJA_FAIL() << "Single '{' encountered in format string";
    std::string field = s.substr(i + 1, close - i - 1), conv;
    if (const size_t colon = field.find(':'); colon != std::string::npos) {
      if (colon + 1 < field.size()) JINJA_FAIL() << "str.format: format specs ('" << field << "') are not supported";
      field.resize(colon);
    }
    if (const size_t bang = field.find('!'); bang != std::string::npos) {
      conv = field.substr(bang + 1);
      field.resize(bang);
      if (conv != "s" && conv != "r") JINJA_FAIL() << "str.format: unknown conversion '!" << conv << "'";
    }
    if (field.find_first_of(".[") != std::string::npos)
      JINJA_FAIL() << "str.format: attribute and index lookups ('" << field << "') are not supported";
    const Value* v = nullptr;
    if (field.empty() || std::isdigit(static_cast<unsigned char>(field[0]))) {
      size_t index = next_auto;
      if (field.empty()) {
        automatic = true;
        ++next_auto;
      } else {
        numbered = true;
        if (field.size() > 6 || field.find_first_not_of("0123456789") != std::string::npos)
          JINJA_FAIL() << "str.format: bad field '" << field << "'";
        index = std::stoul(field);
      }
      if (automatic && numbered)
        JINJA_FAIL() << "cannot switch from automatic field numbering to manual field specification";
      if (index >= a.pos.size()) JINJA_FAIL() << "Replacement index " << index << " out of range for positional args tuple";
      v = &a.pos[index];
    } else {
      v = a.get(size_t(-1), field);
      if (!v) JINJA_FAIL() << "KeyError: '" << field << "'";
    }
    const std::string text = conv == "r" ? repr(*v) : to_str(*v);
    check_size(out.size() + text.size(), "str.format");
    out += text;
    i = close;
  }
  return out;
}

Value str_method(const std::string& s, const std::string& name) {
  auto bind = [&](auto fn) { return Value::function("str." + name, [s, fn](Args& a) { return fn(s, a); }); };
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    bool l = name != "rstrip", r = name != "lstrip";
    return bind([l, r](const std::string& s, Args& a) {
      std::string storage;
      return Value::string(py_strip(s, opt_chars(a, storage), l, r));
    });
  }
  if (name == "split" || name == "rsplit") {
    bool right = name == "rsplit";
    return bind([right](const std::string& s, Args& a) {
      a.check("split", 2, {"sep", "maxsplit"});
      Value sep = a.get_or(0, "sep", Value::none());
      int64_t maxsplit = a.get_or(1, "maxsplit", Value::integer(-1)).as_int();
      if (sep.is_string() && sep.s.empty()) JINJA_FAIL() << "empty separator";
      return list_of_strings(py_split(s, sep.is_string() ? &sep.s : nullptr, maxsplit, right));
    });
  }
  if (name == "startswith" || name == "endswith") {
    bool prefix = name == "startswith";
    return bind([prefix](const std::string& s, Args& a) {
      const Value* p = a.get(0, "prefix");
      if (!p) JINJA_FAIL() << "startswith/endswith takes one argument";
      return Value::boolean(affix_match(s, *p, prefix));
    });
  }
  if (name == "format") return bind([](const std::string& s, Args& a) { return Value::string(py_format(s, a)); });
  if (name == "upper") return bind([](const std::string& s, Args&) { return Value::string(py_upper(s)); });
  if (name == "lower") return bind([](const std::string& s, Args&) { return Value::string(py_lower(s)); });
  if (name == "title") return bind([](const std::string& s, Args&) { return Value::string(py_title(s)); });
  if (name == "capitalize")
    return bind([](const std::string& s, Args&) { return Value::string(py_capitalize(s)); });
  if (name == "replace") {
    return bind([](const std::string& s, Args& a) {
      int64_t count = a.get_or(2, "count", Value::integer(-1)).as_int();
      return Value::string(checked_replace(s, str_arg(a, 0, "old", "replace"), str_arg(a, 1, "new", "replace"), count));
    });
  }
  if (name == "find" || name == "rfind") {
    bool right = name == "rfind";
    return bind([right](const std::string& s, Args& a) {
      return Value::integer(py_find(s, str_arg(a, 0, "sub", "find"), right));
    });
  }
  if (name == "count")
    return bind([](const std::string& s, Args& a) { return Value::integer(py_count(s, str_arg(a, 0, "sub", "count"))); });
  if (name == "join") {
    return bind([](const std::string& s, Args& a) {
      const Value* it = a.get(0, "iterable");
      if (!it) JINJA_FAIL() << "join() takes exactly one argument";
      std::string out;
      bool first = true;
      for (const Value& x : iterate(*it)) {
        if (!x.is_string()) JINJA_FAIL() << "sequence item: expected str instance, " << type_name(x) << " found";
        check_size(out.size() + s.size() + x.s.size(), "str.join");
        if (!first) out += s;
        first = false;
        out += x.s;
      }
      return Value::string(std::move(out));
    });
  }
  if (name == "splitlines")
    return bind([](const std::string& s, Args&) { return list_of_strings(py_splitlines(s)); });
  if (name == "isspace")
    return bind([](const std::string& s, Args&) { return Value::boolean(all_chars(s, py_isspace)); });
  if (name == "isdigit")
    return bind([](const std::string& s, Args&) {
      return Value::boolean(all_chars(s, [](char32_t c) { return c >= '0' && c <= '9'; }));
    });
  if (name == "isalpha" || name == "isalnum") {
    bool num = name == "isalnum";
    return bind([num](const std::string& s, Args&) {
      auto alpha = [](char32_t c) { return is_cased(c); };  // uncased scripts (CJK) not covered
      std::u32string u = utf8_decode(s);
      bool ok = !u.empty();
      for (char32_t c : u) ok = ok && (alpha(c) || (num && c >= '0' && c <= '9'));
      return Value::boolean(ok);
    });
  }
  if (name == "islower" || name == "isupper") {
    bool lower = name == "islower";
    return bind([lower](const std::string& s, Args&) {
      bool any = false, ok = true;
      for (char32_t c : utf8_decode(s)) {
        if (!is_cased(c)) continue;
        any = true;
        ok = ok && (lower ? to_lower(c) == c : to_upper(c) == c);
      }
      return Value::boolean(any && ok);
    });
  }
  return Value::undefined(name);
}

Value dict_method(const Value& d, const std::string& name) {
  if (name == "items" || name == "keys" || name == "values") {
    int which = name == "items" ? 0 : name == "keys" ? 1 : 2;
    return Value::function("dict." + name, [d, which](Args&) {
      std::vector<Value> out;
      for (const auto& [k, v] : d.dict->items) {
        if (which == 0) out.push_back(Value::make_list({k, v}, true));
        else out.push_back(which == 1 ? k : v);
      }
      return Value::make_list(std::move(out));
    });
  }
  if (name == "get") {
    return Value::function("dict.get", [d](Args& a) {
      const Value* k = a.get(0, "key");
      if (!k) JINJA_FAIL() << "get expected at least 1 argument, got 0";
      const Value* v = d.dict->find(*k);
      return v ? *v : a.get_or(1, "default", Value::none());
    });
  }
  return Value::undefined(name);
}

Value list_method(const Value& l, const std::string& name) {
  if (name == "index" || name == "count") {
    bool index = name == "index";
    return Value::function("list." + name, [l, index](Args& a) {
      const Value* x = a.get(0, "value");
      if (!x) JINJA_FAIL() << (index ? "index" : "count") << "() takes exactly one argument";
      int64_t n = 0;
      for (size_t k = 0; k < l.list->items.size(); ++k) {
        if (!equals(l.list->items[k], *x)) continue;
        if (index) return Value::integer(static_cast<int64_t>(k));
        ++n;
      }
      if (index) JINJA_FAIL() << repr(*x) << " is not in list";
      return Value::integer(n);
    });
  }
  return Value::undefined(name);
}

}  // namespace

Value get_attr(const Value& obj, const std::string& name) {
  switch (obj.kind) {
    case Value::Kind::Undefined: fail_undefined(obj);
    case Value::Kind::String: return str_method(obj.s, name);
    case Value::Kind::Dict: {
      Value m = dict_method(obj, name);
      if (!m.is_undefined()) return m;
      const Value* v = obj.dict->find(std::string_view(name));
      return v ? *v : Value::undefined(name);
    }
    case Value::Kind::Namespace: {
      const Value* v = obj.dict->find(std::string_view(name));
      return v ? *v : Value::undefined(name);
    }
    case Value::Kind::List: return list_method(obj, name);
    default: return Value::undefined(name);
  }
}

Value get_item(const Value& obj, const Value& key) {
  if (obj.is_undefined()) fail_undefined(obj);
  if (obj.is_dict()) {
    if (const Value* v = obj.dict->find(key)) return *v;
  } else if ((obj.is_list() || obj.is_string()) && key.is_int()) {
    int64_t n = length(obj), i = key.as_int();
    if (i < 0) i += n;
    if (i >= 0 && i < n) {
      if (obj.is_list()) return obj.list->items[i];
      charge_bytes(obj.s.size());  // decoding to find the i-th character
      std::string ch;
      utf8_append(ch, utf8_decode(obj.s)[i]);
      return Value::string(std::move(ch));
    }
  }
  if (key.is_string()) return get_attr(obj, key.s);
  return Value::undefined(to_str(key));
}

Value get_slice(const Value& obj, const Value& start_v, const Value& stop_v, const Value& step_v) {
  if (obj.is_undefined()) fail_undefined(obj);
  if (!obj.is_list() && !obj.is_string()) return Value::undefined();
  auto opt = [](const Value& v) -> std::optional<int64_t> {
    if (v.is_none() || v.is_undefined()) return std::nullopt;
    if (!v.is_int()) JINJA_FAIL() << "slice indices must be integers or None";
    return v.as_int();
  };
  if (obj.is_string()) charge_bytes(obj.s.size());
  std::u32string chars = obj.is_string() ? utf8_decode(obj.s) : std::u32string();
  int64_t n = obj.is_list() ? static_cast<int64_t>(obj.list->items.size()) : static_cast<int64_t>(chars.size());
  int64_t step = opt(step_v).value_or(1);
  if (step == 0) JINJA_FAIL() << "slice step cannot be zero";
  auto clamp = [&](std::optional<int64_t> given, int64_t def) {
    if (!given) return def;
    int64_t v = *given;
    if (v < 0) v += n;  // cannot overflow: n >= 0
    if (step > 0) return v < 0 ? 0 : v > n ? n : v;
    return v < 0 ? -1 : v >= n ? n - 1 : v;
  };
  int64_t start = clamp(opt(start_v), step > 0 ? 0 : n - 1);
  int64_t stop = clamp(opt(stop_v), step > 0 ? n : -1);
  std::vector<Value> items;
  std::u32string out;
  // i stays in [-1, n] until the step that leaves the range, which may overflow for huge steps.
  for (int64_t i = start; step > 0 ? i < stop : i > stop;) {
    if (obj.is_list()) items.push_back(obj.list->items[i]);
    else out.push_back(chars[i]);
    if (__builtin_add_overflow(i, step, &i)) break;
  }
  charge(static_cast<int64_t>(items.size()));
  if (obj.is_string()) return Value::string(utf8_encode(out));
  return Value::make_list(std::move(items), obj.list->is_tuple);
}

Value global(const std::string& name) {
  if (name == "raise_exception") {
    return Value::function(name, [](Args& a) -> Value {
      throw RaisedError(a.pos.empty() ? std::string() : to_str(a.pos[0]));
    });
  }
  if (name == "range") {
    return Value::function(name, [](Args& a) {
      if (a.pos.empty() || a.pos.size() > 3) JINJA_FAIL() << "range expected 1 to 3 arguments";
      for (const auto& v : a.pos)
        if (!v.is_int()) JINJA_FAIL() << "range() argument must be an integer";
      int64_t start = a.pos.size() > 1 ? a.pos[0].as_int() : 0;
      int64_t stop = a.pos.size() > 1 ? a.pos[1].as_int() : a.pos[0].as_int();
      int64_t step = a.pos.size() > 2 ? a.pos[2].as_int() : 1;
      if (step == 0) JINJA_FAIL() << "range() arg 3 must not be zero";
      std::vector<Value> out;
      for (int64_t i = start; step > 0 ? i < stop : i > stop;) {
        if (out.size() >= 100000) JINJA_FAIL() << "range too big";  // jinja2's sandbox: MAX_RANGE
        out.push_back(Value::integer(i));
        if (__builtin_add_overflow(i, step, &i)) break;
      }
      charge(static_cast<int64_t>(out.size()));
      return Value::make_list(std::move(out));
    });
  }
  if (name == "namespace" || name == "dict") {
    bool ns = name == "namespace";
    return Value::function(name, [ns](Args& a) {
      Value d = ns ? Value::make_namespace() : Value::make_dict();
      for (const auto& p : a.pos) {
        if (!p.is_dict()) JINJA_FAIL() << "namespace()/dict() positional argument must be a dict";
        for (const auto& [k, v] : p.dict->items) d.dict->set(k, v);
      }
      for (const auto& [k, v] : a.kw) d.dict->set(Value::string(k), v);
      return d;
    });
  }
  if (name == "strftime_now") {  // transformers' global: the current local time
    return Value::function(name, [](Args& a) {
      std::string fmt = a.pos.empty() ? "" : to_str(a.pos[0]);
      std::time_t t = std::time(nullptr);
      std::tm tm{};
      localtime_r(&t, &tm);
      char buf[256];
      size_t n = std::strftime(buf, sizeof(buf), fmt.c_str(), &tm);
      return Value::string(std::string(buf, n));
    });
  }
  return Value::undefined(name);
}

}  // namespace llmctl::jinja
