// The one error type of shardtrace. Every user-facing failure (bad YAML, unknown key,
// impossible mesh, mismatched einsum, malformed npz) throws Error with a one-line message
// that names the key/file/tensor and what was expected. It is caught once, in main, which
// prints "shardtrace: error: <message>" and exits with status 2. Internal invariants that
// only a bug in shardtrace could break use SHARDTRACE_CHECK instead.
#pragma once

#include <fmt/format.h>

#include <stdexcept>
#include <string>

namespace shardtrace {

// what() is a C string, so a NUL byte quoted from user input (a key, an axis name) would end
// the message before it says what is wrong: each NUL is kept as the two characters \0.
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(WithVisibleNul(message)) {}

 private:
  static std::string WithVisibleNul(const std::string& message);  // error.cc
};

// Throws Error with an fmt-formatted message.
template <typename... Args>
[[noreturn]] void Fail(fmt::format_string<Args...> format, Args&&... args) {
  throw Error(fmt::format(format, std::forward<Args>(args)...));
}

}  // namespace shardtrace

// A broken internal invariant: a shardtrace bug, not a user error.
#define SHARDTRACE_CHECK(cond)                                                                \
  do {                                                                                        \
    if (!(cond))                                                                              \
      throw std::logic_error(std::string("internal check failed: " #cond " at ") + __FILE__ + \
                             ":" + std::to_string(__LINE__));                                 \
  } while (0)
