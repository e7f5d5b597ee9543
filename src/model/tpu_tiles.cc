#include "model/tpu_tiles.h"

#include <algorithm>
#include <limits>

#include "numeric/dtype.h"
#include "util/checked.h"

namespace shardtrace::model_internal {
namespace {

constexpr int64_t kLanes = 128;
constexpr int64_t kRows = kTpuTileRows;
constexpr int64_t kVectorTile = 1024;  // a rank-1 array's tile, from this many elements

int64_t RoundUp(int64_t n, int64_t to) { return (n + to - 1) / to * to; }

// A row dim of fewer than 8 takes the smallest of 1, 2 and 4 rows that holds it.
int64_t Rows(int64_t n) {
  if (n >= kRows) return RoundUp(n, kRows);
  int64_t rows = 1;
  while (rows < n) rows *= 2;
  return rows;
}

// Elements of an array whose `lanes` dim is on the lanes and `rows` dim on the rows, padded to
// their tiles.
int64_t TiledElements(int64_t elements, int64_t lanes, int64_t rows) {
  if (lanes == 0 || rows == 0) return 0;
  return CheckedMul(CheckedMul(elements / lanes / rows, RoundUp(lanes, kLanes), "array bytes"),
                    Rows(rows), "array bytes");
}

}  // namespace

int64_t TpuRestingBytes(const Shape& local_shape, DType dtype) {
  const int64_t element = ByteSize(dtype);
  const size_t rank = local_shape.size();
  if (rank == 0) return element;
  if (rank == 1) {
    const int64_t n = local_shape[0];
    return CheckedMul(RoundUp(n, n >= kVectorTile ? kVectorTile : kLanes), element, "array bytes");
  }
  const int64_t elements = NumElements(local_shape);
  if (elements == 0) return 0;
  int64_t best = std::numeric_limits<int64_t>::max();
  for (size_t lane = 0; lane < rank; ++lane) {
    for (size_t row = 0; row < rank; ++row) {
      if (row == lane) continue;
      best = std::min(best, TiledElements(elements, local_shape[lane], local_shape[row]));
    }
  }
  return CheckedMul(best, element, "array bytes");
}

int64_t TpuInOrderBytes(const Shape& local_shape, DType dtype) {
  const size_t rank = local_shape.size();
  if (rank < 2) return TpuRestingBytes(local_shape, dtype);
  return CheckedMul(
      TiledElements(NumElements(local_shape), local_shape[rank - 1], local_shape[rank - 2]),
      ByteSize(dtype), "array bytes");
}

}  // namespace shardtrace::model_internal
