// Arithmetic with Python's rules: int op int stays int (except '/'), floor division and modulo
// round toward negative infinity, str and list support + and * like Python sequences.
#include <cmath>
#include <cstdio>

#include "engine/tokenizer/jinja_value.h"

namespace llmctl::jinja {

namespace {

[[noreturn]] void unsupported(const std::string& op, const Value& a, const Value& b) {
  JINJA_FAIL() << "unsupported operand type(s) for " << op << ": '" << type_name(a) << "' and '"
               << type_name(b) << "'";
}

Value repeat(const Value& seq, int64_t n) {
  if (seq.is_string()) {
    std::string out;
    for (int64_t k = 0; k < n; ++k) out += seq.s;
    return Value::string(std::move(out));
  }
  std::vector<Value> out;
  for (int64_t k = 0; k < n; ++k)
    out.insert(out.end(), seq.list->items.begin(), seq.list->items.end());
  return Value::make_list(std::move(out), seq.list->is_tuple);
}

int64_t floordiv(int64_t a, int64_t b) {
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

int64_t int_pow(int64_t base, int64_t exp) {
  int64_t r = 1;
  while (exp-- > 0) r *= base;
  return r;
}

}  // namespace

// printf-style `fmt % args`: %s %r %d %i %f %e %g %x %o %c %%, flags, width, precision and
// %(key)s with a dict.
std::string percent_format(const std::string& fmt, const Value& args) {
  std::vector<Value> pos;
  if (args.is_list() && args.list->is_tuple) pos = args.list->items;
  else pos.push_back(args);
  size_t next = 0;
  std::string out;
  for (size_t i = 0; i < fmt.size(); ++i) {
    if (fmt[i] != '%') {
      out += fmt[i];
      continue;
    }
    if (++i >= fmt.size()) JINJA_FAIL() << "incomplete format";
    if (fmt[i] == '%') {
      out += '%';
      continue;
    }
    const Value* arg = nullptr;
    if (fmt[i] == '(') {
      size_t close = fmt.find(')', i);
      if (close == std::string::npos || !args.is_dict()) JINJA_FAIL() << "format requires a mapping";
      arg = args.dict->find(std::string_view(fmt).substr(i + 1, close - i - 1));
      if (!arg) JINJA_FAIL() << "KeyError: '" << fmt.substr(i + 1, close - i - 1) << "'";
      i = close + 1;
    }
    std::string spec = "%";
    while (i < fmt.size() && std::string_view("-+ #0").find(fmt[i]) != std::string_view::npos) spec += fmt[i++];
    while (i < fmt.size() && ((fmt[i] >= '0' && fmt[i] <= '9') || fmt[i] == '.')) spec += fmt[i++];
    if (i >= fmt.size()) JINJA_FAIL() << "incomplete format";
    char conv = fmt[i];
    if (!arg) {
      if (next >= pos.size()) JINJA_FAIL() << "not enough arguments for format string";
      arg = &pos[next++];
    }
    char buf[512];
    switch (conv) {
      case 's':
      case 'r': {
        std::string v = conv == 's' ? to_str(*arg) : repr(*arg);
        std::snprintf(buf, sizeof(buf), (spec + "s").c_str(), v.c_str());
        out += spec == "%" ? v : std::string(buf);
        break;
      }
      case 'd': case 'i': case 'x': case 'X': case 'o': case 'c':
        if (!arg->is_number()) JINJA_FAIL() << "%" << conv << " format: a real number is required, not " << type_name(*arg);
        std::snprintf(buf, sizeof(buf), (spec + "ll" + (conv == 'i' ? 'd' : conv)).c_str(),
                      static_cast<long long>(arg->is_int() ? arg->as_int() : static_cast<int64_t>(arg->f)));
        out += buf;
        break;
      case 'f': case 'F': case 'e': case 'E': case 'g': case 'G':
        if (!arg->is_number()) JINJA_FAIL() << "must be real number, not " << type_name(*arg);
        std::snprintf(buf, sizeof(buf), (spec + conv).c_str(), arg->as_double());
        out += buf;
        break;
      default: JINJA_FAIL() << "unsupported format character '" << conv << "'";
    }
  }
  if (next < pos.size() && !args.is_dict()) JINJA_FAIL() << "not all arguments converted during string formatting";
  return out;
}

Value binary_op(const std::string& op, const Value& a, const Value& b) {
  if (a.is_undefined()) fail_undefined(a);
  if (b.is_undefined()) fail_undefined(b);
  const bool ints = a.is_int() && b.is_int();
  const bool nums = a.is_number() && b.is_number();
  if (op == "+") {
    if (ints) return Value::integer(a.as_int() + b.as_int());
    if (nums) return Value::number(a.as_double() + b.as_double());
    if (a.is_string() && b.is_string()) return Value::string(a.s + b.s);
    if (a.is_list() && b.is_list() && a.list->is_tuple == b.list->is_tuple) {
      std::vector<Value> out = a.list->items;
      out.insert(out.end(), b.list->items.begin(), b.list->items.end());
      return Value::make_list(std::move(out), a.list->is_tuple);
    }
    if (a.is_string() || b.is_string()) {
      const Value& other = a.is_string() ? b : a;
      JINJA_FAIL() << "can only concatenate str (not \"" << type_name(other) << "\") to str";
    }
    unsupported(op, a, b);
  }
  if (op == "-") {
    if (ints) return Value::integer(a.as_int() - b.as_int());
    if (nums) return Value::number(a.as_double() - b.as_double());
    unsupported(op, a, b);
  }
  if (op == "*") {
    if (ints) return Value::integer(a.as_int() * b.as_int());
    if (nums) return Value::number(a.as_double() * b.as_double());
    if ((a.is_string() || a.is_list()) && b.is_int()) return repeat(a, b.as_int());
    if ((b.is_string() || b.is_list()) && a.is_int()) return repeat(b, a.as_int());
    unsupported(op, a, b);
  }
  if (op == "/") {
    if (!nums) unsupported(op, a, b);
    if (b.as_double() == 0.0) JINJA_FAIL() << "division by zero";
    return Value::number(a.as_double() / b.as_double());
  }
  if (op == "%" && a.is_string()) return Value::string(percent_format(a.s, b));
  if (op == "//" || op == "%") {
    if (!nums) unsupported(op, a, b);
    if (b.as_double() == 0.0)
      JINJA_FAIL() << (op == "%" ? "modulo by zero" : "integer division or modulo by zero");
    if (ints) {
      int64_t x = a.as_int(), y = b.as_int();
      int64_t q = floordiv(x, y);
      return Value::integer(op == "//" ? q : x - q * y);
    }
    double x = a.as_double(), y = b.as_double();
    double q = std::floor(x / y);
    if (op == "//") return Value::number(q);
    double m = std::fmod(x, y);
    if (m != 0 && ((m < 0) != (y < 0))) m += y;
    return Value::number(m);
  }
  if (op == "**") {
    if (ints && b.as_int() >= 0) return Value::integer(int_pow(a.as_int(), b.as_int()));
    if (nums) return Value::number(std::pow(a.as_double(), b.as_double()));
    unsupported(op, a, b);
  }
  JINJA_FAIL() << "unknown operator " << op;
}

Value unary_op(const std::string& op, const Value& a) {
  if (op == "not") return Value::boolean(!truthy(a));
  if (a.is_undefined()) fail_undefined(a);
  if (!a.is_number()) JINJA_FAIL() << "bad operand type for unary " << op << ": '" << type_name(a) << "'";
  if (op == "-") return a.is_int() ? Value::integer(-a.as_int()) : Value::number(-a.f);
  return a.is_int() ? Value::integer(a.as_int()) : a;
}

}  // namespace llmctl::jinja
