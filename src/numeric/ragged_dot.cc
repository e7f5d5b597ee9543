#include "numeric/ragged_dot.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "numeric/gemm.h"
#include "numeric/op_support.h"
#include "util/error.h"
#include "util/thread_pool.h"

namespace shardtrace {

Array RaggedDot(const Array& lhs, const Array& rhs, const Array& group_sizes, DType out_dtype,
                ThreadPool* pool) {
  const std::string shapes =
      fmt::format("lhs {}, rhs {}, group_sizes {}", ShapeToString(lhs.shape),
                  ShapeToString(rhs.shape), ShapeToString(group_sizes.shape));
  if (lhs.rank() != 2 || rhs.rank() != 3 || group_sizes.rank() != 1) {
    Fail("ragged_dot: expected lhs [N,K], rhs [G,K,O], group_sizes [G]; got {}", shapes);
  }
  if (lhs.shape[1] != rhs.shape[1]) {
    Fail("ragged_dot: lhs dim K is {} but rhs has {} ({})", lhs.shape[1], rhs.shape[1], shapes);
  }
  if (group_sizes.shape[0] != rhs.shape[0]) {
    Fail("ragged_dot: group_sizes has {} groups but rhs has G={} ({})", group_sizes.shape[0],
         rhs.shape[0], shapes);
  }
  if (group_sizes.dtype != DType::kInt32) {
    Fail("ragged_dot: group_sizes must be int32, got {} ({})", ToString(group_sizes.dtype), shapes);
  }
  const int64_t n = lhs.shape[0];
  const int64_t k = lhs.shape[1];
  const int64_t o = rhs.shape[2];
  Shape shape = {n, o};
  if (!op_support::AllNumeric({&lhs, &rhs, &group_sizes})) {
    return Array::Symbolic(std::move(shape), out_dtype);
  }
  std::vector<float> out(static_cast<size_t>(n * o), 0.0f);
  // Each group's rows first (serially: errors name the first bad group), then the groups'
  // GEMMs in parallel: they write disjoint rows, so the result does not depend on order.
  const int64_t groups = rhs.shape[0];
  std::vector<int64_t> first_row(static_cast<size_t>(groups) + 1, 0);
  int64_t row = 0;
  for (int64_t g = 0; g < groups; ++g) {
    const float size = group_sizes.values()[g];
    if (size < 0) Fail("ragged_dot: group_sizes[{}] is {}, must be >= 0 ({})", g, size, shapes);
    first_row[g] = row;
    row += std::max<int64_t>(std::min(static_cast<int64_t>(size), n - row), 0);
  }
  first_row[groups] = row;
  const float* a_data = lhs.values().data();
  const float* b_data = rhs.values().data();
  ParallelFor(pool, groups, [&](int64_t g) {
    const int64_t rows = first_row[g + 1] - first_row[g];
    if (rows <= 0 || k <= 0 || o <= 0) return;
    MatMul(a_data + first_row[g] * k, b_data + g * k * o, out.data() + first_row[g] * o, rows, k,
           o);
  });
  op_support::ConvertAll(out_dtype, out);
  return Array::FromData(std::move(shape), out_dtype, std::move(out));
}

}  // namespace shardtrace
