// Errors are exceptions with context, thrown inside the engine and caught only at the CLI and
// HTTP boundary. Usage:
//   LLM_CHECK(n < limit) << "tensor " << name << " has " << n << " elements";
//   LLM_THROW() << "unknown architecture '" << arch << "'";
#pragma once
#include <sstream>
#include <stdexcept>
#include <string>

namespace llmctl {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Bad input from a user (file, flag, request): reported without source locations.
class InputError : public Error {
 public:
  using Error::Error;
};

namespace detail {
// Collects a message and throws when the full expression ends (destructor).
template <class E>
class Thrower {
 public:
  explicit Thrower(const char* cond) {
    if (cond) os_ << "check failed: " << cond << ": ";
  }
  Thrower(const Thrower&) = delete;
  template <class T>
  Thrower& operator<<(const T& v) {
    os_ << v;
    return *this;
  }
  [[noreturn]] ~Thrower() noexcept(false) { throw E(os_.str()); }

 private:
  std::ostringstream os_;
};
}  // namespace detail

}  // namespace llmctl

// Internal invariant: the condition text is part of the message.
#define LLM_CHECK(cond) \
  if (cond) {           \
  } else                \
    ::llmctl::detail::Thrower<::llmctl::Error>(#cond)
// Bad input: the message alone, meant for the user.
#define LLM_REQUIRE(cond) \
  if (cond) {             \
  } else                  \
    ::llmctl::detail::Thrower<::llmctl::InputError>(nullptr)
#define LLM_THROW() ::llmctl::detail::Thrower<::llmctl::InputError>(nullptr)
