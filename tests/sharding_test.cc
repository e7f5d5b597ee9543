// Tests for ShardTensor: per-device local shapes and bytes of a tensor placed on a mesh by
// a PartitionSpec, the XLA padding warning for uneven dims, and the strict mode used for
// shard_map specs.
#include "shard/sharding.h"

#include <catch2/catch.hpp>
#include <cstdint>
#include <string>
#include <vector>

#include "shard/mesh.h"
#include "shard/partition_spec.h"
#include "util/error.h"

namespace shardtrace {
namespace {

using Entries = std::vector<PartitionSpec::Entry>;

// Mesh A of facts 2.5: fsdp 4 x expert 2 (plus a size-1 tensor axis).
Mesh MeshA() { return Mesh({{"fsdp", 4, 4, 1}, {"tensor", 1, 1, 1}, {"expert", 2, 2, 1}}); }

const PartitionSpec kExpertFsdp(Entries{{"expert"}, {"fsdp"}, {}});

TEST_CASE("ShardTensor divides each dim by the product of its mesh axes", "[shard][sharding]") {
  const Sharding s = ShardTensor("wi_0", {64, 2048, 1408}, DType::kBfloat16, kExpertFsdp, MeshA());
  CHECK(s.global_shape == Shape{64, 2048, 1408});
  CHECK(s.local_shape == Shape{32, 512, 1408});
  CHECK(s.bytes_per_device == int64_t{32} * 512 * 1408 * 2);
  CHECK(s.dtype == DType::kBfloat16);
  CHECK(s.spec == kExpertFsdp);
  CHECK(s.warnings.empty());

  const Sharding both =
      ShardTensor("x", {16, 7, 4}, DType::kFloat32,
                  PartitionSpec(Entries{{"fsdp", "expert"}, {}, {"tensor"}}), MeshA());
  CHECK(both.local_shape == Shape{2, 7, 4});
  CHECK(both.bytes_per_device == 2 * 7 * 4 * 4);
  CHECK(both.warnings.empty());
}

TEST_CASE("Bytes per device use the dtype's size", "[shard][sharding]") {
  const Shape shape = {64, 2048, 1408};
  const int64_t local_elements = int64_t{32} * 512 * 1408;
  struct Case {
    DType dtype;
    int64_t bytes;
  };
  for (const Case& c : {Case{DType::kBfloat16, 2}, Case{DType::kFloat32, 4}, Case{DType::kInt32, 4},
                        Case{DType::kBool, 1}}) {
    INFO(ToString(c.dtype));
    const Sharding s = ShardTensor("t", shape, c.dtype, kExpertFsdp, MeshA());
    CHECK(s.local_shape == Shape{32, 512, 1408});
    CHECK(s.bytes_per_device == local_elements * c.bytes);
    CHECK(TensorBytes(shape, c.dtype) == int64_t{64} * 2048 * 1408 * c.bytes);
  }
}

TEST_CASE("A replicated spec keeps the global shape on every device", "[shard][sharding]") {
  const Sharding s =
      ShardTensor("r", {3, 5}, DType::kFloat32, PartitionSpec::Replicated(2), MeshA());
  CHECK(s.local_shape == Shape{3, 5});
  CHECK(s.bytes_per_device == 60);
  // Axes the mesh does not have, or of size 1, do not split.
  const Sharding t = ShardTensor("t", {3, 5}, DType::kFloat32,
                                 PartitionSpec(Entries{{"tensor"}, {"ghost"}}), MeshA());
  CHECK(t.local_shape == Shape{3, 5});
  CHECK(t.warnings.empty());
}

TEST_CASE("An uneven dim is padded and warned about by tensor and dim and size and axes",
          "[shard][sharding]") {
  const Sharding s =
      ShardTensor("gate_logits", {64, 10, 1408}, DType::kFloat32, kExpertFsdp, MeshA());
  CHECK(s.local_shape == Shape{32, 3, 1408});  // ceil(10 / 4)
  CHECK(s.bytes_per_device == int64_t{32} * 3 * 1408 * 4);
  REQUIRE(s.warnings.size() == 1);
  const std::string& w = s.warnings[0];
  CHECK_THAT(w, Catch::Contains("gate_logits") && Catch::Contains("dim 1") &&
                    Catch::Contains("10") && Catch::Contains("'fsdp'") && Catch::Contains("4"));

  const Sharding multi =
      ShardTensor("inputs", {12, 6}, DType::kBfloat16,
                  PartitionSpec(Entries{{"fsdp", "expert"}, {"tensor"}}), MeshA());
  CHECK(multi.local_shape == Shape{2, 6});
  REQUIRE(multi.warnings.size() == 1);
  CHECK_THAT(multi.warnings[0], Catch::Contains("inputs") && Catch::Contains("dim 0") &&
                                    Catch::Contains("12") &&
                                    Catch::Contains("('fsdp', 'expert')") && Catch::Contains("8"));

  const Sharding two = ShardTensor("w", {3, 6, 5}, DType::kBool, kExpertFsdp, MeshA());
  CHECK(two.local_shape == Shape{2, 2, 5});
  CHECK(two.warnings.size() == 2);
}

TEST_CASE("Divisibility::kRequire turns an uneven dim into an Error", "[shard][sharding]") {
  CHECK_THROWS_AS(ShardTensor("ragged", {64, 10, 1408}, DType::kFloat32, kExpertFsdp, MeshA(),
                              Divisibility::kRequire),
                  Error);
  CHECK_THROWS_WITH(ShardTensor("ragged", {64, 10, 1408}, DType::kFloat32, kExpertFsdp, MeshA(),
                                Divisibility::kRequire),
                    Catch::Contains("ragged") && Catch::Contains("dim 1") && Catch::Contains("10"));
  CHECK_NOTHROW(ShardTensor("even", {64, 2048, 1408}, DType::kFloat32, kExpertFsdp, MeshA(),
                            Divisibility::kRequire));
}

TEST_CASE("A spec whose rank differs from the shape is an Error naming the tensor",
          "[shard][sharding]") {
  CHECK_THROWS_AS(ShardTensor("wo", {64, 2048}, DType::kFloat32, kExpertFsdp, MeshA()), Error);
  CHECK_THROWS_WITH(ShardTensor("wo", {64, 2048}, DType::kFloat32, kExpertFsdp, MeshA()),
                    Catch::Contains("wo"));
}

}  // namespace
}  // namespace shardtrace
