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

}  // namespace
}  // namespace shardtrace::model_internal
