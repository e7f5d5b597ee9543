// Shared plumbing for the numeric ops (einsum.cc, elementwise.cc, reduce.cc, ...): axis
// normalization, numpy broadcasting, row-major permutation and the final conversion of a
// float32 result to the op's output dtype. It is not an op API of its own; the tracer
// should include numeric/ops.h. Keeping these helpers in one place is what makes every op
// spell its errors the same way ("sum: axis 3 is out of range for shape [2,3]") and
// iterate in the same deterministic row-major order.
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <string_view>
#include <vector>

#include "numeric/array.h"
#include "numeric/dtype.h"

namespace shardtrace::op_support {

// True when every array carries data; an op computes numbers only in that case.
bool AllNumeric(std::initializer_list<const Array*> arrays);

// Maps a possibly negative `axis` into [0, rank); Fail()s naming `op` and `shape`.
int64_t NormalizeAxis(std::string_view op, int64_t axis, const Shape& shape);

// Converts a float32 result to what `dtype` can hold: RoundTo for floats and bools, and
// truncation toward zero for int32 (RoundTo leaves ints untouched because it assumes the
// value already is one, which is not true of e.g. Cast(1.7, int32)).
float ConvertTo(DType dtype, float value);

// Applies ConvertTo to every element in place; a no-op for float32.
void ConvertAll(DType dtype, std::vector<float>& values);

// The numpy broadcast of two shapes (right-aligned, 1 stretches); Fail()s naming `op`.
Shape BroadcastShapes(std::string_view op, const Shape& a, const Shape& b);

// Strides for reading an array of shape `in` while walking `out` (the broadcast shape) in
// row-major order: one entry per dim of `out`, 0 where `in` is stretched or absent.
std::vector<int64_t> BroadcastStrides(const Shape& in, const Shape& out);

// Walks `out` in row-major order and calls fn(out_index, offsets) where offsets[i] is the
// flat position in operand i (whose broadcast strides are strides[i]). An odometer keeps
// this O(1) per element amortized and the order is fixed, so results are deterministic.
template <size_t N, typename Fn>
void ForEachBroadcast(const Shape& out, const std::array<std::vector<int64_t>, N>& strides,
                      Fn&& fn) {
  const int64_t total = NumElements(out);
  const size_t rank = out.size();
  std::vector<int64_t> index(rank, 0);
  std::array<int64_t, N> offsets{};
  for (int64_t i = 0; i < total; ++i) {
    fn(i, offsets);
    for (size_t d = rank; d-- > 0;) {
      ++index[d];
      for (size_t k = 0; k < N; ++k) offsets[k] += strides[k][d];
      if (index[d] < out[d]) break;
      for (size_t k = 0; k < N; ++k) offsets[k] -= strides[k][d] * out[d];
      index[d] = 0;
    }
  }
}

// Checks that `perm` is a permutation of [0, rank); Fail()s naming `op` and `shape`.
void CheckPermutation(std::string_view op, const std::vector<int64_t>& perm, const Shape& shape);

// The shape after permuting: result[i] = shape[perm[i]].
Shape PermuteShape(const Shape& shape, const std::vector<int64_t>& perm);

// True when `perm` is 0, 1, ..., n-1 (permuting by it is a no-op).
bool IsIdentity(const std::vector<int64_t>& perm);

// Row-major data of the transposed array (result dim i is input dim perm[i]).
// REQUIRES a valid permutation and data.size() == NumElements(shape).
std::vector<float> PermuteData(const std::vector<float>& data, const Shape& shape,
                               const std::vector<int64_t>& perm);

// The data of an array of `shape` with the dims `axes` (distinct, normalized) moved last,
// keeping the relative order of both groups: `rows` runs of `run` contiguous elements, one
// run per output element of a reduction over `axes`.
struct GroupedRuns {
  std::vector<float> data;
  int64_t rows = 1;
  int64_t run = 1;
};
GroupedRuns MoveAxesLast(const std::vector<float>& data, const Shape& shape,
                         const std::vector<int64_t>& axes);

// Sums the data of an array of `shape` over `axes` (distinct, normalized) in float32,
// visiting each output's inputs in row-major order of the summed dims; returns the data of
// shape `shape` without `axes`. No rounding: callers convert once at the end.
std::vector<float> SumOverAxes(const std::vector<float>& data, const Shape& shape,
                               const std::vector<int64_t>& axes);

// Views `shape` around `axis` as [outer, n, inner] so per-axis loops need no index math.
struct AxisView {
  int64_t outer = 1;
  int64_t n = 1;
  int64_t inner = 1;
};
AxisView ViewAroundAxis(const Shape& shape, int64_t axis);

}  // namespace shardtrace::op_support
