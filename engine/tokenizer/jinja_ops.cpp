// Arithmetic with Python's rules: int op int stays int (except '/'), floor division and modulo
// round toward negative infinity, str and list support + and * like Python sequences.
#include <cmath>

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
