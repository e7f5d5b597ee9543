// TPU's tiled layouts of the step's state (model/tpu_tiles.h), on the entry layouts of the
// compiled fixtures' dumps: each array's bytes as the layout the compiler chose stores it.
#include "model/tpu_tiles.h"

#include <catch2/catch.hpp>

namespace shardtrace::model_internal {
namespace {

TEST_CASE("an array at rest takes TPU's tiles in its least-padded dim order", "[fit][tpu]") {
  // gpt-oss-120b on v6e-16: f32[128,1,180,2880]{0,3,2,1:T(8,128)}: the 128 experts on the
  // lanes, 2880 on the rows, 180 off both: no padding.
  CHECK(TpuRestingBytes({128, 1, 180, 2880}, DType::kFloat32) == 128LL * 180 * 2880 * 4);
  // f32[180,1,8,64]{0,3,2,1:T(8,128)}: 180 on 256 lanes beats 64 on 128 (and 180 on 184 rows).
  CHECK(TpuRestingBytes({180, 1, 8, 64}, DType::kFloat32) == 256LL * 64 * 8 * 4);
  // A row dim under 8 takes 1, 2 or 4 rows: f32[8,1,64]{2,1,0:T(1,128)},
  // s32[2,2048]{1,0:T(2,128)}.
  CHECK(TpuRestingBytes({8, 1, 64}, DType::kFloat32) == 8LL * 128 * 4);
  CHECK(TpuRestingBytes({2, 2048}, DType::kInt32) == 2LL * 2048 * 4);
  CHECK(TpuRestingBytes({3, 100}, DType::kFloat32) == 4LL * 128 * 4);
  // Rank 1: f32[2880]{0:T(1024)}, u32[4]{0:T(128)} (as int32); a scalar as it is.
  CHECK(TpuRestingBytes({2880}, DType::kFloat32) == 3072LL * 4);
  CHECK(TpuRestingBytes({4}, DType::kInt32) == 128LL * 4);
  CHECK(TpuRestingBytes({}, DType::kFloat32) == 4);
  // bfloat16 pads as float32 does (DeepSeek-V3's embedding on v5p-256, 56 rows a device).
  CHECK(TpuRestingBytes({129280, 56}, DType::kBfloat16) == 129280LL * 56 * 2);
  CHECK(TpuRestingBytes({0, 56}, DType::kBfloat16) == 0);
}

TEST_CASE("a gmm's weight gradient takes TPU's tiles in its own dim order", "[fit][tpu]") {
  // The compilers' buffers: Qwen3-235B's wo accumulator at fsdp 512, f32[94,128,1536,8] in
  // 9,024 MiB (8 columns on 128 lanes, where the least-padded order takes its 564 MiB), and
  // DeepSeek-V3's at fsdp 128, bf16[58,256,2048,56] in 7,424 MiB.
  CHECK(TpuInOrderBytes({94, 128, 1536, 8}, DType::kFloat32) == 9024LL << 20);
  CHECK(TpuRestingBytes({94, 128, 1536, 8}, DType::kFloat32) == 564LL << 20);
  CHECK(TpuInOrderBytes({58, 256, 2048, 56}, DType::kBfloat16) == 7424LL << 20);
  // A row dim under 8 rounds as at rest; rank 1 as at rest.
  CHECK(TpuInOrderBytes({3, 100}, DType::kFloat32) == 4LL * 128 * 4);
  CHECK(TpuInOrderBytes({2880}, DType::kFloat32) == 3072LL * 4);
}

}  // namespace
}  // namespace shardtrace::model_internal
