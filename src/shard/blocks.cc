#include "shard/blocks.h"

#include "shard/mesh.h"
#include "util/error.h"

namespace shardtrace {

std::vector<std::pair<int64_t, int64_t>> BlockBounds(const Shape& global, const PartitionSpec& spec,
                                                     const Mesh& mesh, int64_t device) {
  SHARDTRACE_CHECK(spec.rank() == global.size());
  std::vector<std::pair<int64_t, int64_t>> box;
  for (size_t d = 0; d < global.size(); ++d) {
    const int64_t parts = mesh.Size(spec[d]);
    const int64_t size = global[d] / parts;
    const int64_t index = parts > 1 ? mesh.AxisIndex(device, spec[d]) : 0;
    box.emplace_back(index * size, size);
  }
  return box;
}

namespace {

// Calls visit(src_offset, dst_offset, run) for each contiguous innermost run of the box.
template <typename Visit>
void ForEachRun(const Shape& full, const std::vector<std::pair<int64_t, int64_t>>& box,
                Visit visit) {
  const size_t rank = full.size();
  if (rank == 0) {
    visit(0, 0, 1);
    return;
  }
  const std::vector<int64_t> strides = Strides(full);
  Shape box_shape;
  for (const auto& [start, size] : box) box_shape.push_back(size);
  if (NumElements(box_shape) == 0) return;
  const std::vector<int64_t> box_strides = Strides(box_shape);
  std::vector<int64_t> index(rank, 0);
  const int64_t run = box_shape[rank - 1];
  const int64_t outer = NumElements(box_shape) / run;
  for (int64_t o = 0; o < outer; ++o) {
    int64_t src = 0, dst = 0;
    for (size_t d = 0; d < rank; ++d) {
      src += (box[d].first + index[d]) * strides[d];
      dst += index[d] * box_strides[d];
    }
    visit(src, dst, run);
    for (int d = static_cast<int>(rank) - 2; d >= 0; --d) {
      if (++index[d] < box_shape[d]) break;
      index[d] = 0;
    }
  }
}

}  // namespace

Array SliceBox(const Array& a, const std::vector<std::pair<int64_t, int64_t>>& box) {
  SHARDTRACE_CHECK(box.size() == a.shape.size());
  Shape shape;
  for (size_t d = 0; d < box.size(); ++d) {
    SHARDTRACE_CHECK(box[d].first >= 0 && box[d].first + box[d].second <= a.shape[d]);
    shape.push_back(box[d].second);
  }
  if (!a.numeric()) return Array::Symbolic(shape, a.dtype);
  if (shape == a.shape) return a;  // a replicated block is the whole array: share it
  const std::vector<float>& src = a.values();
  std::vector<float> dst(static_cast<size_t>(NumElements(shape)));
  ForEachRun(a.shape, box, [&](int64_t s, int64_t d, int64_t n) {
    std::copy(src.begin() + s, src.begin() + s + n, dst.begin() + d);
  });
  return Array::FromData(std::move(shape), a.dtype, std::move(dst));
}

void PasteBox(Array& target, const Array& block,
              const std::vector<std::pair<int64_t, int64_t>>& box) {
  if (!target.numeric() || !block.numeric()) return;
  const std::vector<float>& src = block.values();
  std::vector<float>& dst = target.mutable_values();
  ForEachRun(target.shape, box, [&](int64_t t, int64_t b, int64_t n) {
    std::copy(src.begin() + b, src.begin() + b + n, dst.begin() + t);
  });
}

}  // namespace shardtrace
