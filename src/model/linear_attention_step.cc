#include "model/linear_attention_step.h"

#include <fmt/format.h>

#include "numeric/dtype.h"
#include "shard/axis_rules.h"
#include "util/checked.h"

namespace shardtrace::model_internal {

BlockFigures LinearAttentionLayer(const Config& config, const Mesh& mesh, const RematPolicy& policy,
                                  const LayerWeights& weights, int64_t batch, bool tpu) {
  const auto lanes = [tpu](int64_t dim) { return Lanes(dim, tpu); };
  const DType act = ActivationDType(config);
  const int64_t length = config.Int("max_target_length");
  // The sizes the layer's buffers are made of, each named where the config gives none.
  const auto positive = [&](const char* key) {
    const int64_t v = config.Int(key);
    if (v <= 0) Fail("{} is {}: the gated delta net needs a positive size", key, v);
    return v;
  };
  const int64_t chunk = positive("gdn_chunk_size");
  const int64_t chunks = (length + chunk - 1) / chunk;
  const int64_t value_heads = positive("gdn_num_value_heads");
  const int64_t key_dim = positive("gdn_key_head_dim");
  const int64_t value_dim = positive("gdn_value_head_dim");
  const int64_t key_heads = positive("gdn_num_key_heads");
  const int64_t conv_dim =
      CheckedAdd(CheckedMul(2, CheckedMul(key_heads, key_dim, "gdn key dim"), "gdn conv dim"),
                 CheckedMul(value_heads, value_dim, "gdn value dim"), "gdn conv dim");
  // The chunked rule runs under shard_map on the batch and head shards; its chunk axis
  // stands where the sequence was.
  const LogicalAxes heads =
      LogicalNames({"activation_batch", "activation_heads", nullptr, nullptr});
  const LogicalAxes tokens = LogicalNames({"activation_batch", "activation_length", nullptr});
  const auto per_chunk = [&](int64_t rows, int64_t minor, DType dtype, const std::string& what) {
    return LocalBytes(config, mesh,
                      {batch, value_heads, CheckedMul(chunks, rows, what), lanes(minor)}, heads,
                      dtype, what);
  };
  const auto per_token = [&](int64_t width, DType dtype, const std::string& what) {
    return LocalBytes(config, mesh, {batch, length, width}, tokens, dtype, what);
  };
  constexpr DType f32 = DType::kFloat32;
  const int64_t value_width = CheckedMul(value_heads, value_dim, "gdn value dim");
  // What the backward reads of the forward: every per-chunk array the chunked rule's scan
  // stacks for its backward and the token-wise arrays around it, as TPU's compiler holds them
  // for a layer whose backward has not begun (v6e-16, sequence 4096, chunk 64: the same set,
  // 1.4 GiB a layer, in Qwen3-Next's local layer at its MoE backward and in each of Qwen3.5's
  // three earlier gated delta net layers of a block, at the compiler's fullest moment):
  // - float32 [chunks x rows, minor] per value head: the state before and after each chunk
  //   ([64,1,32,128,128], [64,32,128,128]); three of the chunks' values ([64,32,64,128]); four
  //   of their keys and decayed keys ([64,1,32,64,128] twice, its copy, [64,32,128,64]); five
  //   of the triangular solve's [64,32,64,64] on 128 lanes; and one bf16 copy each of a
  //   value, a key and a solve, the matmuls' operands;
  // - per token: the conv's output [1,4096,8192], the gate and its copy [1,4096,4096], the
  //   core output in float32 [1,4096,32,128] and twice in bf16, the query and key heads
  //   [1,4096,16,2,128] twice.
  const int64_t residuals =
      2 * per_chunk(key_dim, value_dim, f32, "gdn chunk states") +
      3 * per_chunk(chunk, value_dim, f32, "gdn chunk values") +
      4 * per_chunk(chunk, key_dim, f32, "gdn chunk keys") +
      5 * per_chunk(chunk, chunk, f32, "gdn chunk solve") +
      per_chunk(chunk, value_dim, act, "gdn chunk values") +
      per_chunk(chunk, key_dim, act, "gdn chunk keys") +
      per_chunk(chunk, chunk, act, "gdn chunk solve") + per_token(conv_dim, act, "gdn conv") +
      2 * per_token(value_width, act, "gdn gate") +
      LocalBytes(
          config, mesh, {batch, length, value_heads, lanes(value_dim)},
          LogicalNames({"activation_batch", "activation_length", "activation_heads", nullptr}), f32,
          "gdn core output") +
      2 * per_token(value_width, act, "gdn core output") +
      2 * per_token(CheckedMul(2 * key_heads, lanes(key_dim), "gdn query and key"), act,
                    "gdn query and key");

  BlockFigures f;
  if (policy.wrapped) {
    f.recomputed_bytes = residuals;
  } else {
    f.kept.push_back({"gated_delta_net", residuals,
                      "the gated delta net's projections, conv, chunk states and solves"});
  }
  // Its backward: those residuals and their cotangents, its gathered weights and their
  // gradients (a bound: on the fixtures the step's fullest moment is in a MoE backward, with
  // the residuals beside it, never in this one).
  const int64_t gathered = GatheredWeightBytes(config, mesh, weights);
  f.backward_peak_bytes = 2 * residuals + 2 * gathered;
  f.backward_peak_where = fmt::format(
      "gated delta net backward: its chunk states, solves, conv and gate with their cotangents "
      "({} chunks of {})",
      chunks, chunk);
  f.collectives = WeightCollectives(config, mesh, weights, policy.wrapped, "linear attention");
  return f;
}

}  // namespace shardtrace::model_internal
