// The one error type of shardtrace. Every user-facing failure (bad YAML, unknown key,
// impossible mesh, mismatched einsum, malformed npz) throws Error with a one-line message
// that names the key/file/tensor and what was expected. It is caught once, in main, which
// prints "shardtrace: error: <message>" and exits with status 2. Internal invariants that
// only a bug in shardtrace could break use SHARDTRACE_CHECK instead. An Error also carries the
// warnings (util/warnings.h) that arose before it, so main prints them ahead of its line:
// whatever returns warnings with its result passes them on through WarnedBefore.
#pragma once

#include <fmt/format.h>

#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "util/warnings.h"

namespace shardtrace {

// what() is a C string, so a NUL byte quoted from user input (a key, an axis name) would end
// the message before it says what is wrong: each NUL is kept as the two characters \0.
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(WithVisibleNul(message)) {}
  // A caller that says where a failure happened rethrows its message in a new Error with the
  // old one's warnings.
  Error(const std::string& message, std::vector<Warning> warnings)
      : std::runtime_error(WithVisibleNul(message)), warnings_(std::move(warnings)) {}

  // The warnings found before the failure, in the order they arose.
  const std::vector<Warning>& warnings() const { return warnings_; }
  // Puts `earlier` (found before the warnings already held) first.
  void PrependWarnings(const std::vector<Warning>& earlier);

 private:
  static std::string WithVisibleNul(const std::string& message);  // error.cc
  std::vector<Warning> warnings_;
};

// Runs `work()`; an Error it throws leaves carrying `earlier` ahead of its own warnings. It
// is rethrown unchanged otherwise: main still catches Error once.
template <typename Work>
decltype(auto) WarnedBefore(const std::vector<Warning>& earlier, Work&& work) {
  try {
    return std::forward<Work>(work)();
  } catch (Error& e) {
    e.PrependWarnings(earlier);
    throw;
  }
}

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
