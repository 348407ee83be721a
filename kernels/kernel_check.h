// Errors raised inside kernels (launch checks, unsupported dtypes): kernels include nothing from
// engine/, so they throw their own KernelError (a std::runtime_error, caught like any engine error
// at the CLI/HTTP boundary). The message reads like LLM_CHECK's:
//   KERNEL_CHECK(n > 0) << "rows " << n;   ->  "check failed: n > 0: rows 0"
#pragma once
#include <sstream>
#include <stdexcept>

namespace llmctl {

class KernelError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

namespace kernels {
// Collects the streamed message and throws when the full expression ends (destructor).
class KernelThrower {
 public:
  explicit KernelThrower(const char* cond) {
    if (cond) os_ << "check failed: " << cond << ": ";
  }
  KernelThrower(const KernelThrower&) = delete;
  template <class T>
  KernelThrower& operator<<(const T& v) {
    os_ << v;
    return *this;
  }
  [[noreturn]] ~KernelThrower() noexcept(false) { throw KernelError(os_.str()); }

 private:
  std::ostringstream os_;
};
}  // namespace kernels

}  // namespace llmctl

#define KERNEL_CHECK(cond) \
  if (cond) {              \
  } else                   \
    ::llmctl::kernels::KernelThrower(#cond)
// A failure with a message only (the caller's own context, e.g. a CUDA error string).
#define KERNEL_FAIL() ::llmctl::kernels::KernelThrower(nullptr)
