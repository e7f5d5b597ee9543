#include "shard/sharding.h"

#include <fmt/format.h>

#include "shard/mesh.h"
#include "util/checked.h"
#include "util/error.h"

namespace shardtrace {

int64_t TensorBytes(const Shape& shape, DType dtype) {
  return CheckedMul(NumElements(shape), ByteSize(dtype), [&] {
    return fmt::format("bytes of a {} tensor of shape {}", ToString(dtype), ShapeToString(shape));
  });
}

Sharding ShardTensor(const std::string& tensor, const Shape& shape, DType dtype,
                     const PartitionSpec& spec, const Mesh& mesh, Divisibility divisibility) {
  if (spec.rank() != shape.size())
    Fail("tensor '{}': PartitionSpec {} has rank {} but the shape {} has rank {}", tensor,
         spec.ToString(), spec.rank(), ShapeToString(shape), shape.size());
  NumElements(shape);  // a negative dim or an overflowing count, named by the shape as given
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
    // XLA pads the dim up to the next multiple of its shards. That size is checked before the
    // division: a dim near 2^63 wrapped to a negative local size, reported as that number.
    const int64_t padded = CheckedAdd(shape[d], (parts - shape[d] % parts) % parts, [&] {
      return fmt::format("tensor '{}' dim {} of size {} padded to a multiple of {} = {} devices",
                         tensor, d, shape[d], PartitionSpec::EntryToString(spec[d]), parts);
    });
    s.local_shape[d] = padded / parts;
  }
  s.bytes_per_device = CheckedMul(NumElements(s.local_shape), ByteSize(dtype), [&] {
    return fmt::format("tensor '{}' of shape {}: the {} bytes per device", tensor,
                       ShapeToString(shape), ToString(dtype));
  });
  return s;
}

}  // namespace shardtrace
