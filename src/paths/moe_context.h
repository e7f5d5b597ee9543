// MoeContext: what every path function of the MoE block shares: the config, the derived
// setup, the tracer, and the arrays captured for golden checks (gate_logits, top_k_indices,
// group_sizes, ... as global arrays).
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "ir/captures.h"
#include "paths/moe_setup.h"
#include "paths/tracer.h"

namespace shardtrace {

struct MoeContext {
  const MoeSetup& setup;
  Tracer& t;
  Captures& captures;

  // gemma4's per_expert_scale where get_topk scales the top-k weights by it
  // (RevisionBehaviour::expert_scale_on_topk_weights): GetTopK reads `topk_scale`, which the
  // sparse path's shard_map body replaces by its replicated copy of `topk_scale_outside`.
  mutable std::optional<Value> topk_scale, topk_scale_outside;

  DType dtype() const { return setup.dtype; }
  const MoeSettings& settings() const { return setup.settings; }
  // Records `value` (global, numeric) under `id` for golden comparison.
  void Capture(shardtrace::Capture id, const Array& value) const {
    if (value.numeric()) captures.Put(id, value);
  }
  // Records per-device blocks (inside shard_map, numeric) stacked as [devices, ...] under
  // `id`: what each virtual device holds, which no global array shows (the sorted rows
  // and ragged buffers the pages draw as trees).
  void CapturePerDevice(shardtrace::Capture id, const std::vector<Array>& shards) const {
    if (shards.empty() || !shards.front().numeric()) return;
    Shape shape = shards.front().shape;
    std::vector<float> data;
    for (const Array& a : shards) {
      if (a.shape != shape) return;  // ragged blocks do not stack
      data.insert(data.end(), a.values().begin(), a.values().end());
    }
    shape.insert(shape.begin(), static_cast<int64_t>(shards.size()));
    captures.Put(id, Array::FromData(shape, shards.front().dtype, std::move(data)));
  }
};

// Kernels and biases of the routed experts after RoutedMoE.__call__ cast them to dtype.
struct ExpertKernels {
  Value w0, w1, wo;
  std::optional<Value> w0_bias, w1_bias, wo_bias;
};

// What a routed-experts path returns: output [B,S,M], lb_loss [], bias_updates [E].
struct PathOutput {
  Value output;
  std::optional<Value> lb_loss;
  std::optional<Value> bias_updates;
};

}  // namespace shardtrace
