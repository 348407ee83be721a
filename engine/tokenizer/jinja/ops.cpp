// Arithmetic with Python's rules: int op int stays int (except '/'), floor division and modulo
// round toward negative infinity, str and list support + and * like Python sequences.
// Python ints are unbounded; here they are 64-bit, and a result that does not fit is an error
// (never wraparound or a trap: INT64_MIN // -1 and friends are checked).
#include <cmath>
#include <cstdio>
#include <limits>

#include "engine/tokenizer/jinja/builtins.h"
#include "engine/tokenizer/jinja/limits.h"
#include "engine/tokenizer/jinja/unicode.h"
#include "engine/tokenizer/jinja/value.h"

namespace llmctl::jinja {

namespace {

[[noreturn]] void unsupported(const std::string& op, const Value& a, const Value& b) {
  JINJA_FAIL() << "unsupported operand type(s) for " << op << ": '" << type_name(a) << "' and '"
               << type_name(b) << "'";
}

[[noreturn]] void overflow(const char* op, int64_t a, int64_t b) {
  JINJA_FAIL() << "integer overflow in template: " << a << " " << op << " " << b << " does not fit in 64 bits";
}

int64_t add(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_add_overflow(a, b, &r)) overflow("+", a, b);
  return r;
}
int64_t sub(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_sub_overflow(a, b, &r)) overflow("-", a, b);
  return r;
}
int64_t mul(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_mul_overflow(a, b, &r)) overflow("*", a, b);
  return r;
}

// Python's // and % (b != 0). INT64_MIN / -1 is the one quotient that does not fit (and traps
// in hardware); INT64_MIN % -1 is 0.
int64_t floordiv(int64_t a, int64_t b) {
  if (b == -1) return sub(0, a);
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}
int64_t floormod(int64_t a, int64_t b) {
  if (b == -1) return 0;
  int64_t r = a % b;
  if (r != 0 && ((r < 0) != (b < 0))) r += b;
  return r;
}

// Square and multiply: at most 63 rounds whatever the exponent, and each product is checked.
int64_t int_pow(int64_t base, int64_t exp) {
  const int64_t base0 = base, exp0 = exp;
  int64_t r = 1;
  while (true) {
    if (exp & 1) {
      if (__builtin_mul_overflow(r, base, &r)) overflow("**", base0, exp0);
    }
    exp >>= 1;
    if (!exp) return r;
    if (__builtin_mul_overflow(base, base, &base)) overflow("**", base0, exp0);
  }
}

// Bytes a list's items take, counting each item's own string (not nested containers: shared).
size_t items_bytes(const std::vector<Value>& items) {
  size_t n = items.size() * sizeof(Value);
  for (const auto& v : items) n += v.s.size();
  return n;
}

size_t times(size_t unit, int64_t n) {
  size_t total;
  if (n <= 0) return 0;
  if (__builtin_mul_overflow(unit, static_cast<uint64_t>(n), &total)) return std::numeric_limits<size_t>::max();
  return total;
}

Value repeat(const Value& seq, int64_t n) {
  if (seq.is_string()) {
    check_size(times(seq.s.size(), n), "'*' (string repetition)");
    std::string out;
    for (int64_t k = 0; k < n; ++k) out += seq.s;
    return Value::string(std::move(out));
  }
  check_size(times(items_bytes(seq.list->items), n), "'*' (list repetition)");
  charge(static_cast<int64_t>(times(seq.list->items.size(), n)));
  std::vector<Value> out;
  for (int64_t k = 0; k < n; ++k)
    out.insert(out.end(), seq.list->items.begin(), seq.list->items.end());
  return Value::make_list(std::move(out), seq.list->is_tuple);
}

}  // namespace

