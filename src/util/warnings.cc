#include "util/warnings.h"

#include <iostream>
#include <mutex>
#include <set>
#include <string>

#include "util/printable.h"

namespace shardtrace {
namespace {

std::mutex& WarningsMutex() {
  static std::mutex mutex;
  return mutex;
}

std::set<std::string>& Printed() {
  static std::set<std::string> printed;
  return printed;
}

}  // namespace

void Warn(std::string_view message) {
  const std::string line = PrintableMessage(message);
  const std::lock_guard<std::mutex> lock(WarningsMutex());
  if (!Printed().insert(line).second) return;
  std::cerr << "shardtrace: warning: " << line << "\n";
}

void ResetWarnings() {
  const std::lock_guard<std::mutex> lock(WarningsMutex());
  Printed().clear();
}

}  // namespace shardtrace
