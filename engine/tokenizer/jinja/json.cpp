// JSON in (the render context) and out (the tojson filter). Output follows Python's json.dumps,
// which is what transformers' tojson calls: ', ' and ': ' separators, float repr, non-ASCII kept
// unless ensure_ascii, lowercase \u escapes.
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "engine/tokenizer/jinja/limits.h"
#include "engine/tokenizer/jinja/unicode.h"
#include "engine/tokenizer/jinja/value.h"

namespace llmctl::jinja {

Value from_json(const nlohmann::ordered_json& j) {
  using T = nlohmann::ordered_json::value_t;
  charge(1);
  switch (j.type()) {
    case T::null: return Value::none();
    case T::boolean: return Value::boolean(j.get<bool>());
    case T::number_integer: return Value::integer(j.get<int64_t>());
    case T::number_unsigned: return Value::integer(static_cast<int64_t>(j.get<uint64_t>()));
    case T::number_float: return Value::number(j.get<double>());
    case T::string:
      charge_bytes(j.get_ref<const std::string&>().size());
      return Value::string(j.get<std::string>());
    case T::array: {
      DepthGuard depth(DepthGuard::Value);
      std::vector<Value> items;
      items.reserve(j.size());
      for (const auto& x : j) items.push_back(from_json(x));
      return Value::make_list(std::move(items));
    }
    case T::object: {
      DepthGuard depth(DepthGuard::Value);
      Value d = Value::make_dict();
      for (const auto& [k, x] : j.items()) d.dict->items.emplace_back(Value::string(k), from_json(x));
      return d;
    }
    default: JINJA_FAIL() << "unsupported JSON value in the template context";
  }
}

namespace {

void dump_string(std::string& out, const std::string& s, bool ensure_ascii) {
  out += '"';
  for (char32_t c : utf8_decode(s)) {
    char buf[16];
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (c < 0x20 || (ensure_ascii && c > 0x7E)) {
          if (c > 0xFFFF) {  // surrogate pair
            char32_t v = c - 0x10000;
            std::snprintf(buf, sizeof(buf), "\\u%04x\\u%04x", static_cast<unsigned>(0xD800 + (v >> 10)),
                          static_cast<unsigned>(0xDC00 + (v & 0x3FF)));
          } else {
            std::snprintf(buf, sizeof(buf), "\\u%04x", static_cast<unsigned>(c));
          }
          out += buf;
        } else {
          utf8_append(out, c);
        }
    }
  }
  out += '"';
}

std::string float_json(double d) {
  if (std::isnan(d)) return "NaN";
  if (std::isinf(d)) return d > 0 ? "Infinity" : "-Infinity";
  return py_float_repr(d);
}

// json.dumps turns dict keys into strings: str stays, numbers/bools/None are spelled as JSON.
std::string key_string(const Value& k) {
  switch (k.kind) {
    case Value::Kind::String: return k.s;
    case Value::Kind::Bool: return k.b ? "true" : "false";
    case Value::Kind::None: return "null";
    case Value::Kind::Int: return std::to_string(k.i);
    case Value::Kind::Float: return float_json(k.f);
    default: JINJA_FAIL() << "keys must be str, int, float, bool or None, not " << type_name(k);
  }
}

void dump(std::string& out, const Value& v, const DumpOptions& opt, int level) {
  auto newline = [&](int lvl) {
    check_size(out.size() + opt.indent.size() * static_cast<size_t>(lvl), "tojson");
    out += '\n';
    for (int k = 0; k < lvl; ++k) out += opt.indent;
  };
  switch (v.kind) {
    case Value::Kind::None: out += "null"; return;
    case Value::Kind::Bool: out += v.b ? "true" : "false"; return;
    case Value::Kind::Int: out += std::to_string(v.i); return;
    case Value::Kind::Float: out += float_json(v.f); return;
    case Value::Kind::String: dump_string(out, v.s, opt.ensure_ascii); return;
    case Value::Kind::List: {
      DepthGuard depth(DepthGuard::Value);
      const auto& items = v.list->items;
      if (items.empty()) {
        out += "[]";
        return;
      }
      out += '[';
      for (size_t k = 0; k < items.size(); ++k) {
        if (k) out += opt.item_sep;
        if (opt.has_indent) newline(level + 1);
        dump(out, items[k], opt, level + 1);
        check_size(out.size(), "tojson");  // shared sublists can serialize exponentially long
      }
      if (opt.has_indent) newline(level);
      out += ']';
      return;
    }
    case Value::Kind::Dict: {
      DepthGuard depth(DepthGuard::Value);
      std::vector<std::pair<std::string, const Value*>> items;
      for (const auto& [k, x] : v.dict->items) items.emplace_back(key_string(k), &x);
      if (opt.sort_keys)
        std::stable_sort(items.begin(), items.end(),
                         [](const auto& a, const auto& b) { return a.first < b.first; });
      if (items.empty()) {
        out += "{}";
        return;
      }
      out += '{';
      for (size_t k = 0; k < items.size(); ++k) {
        if (k) out += opt.item_sep;
        if (opt.has_indent) newline(level + 1);
        dump_string(out, items[k].first, opt.ensure_ascii);
        out += opt.key_sep;
        dump(out, *items[k].second, opt, level + 1);
        check_size(out.size(), "tojson");
      }
      if (opt.has_indent) newline(level);
      out += '}';
      return;
    }
    default:
      JINJA_FAIL() << "Object of type " << type_name(v) << " is not JSON serializable";
  }
}

}  // namespace

std::string to_json(const Value& v, const DumpOptions& opt) {
  std::string out;
  dump(out, v, opt, 0);
  return out;
}

}  // namespace llmctl::jinja
