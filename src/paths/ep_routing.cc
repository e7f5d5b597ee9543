#include "paths/ep_routing.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "shard/mesh.h"
#include "paths/traced_ops.h"

namespace shardtrace {

namespace tr = traced;
using Args = std::vector<const Array*>;

Value ExpertShardId(const MoeContext& ctx) {
  const MoeSetup& s = ctx.setup;
  return s.ep > 1 ? ctx.t.AxisIndex(s.expert_axes, {"expert_shard_id", ""})
                  : tr::Constant(ctx.t, Scalar(0, DType::kInt32), {"expert_shard_id", ""});
}

Value RollToExpertId(const MoeContext& ctx, const Value& expert_shard_id) {
  const int64_t local_experts = ctx.setup.num_experts / ctx.setup.ep;
  return ctx.t.Apply({OpKind::kMul, "", {{"expr", "num_experts_per_shard * expert_shard_id"}}},
                     {&expert_shard_id}, {"roll_to_expert_id", ""}, [&](const Args& a) {
                       return Mul(*a[0], Scalar(static_cast<float>(local_experts), DType::kInt32));
                     });
}

void CaptureRingRows(const MoeContext& ctx, const PermuteOutput& routing, const Value& roll,
                     const Value& local_group_sizes, int64_t local_batch, int64_t sequence_length) {
  if (!ctx.t.numeric()) return;
  ctx.CapturePerDevice(Capture::kRingSortedSelectedExpertsPerDevice,
                       routing.sorted_selected_experts.shards);
  ctx.CapturePerDevice(Capture::kRingSortedExpertsPerDevice, routing.sorted_experts.shards);
  ctx.CapturePerDevice(Capture::kRingRollToExpertIdPerDevice, roll.shards);
  ctx.CapturePerDevice(Capture::kRingGroupSizesPerDevice, local_group_sizes.shards);
  const Mesh& mesh = ctx.t.mesh();
  const int64_t local_tokens = local_batch * sequence_length;
  std::vector<Array> sources;
  for (int64_t d = 0; d < mesh.num_devices(); ++d) {
    const std::vector<int64_t> group = mesh.Group(d, ctx.setup.expert_axes);
    const auto tokens = static_cast<int64_t>(group.size()) * local_tokens;
    std::vector<float> pairs;
    pairs.reserve(static_cast<size_t>(2 * tokens));
    for (int64_t g = 0; g < tokens; ++g) {
      pairs.push_back(static_cast<float>(group[g / local_tokens]));
      pairs.push_back(static_cast<float>(g % local_tokens));
    }
    sources.push_back(Array::FromData({tokens, 2}, DType::kInt32, std::move(pairs)));
  }
  ctx.CapturePerDevice(Capture::kRingTokenSourcesPerDevice, sources);
}

void CaptureRowMagnitudes(const MoeContext& ctx, const Value& rows, Capture id) {
  if (!ctx.t.numeric() || !rows.numeric()) return;
  std::vector<Array> magnitudes;
  for (const Array& shard : rows.shards) {
    const int64_t n = shard.shape.empty() ? 1 : shard.shape[0];
    const int64_t width = n == 0 ? 0 : shard.size() / n;
    std::vector<float> m(static_cast<size_t>(n), 0.0f);
    for (int64_t r = 0; r < n; ++r)
      for (int64_t c = 0; c < width; ++c)
        m[static_cast<size_t>(r)] =
            std::max(m[static_cast<size_t>(r)], std::abs(shard.values()[r * width + c]));
    magnitudes.push_back(Array::FromData({n}, DType::kFloat32, std::move(m)));
  }
  ctx.CapturePerDevice(id, magnitudes);
}

void PlanForwardAllToAll(const MoeContext& ctx, const Value& group_sizes, int64_t rows,
                         EpRouting& ep) {
  Tracer& t = ctx.t;
  const MoeSetup& s = ctx.setup;
  const int64_t local_experts = s.num_experts / s.ep;
  ep.reshaped_group_sizes =
      t.Apply({OpKind::kSum, "", {{"expr", "group_sizes.reshape(-1, local_expert_size).sum(1)"}}},
              {&group_sizes}, {"reshaped_group_sizes", "P"}, [&](const Args& a) {
                return Sum(Reshape(*a[0], {s.ep, local_experts}), 1, false);
              });
  if (!s.batch_sharded_by_ep) return;
  const auto cond = t.Condition("batch sharded by expert");
  ep.all_shards_group_sizes = t.AllGather(*ep.reshaped_group_sizes, s.expert_axes, 0, false,
                                          {"all_shards_group_sizes", "PP"});
  ep.forward = GetAllToAllParams(ctx, *ep.all_shards_group_sizes, ep.expert_shard_id, s.ep, true);
  const double factor = ctx.settings().ragged_buffer_factor;
  ep.buffer_rows = RaggedBufferSize(rows, s.ep, s.num_experts, s.top_k, factor);
  t.AddFact({FactKind::kRaggedBufferRows,
             "",
             "",
             {},
             {static_cast<double>(ep.buffer_rows)},
             {{"rows", static_cast<double>(rows)},
              {"expert_parallelism", static_cast<double>(s.ep)},
              {"num_experts", static_cast<double>(s.num_experts)},
              {"top_k", static_cast<double>(s.top_k)},
              {"ragged_buffer_factor", factor}}});
  ep.allocated_rows = ep.buffer_rows;
  if (t.numeric()) {
    // all_shards_group_sizes[src, dst] on every device (groups of the other mesh axes differ).
    int64_t most = 1;  // a zero-row buffer would be a degenerate shape for the ops after it
    for (const Array& shard : ep.all_shards_group_sizes->shards) {
      const std::vector<float>& sizes = shard.values();
      for (int64_t dst = 0; dst < s.ep; ++dst) {
        int64_t received = 0;
        for (int64_t src = 0; src < s.ep; ++src)
          received += static_cast<int64_t>(sizes[src * s.ep + dst]);
        most = std::max(most, received);
      }
    }
    ep.allocated_rows = std::min(ep.buffer_rows, most);
    t.set_ragged_buffer_rows(ep.buffer_rows);
  }
}

Value ReturnFromExperts(const MoeContext& ctx, const Value& expert_output, const EpRouting& ep,
                        int64_t original_rows) {
  Tracer& t = ctx.t;
  const MoeSetup& s = ctx.setup;
  const Value output_shape =
      tr::Empty(t, {original_rows, s.emb / s.tp}, expert_output.dtype(), {"output_shape", "RM"});
  if (s.batch_sharded_by_ep) {
    const auto cond = t.Condition("batch sharded by expert");
    const Value inverse = tr::Argsort(t, *ep.local_sorted_indices, {"unsort_indices", "U"});
    const Value local_output = tr::Take(t, expert_output, inverse, 0, {"local_output", "UM"});
    const Value transposed = t.Apply({OpKind::kTranspose, "", {}}, {&*ep.all_shards_group_sizes},
                                     {"all_shards_group_sizes_T", "PP"}, [](const Args& a) {
                                       return Transpose(*a[0], {1, 0});
                                     });
    const AllToAllParams p = GetAllToAllParams(ctx, transposed, ep.expert_shard_id, s.ep, true);
    std::vector<Array> sources;
    CaptureAllToAllParams(ctx, Exchange::kReturn, p);
    const Value out = t.RaggedAllToAll(local_output, output_shape, p.input_offsets, p.send_sizes,
                                       p.output_offsets, p.recv_sizes, s.expert_axes,
                                       {"intermediate_output", "RM"}, &sources);
    ctx.CapturePerDevice(Capture::kIntermediateOutputRowSourcesPerDevice, sources);
    return out;
  }
  const auto cond = t.Condition("batch replicated (global batch 1)");
  const AllToAllParams p =
      GetAllToAllParams(ctx, *ep.reshaped_group_sizes, ep.expert_shard_id, s.ep, false);
  std::vector<Array> sources;
  CaptureAllToAllParams(ctx, Exchange::kReturn, p);
  const Value out =
      t.RaggedAllToAll(expert_output, output_shape, p.input_offsets, p.send_sizes, p.output_offsets,
                       p.recv_sizes, s.expert_axes, {"intermediate_output", "RM"}, &sources);
  ctx.CapturePerDevice(Capture::kIntermediateOutputRowSourcesPerDevice, sources);
  return out;
}

}  // namespace shardtrace
