// What an array at rest takes of a TPU's HBM: `memory_analysis()` counts the step's state in
// the layouts its compiler gives the entry parameters, which are tiled, so an array whose dims
// do not fill the tiles takes more than its elements. TPU tiles an array's two minor dims in
// 8 rows by 128 lanes (a row dim of fewer than 8 in 1, 2 or 4 rows), a rank-1 array in tiles of
// 1,024 elements (of 128 under 1,024), and for each array of the state its compiler orders the
// dims so that the tiles pad it least. The dumps' entry layouts show each rule:
// f32[128,1,180,2880]{0,3,2,1:T(8,128)} (180 kept off the lanes), f32[8,1,64]{2,1,0:T(1,128)},
// s32[2,2048]{1,0:T(2,128)}, f32[2880]{0:T(1024)}, u32[4]{0:T(128)}. Summed over the state,
// this is argument_size_in_bytes within 0.011% on every compiled TPU fixture (gpt-oss-20b at
// full depth on v6e-16: 3.3% over its arrays' elements, its wo's 180 columns a device on 184
// rows of a 2,944-lane layout).
#pragma once

#include <cstdint>

#include "numeric/array.h"
#include "shard/sharding.h"

namespace shardtrace::model_internal {

// The rows of a TPU tile: an array's second-minor dim is laid out in groups of this many.
inline constexpr int64_t kTpuTileRows = 8;
// The lanes of a TPU tile: an array's minor dim is laid out in groups of this many.
inline constexpr int64_t kTpuLanes = 128;

// The bytes of an array of `local_shape` (one device's share) and `dtype` at rest in TPU HBM,
// in the dim order whose tiles pad it least. The padding is the same in elements for every
// dtype (DeepSeek-V3's bfloat16 embedding on v5p-256, 56 rows a device, is not padded to 16
// rows), so a moment of another dtype takes this / ByteSize(dtype) * ByteSize(its dtype).
int64_t TpuRestingBytes(const Shape& local_shape, DType dtype);

// The same in the array's own dim order, as a kernel whose output layout is fixed writes it:
// its last dim on the lanes and the one before on the rows (megablox's tgmm, the gmm's weight
// gradient: Qwen3-235B at fsdp 512 accumulates wo's as f32[94,128,1536,8], 8 columns a device
// on 128 lanes, 9,024 MiB for 564 MiB of elements; DeepSeek-V3 at fsdp 128 as
// bf16[58,256,2048,56], 7,424 MiB).
int64_t TpuInOrderBytes(const Shape& local_shape, DType dtype);

// What a sharded array takes of one device's memory at rest: on TPU (`tpu`) in its tiles, else
// its elements.
inline int64_t RestingBytes(const Sharding& sharded, bool tpu) {
  return tpu ? TpuRestingBytes(sharded.local_shape, sharded.dtype) : sharded.bytes_per_device;
}

}  // namespace shardtrace::model_internal