int64_t float_to_int(double d) {
  if (std::isnan(d)) JINJA_FAIL() << "cannot convert float NaN to integer";
  const double limit = std::ldexp(1.0, 63);
  if (!(d >= -limit && d < limit))
    JINJA_FAIL() << "integer overflow in template: " << py_float_repr(d) << " does not fit in 64 bits";
  return static_cast<int64_t>(d);
}

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
    size_t number = 0;  // width or precision being read: printf would pad to any size it is given
    while (i < fmt.size() && ((fmt[i] >= '0' && fmt[i] <= '9') || fmt[i] == '.')) {
      number = fmt[i] == '.' ? 0 : number * 10 + static_cast<size_t>(fmt[i] - '0');
      if (number > max_value_bytes() || number > 1'000'000'000) check_size(number, "'%' format width");
      spec += fmt[i++];
    }
    if (i >= fmt.size()) JINJA_FAIL() << "incomplete format";
    char conv = fmt[i];
    if (!arg) {
      if (next >= pos.size()) JINJA_FAIL() << "not enough arguments for format string";
      arg = &pos[next++];
    }
    // printf into a buffer of the size it asks for, within the output limit.
    auto emit = [&](const std::string& f, auto value) {
      int n = std::snprintf(nullptr, 0, f.c_str(), value);
      if (n < 0) JINJA_FAIL() << "bad format '" << f << "'";
      check_size(out.size() + static_cast<size_t>(n), "'%' formatting");
      std::string buf(static_cast<size_t>(n) + 1, '\0');
      std::snprintf(buf.data(), buf.size(), f.c_str(), value);
      buf.resize(static_cast<size_t>(n));
      out += buf;
    };
    switch (conv) {
      case 's':
      case 'r': {
        std::string v = conv == 's' ? to_str(*arg) : repr(*arg);
        if (spec == "%") out += v;
        else emit(spec + "s", v.c_str());
        break;
      }
      case 'c':
        if (arg->is_string() && length(*arg) == 1) {
          out += arg->s;
          break;
        }
        if (!arg->is_int()) JINJA_FAIL() << "%c requires int or char";
        if (arg->as_int() < 0 || arg->as_int() > 0x10FFFF) JINJA_FAIL() << "%c arg not in range(0x110000)";
        utf8_append(out, static_cast<char32_t>(arg->as_int()));
        break;
      case 'd': case 'i': case 'x': case 'X': case 'o':
        if (!arg->is_number()) JINJA_FAIL() << "%" << conv << " format: a real number is required, not " << type_name(*arg);
        emit(spec + "ll" + (conv == 'i' ? 'd' : conv),
             static_cast<long long>(arg->is_int() ? arg->as_int() : float_to_int(arg->f)));
        break;
      case 'f': case 'F': case 'e': case 'E': case 'g': case 'G':
        if (!arg->is_number()) JINJA_FAIL() << "must be real number, not " << type_name(*arg);
        emit(spec + conv, arg->as_double());
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
    if (ints) return Value::integer(add(a.as_int(), b.as_int()));
    if (nums) return Value::number(a.as_double() + b.as_double());
    if (a.is_string() && b.is_string()) {
      if (a.markup || b.markup) {  // Markup + str, str + Markup: the plain side escaped
        const std::string l = a.markup ? a.s : escape_html(a.s), r = b.markup ? b.s : escape_html(b.s);
        check_size(l.size() + r.size(), "'+'");
        return markup(l + r);
      }
      check_size(a.s.size() + b.s.size(), "'+'");
      return Value::string(a.s + b.s);
    }
    if (a.is_list() && b.is_list() && a.list->is_tuple == b.list->is_tuple) {
      check_size(items_bytes(a.list->items) + items_bytes(b.list->items), "'+'");
      charge(static_cast<int64_t>(a.list->items.size() + b.list->items.size()));
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
    if (ints) return Value::integer(sub(a.as_int(), b.as_int()));
    if (nums) return Value::number(a.as_double() - b.as_double());
    unsupported(op, a, b);
  }
  if (op == "*") {
    if (ints) return Value::integer(mul(a.as_int(), b.as_int()));
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
      return Value::integer(op == "//" ? floordiv(x, y) : floormod(x, y));
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
  if (op == "-") return a.is_int() ? Value::integer(sub(0, a.as_int())) : Value::number(-a.f);
  return a.is_int() ? Value::integer(a.as_int()) : a;
}

}  // namespace llmctl::jinja
