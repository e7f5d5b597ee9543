// Sharding of one concrete tensor: its global shape and dtype placed on a mesh by a
// PartitionSpec, giving the per-device local shape and bytes. A dimension that its mesh
// axes do not divide is padded by XLA (local size = ceil); that is reported as a warning
// for sharding constraints, and is an error where JAX rejects it (shard_map specs).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "numeric/array.h"
#include "shard/partition_spec.h"

namespace shardtrace {

class Mesh;

struct Sharding {
  Shape global_shape;
  DType dtype = DType::kFloat32;
  PartitionSpec spec;
  Shape local_shape;
  int64_t bytes_per_device = 0;
  std::vector<std::string> warnings;  // uneven divisions, one line each
};

enum class Divisibility { kWarn, kRequire };

// REQUIRES spec.rank() == shape.size() (else Error naming `tensor`).
Sharding ShardTensor(const std::string& tensor, const Shape& shape, DType dtype,
                     const PartitionSpec& spec, const Mesh& mesh,
                     Divisibility divisibility = Divisibility::kWarn);

// Bytes of a whole (unsharded) tensor.
int64_t TensorBytes(const Shape& shape, DType dtype);

}  // namespace shardtrace
