#include "paths/sparse_pipeline.h"

#include <fmt/format.h>

#include "paths/ep_routing.h"
#include "paths/permute.h"
#include "paths/routing.h"
#include "paths/sparse_shard_map.h"
#include "paths/traced_ops.h"
#include "shard/mesh.h"
#include "util/error.h"

namespace shardtrace {

namespace tr = traced;
using Args = std::vector<const Array*>;

namespace {

// Embedding-independent routing state.
struct RouteOutput {
  PermuteOutput routing;   // top-k, weights, sort order, losses
  Value group_sizes;       // rows per local expert (gmm groups)
  Value selected_experts;  // expert id of each row as the gmm sees it
  PartitionSpec routed_batch_spec;
};

RouteOutput Route(const MoeContext& ctx, const ShardMapOperands& op, EpRouting& meta) {
  Tracer& t = ctx.t;
  const MoeSetup& s = ctx.setup;
  const auto scope = t.Scope("route");
  const int64_t ep = s.ep, local_experts = s.num_experts / s.ep;
  meta.expert_shard_id = ExpertShardId(ctx);
  RouteOutput out;
  out.routed_batch_spec = op.shardings.gate_logits;
  Value logits = op.logits;
  std::optional<Value> pre = op.pre_bias_logits;
  std::optional<Value> roll;
  if (s.ring_of_experts) {
    const auto cond = t.Condition("use_ring_of_experts");
    logits = t.AllGather(logits, s.expert_axes, 0, true, {"logits", "BSE"});
    if (pre) pre = t.AllGather(*pre, s.expert_axes, 0, true, {"pre_bias_logits", "BSE"});
    out.routed_batch_spec = WithoutAxes(op.shardings.gate_logits, s.expert_axes);
    roll = RollToExpertId(ctx, meta.expert_shard_id);
  }
  out.routing = RouteTokens(ctx, logits, pre, roll);
  if (!roll) {  // (the ring's rolled ids are not expert ids)
    ctx.CapturePerDevice(Capture::kSortedSelectedExpertsPerDevice,
                         out.routing.sorted_selected_experts.shards);
    ctx.CapturePerDevice(Capture::kSortedExpertsPerDevice, out.routing.sorted_experts.shards);
    ctx.CapturePerDevice(Capture::kTopKIndicesPerDevice, out.routing.top_k_indices.shards);
  }
  out.group_sizes = out.routing.group_size;
  out.selected_experts = out.routing.sorted_experts;
  if (s.ring_of_experts) {
    out.group_sizes = tr::Slice(t, out.group_sizes, 0, 0, local_experts, {"group_sizes", "E"});
    CaptureRingRows(ctx, out.routing, *roll, out.group_sizes, op.x.dim(0), op.x.dim(1));
  } else if (ep > 1) {
    const auto cond = t.Condition("expert parallelism > 1");
    const Value& gs = out.routing.group_size;
    const int64_t rows = out.routing.sorted_experts.dim(0);
    PlanForwardAllToAll(ctx, gs, rows, meta);
    if (s.batch_sharded_by_ep) {
      const Value global = t.AllGather(gs, s.expert_axes, 0, false, {"global_group_sizes", "PE"});
      const LocalPermuteOutput lp =
          LocalSortOrder(ctx, meta.allocated_rows, "U", global, local_experts, meta.expert_shard_id,
                         false, std::nullopt);
      meta.local_sorted_indices = lp.sorted_indices;
      out.group_sizes = lp.local_group_size;
      out.selected_experts = lp.sorted_experts_ids;
    } else {
      const Value global = tr::Reshape(t, gs, {1, s.num_experts}, {"global_group_sizes", "1E"});
      const LocalPermuteOutput lp =
          LocalSortOrder(ctx, rows, "R", global, local_experts, meta.expert_shard_id, true,
                         out.routing.sorted_experts);
      meta.local_sorted_indices = lp.sorted_indices;
      out.group_sizes = lp.local_group_size;
      out.selected_experts = lp.sorted_experts_ids;
    }
  }
  AddGroupSizeFacts(ctx, out.group_sizes);
  return out;
}

// Moves [B,S,M'] (an embedding block) to the rows the local gmm consumes.
Value Dispatch(const MoeContext& ctx, const Value& x_in, const RouteOutput& route,
               const EpRouting& meta) {
  Tracer& t = ctx.t;
  const MoeSetup& s = ctx.setup;
  const auto scope = t.Scope("dispatch");
  Value x = x_in;
  if (s.ring_of_experts) x = t.AllGather(x, s.expert_axes, 0, true, {"x", "BSM"});
  x = SortRows(ctx, x, route.routing);
  if (s.ring_of_experts) return MaskRowsPastGroups(ctx, x, route.group_sizes, "x");
  if (s.ep == 1) return x;
  if (s.batch_sharded_by_ep) {
    // UM or UMc.
    const std::string um = fmt::format("U{}", t.trace().tensors[x.tensor].dims.substr(1));
    const Value buffer =
        tr::Empty(t, {meta.allocated_rows, x.dim(1)}, x.dtype(), {"output_shape", um});
    const AllToAllParams& p = *meta.forward;
    std::vector<Array> sources;  // the same for every embedding chunk
    CaptureAllToAllParams(ctx, Exchange::kDispatch, p);
    x = t.RaggedAllToAll(x, buffer, p.input_offsets, p.send_sizes, p.output_offsets, p.recv_sizes,
                         s.expert_axes, {"x", um}, &sources);
    ctx.CapturePerDevice(Capture::kXRowSourcesPerDevice, sources);
  }
  const std::string dims = t.trace().tensors[x.tensor].dims;
  return tr::Take(t, x, *meta.local_sorted_indices, 0, {"sorted_inputs", dims});
}

}  // namespace

PathOutput SparsePipeline(const MoeContext& ctx, const Value& inputs, const Value& gate_logits,
                          const std::optional<Value>& pre_bias_logits,
                          const ExpertKernels& kernels) {
  Tracer& t = ctx.t;
  const MoeSetup& s = ctx.setup;
  const MoeSettings& c = ctx.settings();
  const auto scope = t.Scope("sparse_matmul");
  const int64_t chunks = c.shardtrace_pr3981_emb_chunks;
  const int64_t m = s.emb;
  // Chunked: wi_0/wi_1 enter shard_map still sharded along the embedding by their kernel
  // axes, so each chunk is all-gathered on its own.
  std::optional<PartitionSpec> wi_spec;
  std::vector<std::string> m_axes;
  if (chunks > 1) {
    if (s.tp_transpose > 1)
      Fail(
          "shardtrace_pr3981_emb_chunks={}: chunking the embedding with tensor_transpose "
          "parallelism {} "
          "(which also splits "
          "it) is not modeled; use ici_tensor_transpose_parallelism=1",
          chunks, s.tp_transpose);
    wi_spec = ResolveSpec({"exp", "embed_moe", "mlp_no_fsdp"}, t.rules(), &t.mesh());
    m_axes = (*wi_spec)[1];
    const int64_t parts = t.mesh().Size(m_axes) * chunks;
    if (m % parts != 0)
      Fail(
          "shardtrace_pr3981_emb_chunks={}: the embedding dim {} must split into {} chunks on each "
          "of the {} "
          "shards of {} ({} "
          "pieces)",
          chunks, m, chunks, t.mesh().Size(m_axes), PartitionSpec::EntryToString(m_axes), parts);
  }
  const ShardMapOperands op = EnterSparseShardMap(ctx, inputs, gate_logits, pre_bias_logits,
                                                  kernels, "moe_route_and_compute", wi_spec);
  const auto body = t.Scope("moe_route_and_compute");
  EpRouting meta;
  const RouteOutput route = Route(ctx, op, meta);

  Value layer_w0, layer_w1;
  if (chunks <= 1) {
    const Value x = Dispatch(ctx, op.x, route, meta);
    const auto sc = t.Scope("gmm_up");
    layer_w0 = Gmm(ctx, x, op.w0, route.group_sizes, "layer_w0", false);
    layer_w1 = Gmm(ctx, x, op.w1, route.group_sizes, "layer_w1", false);
  } else {
    const int64_t shards = t.mesh().Size(m_axes);
    const int64_t local_m = m / shards, chunk_local = local_m / chunks;
    for (int64_t chunk = 0; chunk < chunks; ++chunk) {
      Value p0, p1;
      {
        const auto sc = t.Iteration("chunk", chunk, chunks);
        // Chunk `chunk` takes the same slice of every shard's embedding block: the embedding
        // indices k*local_m + chunk*chunk_local + j, in the all-gather's shard order.
        std::vector<float> indices;
        for (int64_t k = 0; k < shards; ++k)
          for (int64_t j = 0; j < chunk_local; ++j)
            indices.push_back(static_cast<float>(k * local_m + chunk * chunk_local + j));
        const Value index = tr::Constant(
            t, Array::FromData({static_cast<int64_t>(indices.size())}, DType::kInt32, indices),
            {"chunk_indices", "Q"});  // Q: the chunk's embedding columns (Mc), not M
        const Value x_chunk = tr::Take(t, op.x, index, 2, {"x_chunk", "BSQ"});
        auto chunk_weight = [&](const Value& w, const char* name) {
          Value piece = tr::Slice(t, w, 1, chunk * chunk_local, chunk_local, {name, "EQH"});
          if (!m_axes.empty()) piece = t.AllGather(piece, m_axes, 1, true, {name, "EQH"});
          return piece;
        };
        const Value w0_chunk = chunk_weight(op.w0, "w0_chunk");
        const Value w1_chunk = chunk_weight(op.w1, "w1_chunk");
        const Value x = Dispatch(ctx, x_chunk, route, meta);
        const auto up = t.Scope("gmm_up");
        p0 = Gmm(ctx, x, w0_chunk, route.group_sizes, "layer_w0_partial", false);
        p1 = Gmm(ctx, x, w1_chunk, route.group_sizes, "layer_w1_partial", false);
      }
      // The partial up-projections add up outside the chunk, so every chunk records one body.
      const auto up = t.Scope("gmm_up");
      const std::string dims = t.trace().tensors[p0.tensor].dims;
      layer_w0 = chunk == 0 ? p0 : tr::Binary(t, OpKind::kAdd, layer_w0, p0, {"layer_w0", dims});
      layer_w1 = chunk == 0 ? p1 : tr::Binary(t, OpKind::kAdd, layer_w1, p1, {"layer_w1", dims});
    }
    t.Note(fmt::format(
        "shardtrace_pr3981_emb_chunks={}: each chunk's wi all-gather over {} can overlap the "
        "previous "
        "chunk's "
        "gmm_up",
        chunks,
        m_axes.empty() ? "(no fsdp axes: none needed)" : PartitionSpec::EntryToString(m_axes)));
  }
  {
    const auto sc = t.Scope("maybe_tp_reduce");
    if (s.tp_transpose > 1) {
      const auto cond = t.Condition("tensor_transpose > 1");
      layer_w0 = t.Psum(layer_w0, {"tensor_transpose"},
                        {"layer_w0", t.trace().tensors[layer_w0.tensor].dims});
      layer_w1 = t.Psum(layer_w1, {"tensor_transpose"},
                        {"layer_w1", t.trace().tensors[layer_w1.tensor].dims});
    }
  }
  std::optional<Value> w0_bias = op.w0_bias, w1_bias = op.w1_bias, wo_bias = op.wo_bias;
  if (c.mlp_bias) {
    const auto cond = t.Condition("mlp_bias");
    w0_bias = TransformBias(ctx, route.selected_experts, *w0_bias, "w0_bias");
    w1_bias = TransformBias(ctx, route.selected_experts, *w1_bias, "w1_bias");
    wo_bias = TransformBias(ctx, route.selected_experts, *wo_bias, "wo_bias");
    layer_w0 = tr::Binary(t, OpKind::kAdd, layer_w0, *w0_bias,
                          {"layer_w0", t.trace().tensors[layer_w0.tensor].dims});
    layer_w1 = tr::Binary(t, OpKind::kAdd, layer_w1, *w1_bias,
                          {"layer_w1", t.trace().tensors[layer_w1.tensor].dims});
  }
  layer_w0 = tr::CheckpointName(t, layer_w0, "moe_mlpwi_0", "mlpwi_0");
  layer_w1 = tr::CheckpointName(t, layer_w1, "moe_mlpwi_1");
  const Value intermediate_layer =
      ApplyFfnActivation(ctx, std::move(layer_w0), std::move(layer_w1));
  Value out;
  {
    const auto sc = t.Scope("gmm_down");
    out = Gmm(ctx, intermediate_layer, op.wo, route.group_sizes, "intermediate_output", true);
    const std::string dims = t.trace().tensors[out.tensor].dims;
    if (s.tp > 1) {
      const auto cond = t.Condition("tensor parallelism > 1");
      out = t.PsumScatter(out, {"tensor"}, 1, true, {"intermediate_output", dims});
    }
    if (wo_bias) out = tr::Binary(t, OpKind::kAdd, out, *wo_bias, {"intermediate_output", dims});
    out = tr::CheckpointName(t, out, "moe_mlpwo", "mlpwo");
  }
  Value output;
  {
    // PR 3981's last step, unpermute(output, routing): moe.py's own unpermute opens that
    // scope itself, so the step adds none (no "unpermute/unpermute").
    const int64_t batch_size = op.x.dim(0), seq = op.x.dim(1);
    if (s.ring_of_experts) {
      out = MaskRowsPastGroups(ctx, out, route.group_sizes, "intermediate_output");
      CaptureRowMagnitudes(ctx, out, Capture::kRingIntermediateOutputRowMaxPerDevice);
      output = Unpermute(ctx, out, route.routing.sorted_selected_experts, route.routing.weights,
                         batch_size, seq);
      output = tr::Reshape(t, output, {-1, seq, m / s.tp}, {"output", "BSM"});
      output = t.PsumScatter(output, s.expert_axes, 0, true, {"output", "BSM"});
    } else {
      if (s.ep > 1) {
        out = ReturnFromExperts(ctx, out, meta, batch_size * seq * s.top_k);
      }
      output = Unpermute(ctx, out, route.routing.sorted_selected_experts, route.routing.weights,
                         batch_size, seq);
    }
  }
  return ExitSparseShardMap(ctx, op.shardings, output, route.routing, route.routed_batch_spec);
}

}  // namespace shardtrace
