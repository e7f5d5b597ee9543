#include "numeric/sort_ops.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <utility>

#include "numeric/op_support.h"
#include "util/error.h"

namespace shardtrace {

namespace {

// Strict ascending order with NaN last (a total preorder, so sorting is well defined).
bool AscendingNanLast(float x, float y) {
  if (std::isnan(x)) return false;
  if (std::isnan(y)) return true;
  return x < y;
}

// For each line along `axis`, the positions 0..n-1 stably sorted ascending by value.
std::vector<int64_t> StableOrder(const Array& a, int64_t axis) {
  const op_support::AxisView view = op_support::ViewAroundAxis(a.shape, axis);
  const std::vector<float>& x = a.values();
  std::vector<int64_t> order(x.size());
  std::vector<int64_t> line(static_cast<size_t>(view.n));
  for (int64_t o = 0; o < view.outer; ++o) {
    for (int64_t in = 0; in < view.inner; ++in) {
      const int64_t base = o * view.n * view.inner + in;
      std::iota(line.begin(), line.end(), 0);
      std::stable_sort(line.begin(), line.end(), [&](int64_t i, int64_t j) {
        return AscendingNanLast(x[base + i * view.inner], x[base + j * view.inner]);
      });
      for (int64_t i = 0; i < view.n; ++i) order[base + i * view.inner] = line[i];
    }
  }
  return order;
}

}  // namespace

TopKResult TopK(const Array& a, int64_t k) {
  if (a.rank() == 0) Fail("top_k: operand must have rank >= 1, got shape []");
  const int64_t n = a.shape.back();
  if (k < 0 || k > n) {
    Fail("top_k: k={} is out of range for shape {} (last dim is {})", k, ShapeToString(a.shape), n);
  }
  Shape shape = a.shape;
  shape.back() = k;
  if (!a.numeric()) {
    return {Array::Symbolic(shape, a.dtype), Array::Symbolic(shape, DType::kInt32)};
  }
  const std::vector<float>& x = a.values();
  const int64_t rows = n == 0 ? 0 : a.size() / n;
  std::vector<float> values(static_cast<size_t>(rows * k));
  std::vector<float> indices(static_cast<size_t>(rows * k));
  std::vector<int64_t> line(static_cast<size_t>(n));
  for (int64_t r = 0; r < rows; ++r) {
    const float* row = x.data() + r * n;
    std::iota(line.begin(), line.end(), 0);
    // Descending by value, then ascending by index: a total order, so partial_sort is
    // deterministic and ties go to the lower index like jax.lax.top_k.
    std::partial_sort(line.begin(), line.begin() + k, line.end(), [&](int64_t i, int64_t j) {
      if (AscendingNanLast(row[j], row[i])) return true;
      if (AscendingNanLast(row[i], row[j])) return false;
      return i < j;
    });
    for (int64_t i = 0; i < k; ++i) {
      values[r * k + i] = row[line[i]];
      indices[r * k + i] = static_cast<float>(line[i]);
    }
  }
  return {Array::FromData(shape, a.dtype, std::move(values)),
          Array::FromData(shape, DType::kInt32, std::move(indices))};
}

Array ArgsortStable(const Array& a, int64_t axis) {
  const int64_t ax = op_support::NormalizeAxis("argsort", axis, a.shape);
  if (!a.numeric()) return Array::Symbolic(a.shape, DType::kInt32);
  const std::vector<int64_t> order = StableOrder(a, ax);
  return Array::FromData(a.shape, DType::kInt32, std::vector<float>(order.begin(), order.end()));
}

Array SortStable(const Array& a, int64_t axis) {
  const int64_t ax = op_support::NormalizeAxis("sort", axis, a.shape);
  if (!a.numeric()) return Array::Symbolic(a.shape, a.dtype);
  const std::vector<int64_t> order = StableOrder(a, ax);
  const op_support::AxisView view = op_support::ViewAroundAxis(a.shape, ax);
  const std::vector<float>& x = a.values();
  std::vector<float> sorted(x.size());
  for (int64_t o = 0; o < view.outer; ++o) {
    for (int64_t in = 0; in < view.inner; ++in) {
      const int64_t base = o * view.n * view.inner + in;
      for (int64_t i = 0; i < view.n; ++i) {
        sorted[base + i * view.inner] = x[base + order[base + i * view.inner] * view.inner];
      }
    }
  }
  return Array::FromData(a.shape, a.dtype, std::move(sorted));
}

}  // namespace shardtrace
