// Device blocks of a sharded array: what shard_map hands each virtual device, and how the
// per-device results are put back together. Block (d) of dim i with spec entry (a1, a2)
// is block number AxisIndex(device, {a1, a2}) (a1 major), of size dim / (|a1|*|a2|).
#pragma once

#include <cstdint>
#include <vector>

#include "numeric/array.h"
#include "shard/partition_spec.h"

namespace shardtrace {

class Mesh;

// Start offset and size of `device`'s block in each dim. REQUIRES dims divisible.
std::vector<std::pair<int64_t, int64_t>> BlockBounds(const Shape& global, const PartitionSpec& spec,
                                                     const Mesh& mesh, int64_t device);
// Copies the box [start, start+size) of each dim out of `a` (numeric or symbolic).
Array SliceBox(const Array& a, const std::vector<std::pair<int64_t, int64_t>>& box);
// Writes `block` into `target` at the box's starts.
void PasteBox(Array& target, const Array& block,
              const std::vector<std::pair<int64_t, int64_t>>& box);

}  // namespace shardtrace
