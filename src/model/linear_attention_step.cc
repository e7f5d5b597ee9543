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
  const int64_t conv_dim =
      CheckedAdd(CheckedMul(2, CheckedMul(positive("gdn_num_key_heads"), key_dim, "gdn key dim"),
                            "gdn conv dim"),
                 CheckedMul(value_heads, value_dim, "gdn value dim"), "gdn conv dim");
  // The chunked rule runs under shard_map on the batch and head shards; its chunk axis
  // stands where the sequence was.
  const LogicalAxes heads =
      LogicalNames({"activation_batch", "activation_heads", nullptr, nullptr});
  const LogicalAxes tokens = LogicalNames({"activation_batch", "activation_length", nullptr});
  const auto per_chunk = [&](int64_t rows, int64_t minor, const std::string& what) {
    return LocalBytes(config, mesh,
                      {batch, value_heads, CheckedMul(chunks, rows, what), lanes(minor)}, heads,
                      DType::kFloat32, what);
  };
  // What the backward reads of the forward, as TPU's compiler holds it: the buffers of
  // Qwen3-Next's local layers at its fullest moment (v6e-16, sequence 4096, chunk 64):
  // float32 states at every chunk, two of [64,1,32,128,128]; the chunks' new values
  // [64,1,32,64,128]; the triangular solve's two [64,32,64,64] on 128 lanes; the conv's
  // [1,4096,8192] input and output; the gate and core output [1,4096,4096]; the core output
  // in float32 [1,4096,32,128].
  const int64_t residuals =
      2 * per_chunk(key_dim, value_dim, "gdn chunk states") +
      per_chunk(chunk, value_dim, "gdn chunk values") +
      2 * per_chunk(chunk, chunk, "gdn chunk solve") +
      2 * LocalBytes(config, mesh, {batch, length, conv_dim}, tokens, act, "gdn conv") +
      2 * LocalBytes(config, mesh, {batch, length, value_heads * value_dim}, tokens, act,
                     "gdn gate") +
      LocalBytes(
          config, mesh, {batch, length, value_heads, lanes(value_dim)},
          LogicalNames({"activation_batch", "activation_length", "activation_heads", nullptr}),
          DType::kFloat32, "gdn core output");

  BlockFigures f;
  if (policy.wrapped) {
    f.recomputed_bytes = residuals;
  } else {
    f.kept.push_back({"gated_delta_net", residuals,
                      "the gated delta net's projections, conv, chunk states and solves"});
  }
  // Its backward: those residuals and their cotangents, its gathered weights and their
  // gradients.
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
