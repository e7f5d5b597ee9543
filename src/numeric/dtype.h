// Element types as MaxText names them (config `dtype`/`weight_dtype` strings and the
// names jax prints in `bfloat16[192,2048,64]`), with their byte sizes. Numeric mode stores
// every element as a float; RoundTo emulates the precision loss of narrower types.
// float8_e4m3fn is a storage type only (MaxText's fp8 weight files keep kernels in it and
// dequantize them to `dtype` before every matmul), never a compute `dtype`.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace shardtrace {

enum class DType { kBfloat16, kFloat16, kFloat32, kInt32, kBool, kFloat8E4M3Fn };

// "bfloat16", "float16", "float32", "int32", "bool", "float8_e4m3fn" (jax's spelling).
std::string ToString(DType dtype);
// Parses a dtype name as MaxText spells it (no "bf16"/"fp32" aliases: MaxText refuses them).
// Throws Error naming `key` on anything else.
DType ParseDType(std::string_view text, std::string_view key);
int64_t ByteSize(DType dtype);
bool IsFloating(DType dtype);
// Rounds a float32 value to the nearest representable value of `dtype` (round to nearest
// even for bfloat16/float16/float8_e4m3fn, truncation toward zero never happens); ints and
// bools pass. float8_e4m3fn has no infinity: past its largest value 448 it gives NaN, as
// ml_dtypes' cast from float32 does.
float RoundTo(DType dtype, float value);

}  // namespace shardtrace
