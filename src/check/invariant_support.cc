#include "check/invariant_support.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <numeric>

#include "ir/fact_text.h"

namespace shardtrace::invariant_internal {

// The size of dim `letter` of `t`, when its dims name it.
std::optional<int64_t> DimSize(const TensorRecord& t, char letter) {
  if (t.dims.size() != t.shape.size()) return std::nullopt;
  const size_t at = t.dims.find(letter);
  if (at == std::string::npos) return std::nullopt;
  return t.shape[at];
}

double Sum(const std::vector<double>& v) { return std::accumulate(v.begin(), v.end(), 0.0); }

// A [rows, cols] fact as a matrix; empty when the fact is not 2-D.
std::vector<std::vector<double>> Matrix(const Fact& f) {
  std::vector<std::vector<double>> m;
  if (f.shape.size() != 2) return m;
  for (int64_t r = 0; r < f.shape[0]; ++r)
    m.emplace_back(f.values.begin() + r * f.shape[1], f.values.begin() + (r + 1) * f.shape[1]);
  return m;
}

std::string Vector(const std::vector<double>& v) {
  std::vector<std::string> items;
  for (const double x : v) items.push_back(FactValueText(x));
  return fmt::format("[{}]", fmt::join(items, ", "));
}

std::string Number(double x) { return fmt::format("{:.4g}", x); }

// The numeric capture `name`, or nullptr.
const Array* Captured(const Captures* captures, Capture id) {
  if (!captures) return nullptr;
  const Array* found = captures->Find(id);
  return found && found->numeric() ? found : nullptr;
}

// True when `scope` is `tail` or ends with "/<tail>".
bool ScopeEndsWith(std::string_view scope, std::string_view tail) {
  if (scope == tail) return true;
  return scope.size() > tail.size() && scope.ends_with(tail) &&
         scope[scope.size() - tail.size() - 1] == '/';
}

// The first tensor named `name` in a scope ending with `tail` (any scope when empty).
const TensorRecord* FindTensor(const Trace& trace, std::string_view name, std::string_view tail) {
  for (const TensorRecord& t : trace.tensors)
    if (t.name == name && (tail.empty() || ScopeEndsWith(t.scope, tail))) return &t;
  return nullptr;
}

PartitionSpec::Entry EntryAt(const PartitionSpec* spec, size_t dim) {
  if (!spec || dim >= spec->rank()) return {};
  return (*spec)[dim];
}

// Row `r` of a [rows, cols] capture (or of its first two dims flattened past the first).
std::vector<float> Row(const Array& a, int64_t r) {
  const int64_t cols = a.size() / a.shape[0];
  return {a.values().begin() + r * cols, a.values().begin() + (r + 1) * cols};
}

}  // namespace shardtrace::invariant_internal
