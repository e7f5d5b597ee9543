#include "shard/sharding.h"

#include <fmt/format.h>

#include "shard/mesh.h"
#include "util/checked.h"
#include "util/error.h"

namespace shardtrace {

int64_t TensorBytes(const Shape& shape, DType dtype) {
  return CheckedMul(
      NumElements(shape), ByteSize(dtype),
      fmt::format("bytes of a {} tensor of shape {}", ToString(dtype), ShapeToString(shape)));
}

Sharding ShardTensor(const std::string& tensor, const Shape& shape, DType dtype,
                     const PartitionSpec& spec, const Mesh& mesh, Divisibility divisibility) {
  if (spec.rank() != shape.size())
    Fail("tensor '{}': PartitionSpec {} has rank {} but the shape {} has rank {}", tensor,
         spec.ToString(), spec.rank(), ShapeToString(shape), shape.size());
  Sharding s{shape, dtype, spec, shape, 0, {}};
  for (size_t d = 0; d < shape.size(); ++d) {
    const int64_t parts = mesh.Size(spec[d]);
    if (parts <= 1) continue;
    if (shape[d] % parts != 0) {
      const std::string message =
          fmt::format("tensor '{}' dim {} of size {} is not divisible by {} = {} devices", tensor,
                      d, shape[d], PartitionSpec::EntryToString(spec[d]), parts);
      if (divisibility == Divisibility::kRequire) throw Error(message);
      s.warnings.push_back(message + " (XLA pads it)");
    }
    s.local_shape[d] = (shape[d] + parts - 1) / parts;
  }
  s.bytes_per_device = TensorBytes(s.local_shape, dtype);
  return s;
}

}  // namespace shardtrace
