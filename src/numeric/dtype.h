// Element types as MaxText names them (config `dtype`/`weight_dtype` strings and the
// names jax prints in `bfloat16[192,2048,64]`), with their byte sizes. Numeric mode stores
// every element as a float; RoundTo emulates the precision loss of narrower types.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace shardtrace {

enum class DType { kBfloat16, kFloat16, kFloat32, kInt32, kBool };

// "bfloat16", "float16", "float32", "int32", "bool" (jax's spelling).
std::string ToString(DType dtype);
// Parses a MaxText dtype string; also accepts "bf16"/"fp32"/"f32". Throws Error naming
// `key` on anything else.
DType ParseDType(std::string_view text, std::string_view key);
int64_t ByteSize(DType dtype);
bool IsFloating(DType dtype);
// Rounds a float32 value to the nearest representable value of `dtype` (round to nearest
// even for bfloat16/float16, truncation toward zero never happens); ints and bools pass.
float RoundTo(DType dtype, float value);

}  // namespace shardtrace
