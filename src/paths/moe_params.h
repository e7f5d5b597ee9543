// MoeParams: the block input and every parameter of a RoutedMoE / RoutedAndSharedMoE /
// MlpBlock, as arrays in their stored dtype (weight_dtype). Symbolic runs get shape-only
// arrays; numeric runs get deterministic values from a seed (MakeParams) or a golden case's
// tensors.npz (FromArrays, which checks every shape against the config).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "numeric/array.h"

namespace shardtrace {

struct MoeSetup;
struct MoeSettings;

struct MlpParams {
  std::vector<Array> wi;  // one [M, F] kernel per activation (wi_0, wi_1, ...)
  Array wo;               // [F, M]
  // fp8 storage: DenseGeneral's float32 kernel_scale of each kernel (one per wi, then wo's):
  // [M/b_in, F/b_out] blocks, or a scalar without weight_block_size. Empty otherwise.
  std::vector<Array> wi_scale;
  std::optional<Array> wo_scale;
};

struct MoeParams {
  Array inputs;                               // [B, S, M]
  Array gate_kernel;                          // [M, E]
  std::optional<Array> gate_bias;             // [E] when routed_bias
  Array wi_0, wi_1;                           // [E, M, H]
  Array wo;                                   // [E, H, M]
  std::optional<Array> wi_0_bias, wi_1_bias;  // [E, H] when mlp_bias
  std::optional<Array> wo_bias;               // [E, M]
  std::optional<Array> per_expert_scale;      // [E] gemma4
  // fp8 storage: the routed kernels' float32 block scales (moe.py's wi_0_scale, wi_1_scale
  // [E, M/b_in, H/b_out], wo_scale [E, H/b_out, M/b_in]; [E] without weight_block_size).
  std::optional<Array> wi_0_scale, wi_1_scale, wo_scale;
  std::optional<MlpParams> shared;          // shared experts (RoutedAndSharedMoE)
  std::optional<Array> shared_expert_gate;  // [M, 1] Qwen3NextSparseMoeBlock's gate
  std::optional<MlpParams> dense;           // a dense MlpBlock layer (mlp_dim)
};

// One dim of an fp8 scale grid: how many blocks of `block` it holds (moe.py and DenseGeneral
// keep a dim smaller than its block whole: d scales of one element each).
inline int64_t ScaleBlocks(int64_t dim, int64_t block) { return dim >= block ? dim / block : dim; }

// DenseGeneral's kernel_scale shape for a 2-D fp8 kernel: its dims in weight_block_size blocks,
// or a scalar (per-tensor scale) without weight_block_size.
Shape DenseScaleShape(const MoeSettings& settings, const Shape& kernel);

// The memory a numeric run may take, unless --max-memory says otherwise: 2 GiB.
inline constexpr int64_t kNumericBudgetBytes = int64_t{2} << 30;

// Shape-only (numeric = false) or seeded values: inputs ~ N(0,1), kernels ~ N(0, 1/fan_in)
// with fan_in the contracted dim, biases ~ N(0, 0.1^2), per_expert_scale and fp8 scales 1
// (MaxText initialises every scale to ones). Each parameter takes the dtype MaxText stores it
// in (weight_dtype, or `dtype` for an unquantized module under fp8 storage). The generator
// is splitmix64 + Box-Muller, so a seed gives the same numbers on every machine.
// Numeric mode checks the run's budget first (CheckNumericSize, one device: the global
// arrays the seeded weights and inputs become).
MoeParams MakeParams(const MoeSetup& setup, int num_mlp_activations, bool numeric, uint64_t seed,
                     int64_t budget_bytes = kNumericBudgetBytes);

// The one budget of a numeric run, checked before anything is allocated: the arrays it
// materialises (expert and dense kernels, [B,S,E,H] activations, the routed rows, and on the
// token-dropping path the [B,S,E,C] masks with C the expert capacity), 4 bytes per element,
// each held by up to `devices` simulated devices, must fit `budget_bytes`. Error names the
// largest array, the keys that size it and --max-memory, which raises the budget.
void CheckNumericSize(const MoeSetup& setup, int64_t devices = 1,
                      int64_t budget_bytes = kNumericBudgetBytes);

// True when golden arrays describe a dense MlpBlock (mlp_wi_0, mlp_wi_1, .., mlp_wo: [M, F] and
// [F, M]) rather than a MoE block.
bool IsDenseMlpCase(const std::map<std::string, Array>& arrays);

// From named arrays (golden-format names: inputs, gate_kernel, gate_bias, wi_0, wi_1, wo,
// wi_0_bias, wi_1_bias, wo_bias, shared_wi_0, shared_wi_1, shared_wo,
// shared_expert_gate, and for a dense MlpBlock
// case mlp_wi_0, mlp_wi_1, mlp_wo instead of the expert arrays), sharing their buffers.
// Nothing is seeded: missing optional biases are zero, per_expert_scale one; a MoE case
// leaves `dense` unset and a dense case leaves the expert arrays symbolic. A wrong shape
// is an Error naming the array, the
// expected and the found shape. `source` names the file in errors.
MoeParams ParamsFromArrays(const MoeSetup& setup, int num_mlp_activations,
                           const std::map<std::string, Array>& arrays, const std::string& source,
                           bool routed_bias, bool mlp_bias);

}  // namespace shardtrace
