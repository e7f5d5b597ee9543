#include "paths/sparse_matmul.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "config/moe_lines.h"
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

// gmm_up's and wo's `mask` with mlp_bias (RevisionBehaviour::mlp_bias_masks_padding_rows): the
// rows past the routed ones zeroed after the bias add, where the revision does so.
Value MaskBiasedRows(const MoeContext& ctx, const Value& rows, const Value& group_sizes,
                     const std::string& name) {
  if (!ctx.settings().revision.behaviour.mlp_bias_masks_padding_rows) return rows;
  return MaskRowsPastGroups(ctx, rows, group_sizes, name);
}

// The mesh axes the release's permute psums the bias update's expert counts over: those of
// the gate logits' batch and sequence dims among moe.py's batch axes (_batch_axis_names),
// without the expert axes on the ring, whose logits are already gathered over them. None
// where the revision counts per device, or no bias update runs.
std::vector<std::string> BiasCountAxes(const MoeContext& ctx, const PartitionSpec& gate_logits,
                                       bool ring) {
  static constexpr std::array<std::string_view, 8> kBatchAxes = {"data",
                                                                 "fsdp",
                                                                 "fsdp_transpose",
                                                                 "expert",
                                                                 "context",
                                                                 "context_usp_ulysses",
                                                                 "context_autoregressive",
                                                                 "tensor_sequence"};
  std::vector<std::string> axes;
  if (!ctx.settings().revision.behaviour.bias_counts_summed_over_batch_axes ||
      !ctx.settings().UpdatesLoadBalanceBias())
    return axes;
  const std::vector<std::string>& ep = ctx.setup.expert_axes;
  for (size_t d = 0; d < std::min<size_t>(2, gate_logits.rank()); ++d)
    for (const std::string& a : gate_logits[d]) {
      const bool batch = std::find(kBatchAxes.begin(), kBatchAxes.end(), a) != kBatchAxes.end();
      const bool on_ring = ring && std::find(ep.begin(), ep.end(), a) != ep.end();
      if (batch && !on_ring && std::find(axes.begin(), axes.end(), a) == axes.end())
        axes.push_back(a);
    }
  return axes;
}

// The release's ring with moe_topk_before_ep_all_gather (roe_ag_and_route): top-k on this
// device's tokens, then the [B,S,K] weights and ids all-gathered over the expert axes instead
// of the [B,S,E] logits, and for the load-balance loss the per-sequence mean of the router
// probabilities [B,E] (a per-sequence statistic, so gathering it gives the full batch's).
// Random routing keeps the logit gather (moe.py's condition; it is refused with EP > 1 anyway).
PrecomputedTopK TopKBeforeAllGather(const MoeContext& ctx, const Value& logits,
                                    const std::optional<Value>& pre) {
  Tracer& t = ctx.t;
  const std::vector<std::string>& ep_axes = ctx.setup.expert_axes;
  const auto cond = t.Condition("moe_topk_before_ep_all_gather");
  const TopKOutput top = GetTopK(ctx, logits, pre);
  PrecomputedTopK out{t.AllGather(top.weights, ep_axes, 0, true, {"weights", "BSK"}),
                      t.AllGather(top.indices, ep_axes, 0, true, {"selected_experts", "BSK"}),
                      std::nullopt};
  if (ctx.settings().load_balance_loss_weight > 0.0) {
    const auto c2 = t.Condition("load_balance_loss_weight > 0");
    // probs_logits: pre_bias_logits where the router keeps them, else the logits.
    const Value probs = RouterProbs(ctx, pre ? *pre : logits);
    const Value mean = tr::Mean(t, probs, 1, {"density_prob", "BE"});
    out.density_prob = t.AllGather(mean, ep_axes, 0, true, {"density_prob", "BE"});
  }
  return out;
}

// The tokens of the release's chunked ring: this device's [B,S,M] before the gather, the
// chunk width (embed_dim // num_moe_emb_chunks) and the chunk count.
struct EmbChunks {
  Value x_local;
  int64_t chunk_dim = 0, count = 0;
};

// moe_emb_chunking's wi projections: for each chunk c, the chunk's columns of w0/w1
// (dynamic_slice_in_dim along the embed dim) through the gmm with the running partial sum
// (gmm v2's partial_sum: the sum starts at zeros), then the next chunk's tokens gathered over
// the expert axes and put in the routed order. moe.py calls roe_ag_and_route for every chunk
// and keeps only the rows: the routing it recomputes is chunk 0's, from the same gathered
// logits, so XLA keeps one copy (CSE) and the trace records it once. Biases are added once,
// after the last chunk. Columns past count * chunk_dim (embed_dim not a multiple of the
// count) never reach the gmm, as in moe.py.
std::pair<Value, Value> EmbChunkedUp(const MoeContext& ctx, const EmbChunks& chunks,
                                     const Value& first_rows, const PermuteOutput& perm,
                                     const Value& group_sizes, const Value& w0, const Value& w1,
                                     const std::optional<Value>& w0_bias,
                                     const std::optional<Value>& w1_bias) {
  Tracer& t = ctx.t;
  const MoeSetup& s = ctx.setup;
  const int64_t cd = chunks.chunk_dim;
  if (chunks.x_local.dim(2) % chunks.count != 0)
    t.Note(fmt::format(
        "num_moe_emb_chunks={}: embed_dim {} // {} = {} columns per chunk; the last {} never "
        "reach the wi gmm (moe.py slices count * chunk_dim columns)",
        chunks.count, chunks.x_local.dim(2), chunks.count, cd,
        chunks.x_local.dim(2) - chunks.count * cd));
  const std::string rh = t.trace().tensors[first_rows.tensor].dims.substr(0, 1) + "H";
  Value ps0 =
      tr::Zeros(t, {first_rows.dim(0), w0.dim(2)}, first_rows.dtype(), {"partial_sum0", rh});
  Value ps1 =
      tr::Zeros(t, {first_rows.dim(0), w1.dim(2)}, first_rows.dtype(), {"partial_sum1", rh});
  Value rows = first_rows;
  for (int64_t c = 0; c < chunks.count; ++c) {
    const auto it = t.Iteration("emb_chunk", c, chunks.count);
    const auto up = [&](const Value& w, const Value& ps, const char* w_name, const char* name) {
      const auto sc = t.Scope(std::string(name) == "layer_w0" ? "gmm_wi_0" : "gmm_wi_1");
      const Value piece = tr::Slice(t, w, 1, c * cd, cd, {w_name, "EQH"});
      const Value out = Gmm(ctx, rows, piece, group_sizes, name, false);
      return tr::Binary(t, OpKind::kAdd, ps, out, {name, t.trace().tensors[out.tensor].dims});
    };
    ps0 = up(w0, ps0, "w0_chunk", "layer_w0");
    ps1 = up(w1, ps1, "w1_chunk", "layer_w1");
    if (c + 1 == chunks.count) break;
    const Value next =
        tr::Slice(t, chunks.x_local, 2, (c + 1) * cd, cd, {"next_x_unrouted", "BSQ"});
    const Value gathered = t.AllGather(next, s.expert_axes, 0, true, {"x", "BSQ"});
    rows = MaskRowsPastGroups(ctx, SortRows(ctx, gathered, perm), group_sizes, "x");
  }
  // gmm_up's checkpoint names, as the unchunked path has them.
  const auto bias = [&](Value v, const std::optional<Value>& b, const char* name, const char* ckpt,
                        const char* inner) {
    if (b) {
      const auto c2 = t.Condition("mlp_bias");
      v = tr::Binary(t, OpKind::kAdd, v, *b, {name, t.trace().tensors[v.tensor].dims});
      v = MaskBiasedRows(ctx, v, group_sizes, name);
    }
    return tr::CheckpointName(t, v, ckpt, inner);
  };
  return {bias(ps0, w0_bias, "layer_w0", "moe_mlpwi_0", "mlpwi_0"),
          bias(ps1, w1_bias, "layer_w1", "moe_mlpwi_1", "")};
}

// What one pass of _moe_body leaves inside the shard_map: this device's [B, S, M] output and
// the routing of its (gathered) tokens.
struct BodyResult {
  Value output;
  PermuteOutput perm;
  PartitionSpec routed_batch_spec;
  int64_t routed_batch_rows = 0;  // ExitSparseShardMap: all rows are the batch
};

// _moe_body on this device's tokens `x` [B, S, M] and their logits: route (the ring gathers
// them over the expert axes first; expert parallelism without the ring exchanges rows with
// ragged all-to-alls), the grouped matmuls, and back to [B, S, M].
BodyResult MoeBody(const MoeContext& ctx, const ShardMapOperands& op, Value x, Value logits,
                   std::optional<Value> pre) {
  Tracer& t = ctx.t;
  const MoeSetup& s = ctx.setup;
  const MoeSettings& c = ctx.settings();
  const RoutedShardings& sh = op.shardings;
  const bool batch_sharded = s.batch_sharded_by_ep;
  const Value &w0 = op.w0, &w1 = op.w1, &wo = op.wo;
  std::optional<Value> w0_bias = op.w0_bias, w1_bias = op.w1_bias, wo_bias = op.wo_bias;
  const int64_t batch_size = x.dim(0), sequence_length = x.dim(1);
  const int64_t ep = s.ep;
  const std::vector<std::string>& ep_axes = s.expert_axes;
  EpRouting route;
  route.expert_shard_id = ExpertShardId(ctx);
  const Value& expert_shard_id = route.expert_shard_id;
  const int64_t local_expert_size = s.num_experts / ep;
  PermuteOutput perm;
  Value group_sizes, selected_experts;
  PartitionSpec routed_batch_spec = sh.gate_logits;
  int64_t routed_batch_rows = 0;
  // The release's num_moe_emb_chunks (moe_emb_chunking): the ring gathers and routes the
  // tokens one chunk of the embed dim at a time, and the wi gmms accumulate over the chunks.
  const int64_t emb_chunks = s.ring_of_experts ? c.num_moe_emb_chunks : 0;
  const Value x_local = x;
  const int64_t chunk_dim = emb_chunks > 0 ? x.dim(2) / emb_chunks : 0;
  if (s.ring_of_experts) {
    const auto cond = t.Condition("use_ring_of_experts");
    if (emb_chunks > 0) {
      const auto c2 = t.Condition("num_moe_emb_chunks > 0");
      x = tr::Slice(t, x, 2, 0, chunk_dim, {"first_x_unrouted", "BSQ"});
    }
    x = t.AllGather(x, ep_axes, 0, true, {"x", emb_chunks > 0 ? "BSQ" : "BSM"});
    std::optional<PrecomputedTopK> precomputed;
    if (c.moe_topk_before_ep_all_gather && !c.use_random_routing) {
      precomputed = TopKBeforeAllGather(ctx, logits, pre);
    } else {
      logits = t.AllGather(logits, ep_axes, 0, true, {"logits", "BSE"});
      if (pre) pre = t.AllGather(*pre, ep_axes, 0, true, {"pre_bias_logits", "BSE"});
    }
    routed_batch_spec = WithoutAxes(sh.gate_logits, ep_axes);
    // A batch the expert axes do not shard (decode: one sequence) is gathered as EP identical
    // copies; the block's routing is the first.
    if (sh.gate_logits.rank() > 0 && routed_batch_spec[0] == sh.gate_logits[0])
      routed_batch_rows = batch_size;
    const Value roll = RollToExpertId(ctx, expert_shard_id);
    perm =
        Permute(ctx, x, logits, pre, roll, BiasCountAxes(ctx, sh.gate_logits, true), precomputed);
    group_sizes = tr::Slice(t, perm.group_size, 0, 0, local_expert_size, {"group_sizes", "E"});
    CaptureRingRows(ctx, perm, roll, group_sizes, batch_size, sequence_length);
    x = MaskRowsPastGroups(ctx, perm.sorted_inputs, group_sizes, "x");
    selected_experts = perm.sorted_experts;
  } else {
    perm = Permute(ctx, x, logits, pre, std::nullopt, BiasCountAxes(ctx, sh.gate_logits, false));
    // The sort each device did, for the page's tree of its sorted rows.
    ctx.CapturePerDevice(Capture::kSortedSelectedExpertsPerDevice,
                         perm.sorted_selected_experts.shards);
    ctx.CapturePerDevice(Capture::kSortedExpertsPerDevice, perm.sorted_experts.shards);
    ctx.CapturePerDevice(Capture::kTopKIndicesPerDevice, perm.top_k_indices.shards);
    x = perm.sorted_inputs;
    group_sizes = perm.group_size;
    selected_experts = perm.sorted_experts;
    if (ep > 1) {
      const auto cond = t.Condition("expert parallelism > 1");
      PlanForwardAllToAll(ctx, group_sizes, x.dim(0), route);
      if (batch_sharded) {
        const auto c2 = t.Condition("batch sharded by expert");
        const AllToAllParams& p = *route.forward;
        const int64_t buffer = route.allocated_rows;
        const Value output_shape =
            tr::Empty(t, {buffer, x.dim(1)}, x.dtype(), {"output_shape", "UM"});
        std::vector<Array> sources;
        CaptureAllToAllParams(ctx, Exchange::kDispatch, p);
        x = t.RaggedAllToAll(x, output_shape, p.input_offsets, p.send_sizes, p.output_offsets,
                             p.recv_sizes, ep_axes, {"x", "UM"}, &sources);
        ctx.CapturePerDevice(Capture::kXRowSourcesPerDevice, sources);
        const Value global_group_sizes =
            t.AllGather(group_sizes, ep_axes, 0, false, {"global_group_sizes", "PE"});
        const LocalPermuteOutput lp = LocalPermute(ctx, x, global_group_sizes, local_expert_size,
                                                   expert_shard_id, false, std::nullopt);
        x = lp.sorted_inputs;
        route.local_sorted_indices = lp.sorted_indices;
        group_sizes = lp.local_group_size;
        selected_experts = lp.sorted_experts_ids;
        if (t.numeric()) {
          std::vector<double> fill;
          for (const Array& g : group_sizes.shards) {
            double sum = 0;
            for (const float v : g.values()) sum += v;
            fill.push_back(sum);
          }
          t.AddFact({FactKind::kRaggedBufferFill,
                     "",
                     "",
                     {static_cast<int64_t>(fill.size())},
                     fill,
                     {{"buffer_rows", static_cast<double>(route.buffer_rows)}}});
        }
      } else {
        const auto c2 = t.Condition("batch replicated (global batch 1)");
        // global_group_sizes[None, :] (kGlobalGroupSizesBatch): one batch shard, a size-1 dim, not
        // peers
        const Value global =
            tr::Reshape(t, group_sizes, {1, s.num_experts}, {"global_group_sizes", "1E"});
        const LocalPermuteOutput lp = LocalPermute(ctx, x, global, local_expert_size,
                                                   expert_shard_id, true, selected_experts);
        x = lp.sorted_inputs;
        route.local_sorted_indices = lp.sorted_indices;
        group_sizes = lp.local_group_size;
        selected_experts = lp.sorted_experts_ids;
      }
    }
  }
  AddGroupSizeFacts(ctx, group_sizes);
  if (c.mlp_bias) {
    const auto cond = t.Condition("mlp_bias");
    w0_bias = TransformBias(ctx, selected_experts, *w0_bias, "w0_bias");
    w1_bias = TransformBias(ctx, selected_experts, *w1_bias, "w1_bias");
    wo_bias = TransformBias(ctx, selected_experts, *wo_bias, "wo_bias");
  }
  const bool tensor_transpose = s.tp_transpose > 1;
  auto up = [&](const Value& kernel, const std::optional<Value>& bias, const char* name,
                const char* ckpt, const char* inner) {
    const auto sc = t.Scope(name == std::string("layer_w0") ? "gmm_wi_0" : "gmm_wi_1");
    Value out = Gmm(ctx, x, kernel, group_sizes, name, false, op.experts_replicated);
    if (tensor_transpose) {
      const auto c2 = t.Condition("tensor_transpose > 1");
      out = t.Psum(out, {"tensor_transpose"}, {name, t.trace().tensors[out.tensor].dims});
    }
    if (bias) {
      const auto c2 = t.Condition("mlp_bias");
      out = tr::Binary(t, OpKind::kAdd, out, *bias, {name, t.trace().tensors[out.tensor].dims});
      out = MaskBiasedRows(ctx, out, group_sizes, name);
    }
    return tr::CheckpointName(t, out, ckpt, inner);
  };
  Value layer_w0, layer_w1;
  if (emb_chunks > 0) {
    // moe_emb_chunking tags nothing moe_x_sorted (the release refuses moe_x_sorted but remat
    // with it).
    const auto cond = t.Condition("num_moe_emb_chunks > 0");
    const EmbChunks chunks{x_local, chunk_dim, emb_chunks};
    std::tie(layer_w0, layer_w1) =
        EmbChunkedUp(ctx, chunks, x, perm, group_sizes, w0, w1, w0_bias, w1_bias);
  } else {
    // moe.py:3188-3199 tags the routed rows moe_x_sorted; wi_0's output carries mlpwi_0 and
    // moe_mlpwi_0, wi_1's only moe_mlpwi_1 (moe.py:2915-2916), so `minimal` keeps no wi_1.
    tr::Tag(t, x, "moe_x_sorted");
    layer_w0 = up(w0, w0_bias, "layer_w0", "moe_mlpwi_0", "mlpwi_0");
    layer_w1 = up(w1, w1_bias, "layer_w1", "moe_mlpwi_1", "");
  }
  // The sorted rows and the up projections are read no more once the activation has read them
  // (checkpoint_name keeps them for the backward pass in MaxText; this forward-only engine does
  // not need them): the rows go now, the projections inside the activation after their last use.
  for (Value* done : {&x, &perm.sorted_inputs}) ReleaseData(*done);
  Value intermediate_layer = ApplyFfnActivation(ctx, std::move(layer_w0), std::move(layer_w1));
  Value intermediate_output;
  {
    const auto sc = t.Scope("gmm_wo");
    intermediate_output = Gmm(ctx, intermediate_layer, wo, group_sizes, "intermediate_output", true,
                              op.experts_replicated);
    ReleaseData(intermediate_layer);
    const std::string dims = t.trace().tensors[intermediate_output.tensor].dims;
    if (s.tp > 1) {
      const auto c2 = t.Condition("tensor parallelism > 1");
      intermediate_output =
          t.PsumScatter(intermediate_output, {"tensor"}, 1, true, {"intermediate_output", dims});
    }
    if (wo_bias) {
      const auto c2 = t.Condition("mlp_bias");
      intermediate_output =
          tr::Binary(t, OpKind::kAdd, intermediate_output, *wo_bias, {"intermediate_output", dims});
      intermediate_output =
          MaskBiasedRows(ctx, intermediate_output, group_sizes, "intermediate_output");
    }
    intermediate_output = tr::CheckpointName(t, intermediate_output, "moe_mlpwo", "mlpwo");
  }
  Value output;
  if (s.ring_of_experts) {
    const auto cond = t.Condition("use_ring_of_experts");
    intermediate_output =
        MaskRowsPastGroups(ctx, intermediate_output, group_sizes, "intermediate_output");
    CaptureRowMagnitudes(ctx, intermediate_output, Capture::kRingIntermediateOutputRowMaxPerDevice);
    output = Unpermute(ctx, intermediate_output, perm.sorted_selected_experts, perm.weights,
                       batch_size, sequence_length);
    output = tr::Reshape(t, output, {-1, sequence_length, s.emb / s.tp}, {"output", "BSM"});
    output = t.PsumScatter(output, ep_axes, 0, true, {"output", "BSM"});
  } else {
    if (ep > 1) {
      const auto cond = t.Condition("expert parallelism > 1");
      intermediate_output = ReturnFromExperts(ctx, intermediate_output, route,
                                              batch_size * sequence_length * s.top_k);
    }
    output = Unpermute(ctx, intermediate_output, perm.sorted_selected_experts, perm.weights,
                       batch_size, sequence_length);
  }
  return {output, perm, routed_batch_spec, routed_batch_rows};
}

// defer_small_all_reduces: the shard_map returns the [1, chunks, E] local counts of each
// shard of the axes the per-layer psum would have used (out_spec P(those axes, None, None)),
// as the layer's bias_updates; train.py reduces them after the layer loop.
PathOutput DeferredCountsOut(const MoeContext& ctx, const ShardMapOperands& op,
                             const std::optional<Value>& counts, PathOutput result) {
  if (!ctx.setup.defer_bias_counts || !counts) return result;
  std::vector<PartitionSpec::Entry> entries(3);
  entries[0] = BiasCountAxes(ctx, op.shardings.gate_logits, true);
  result.bias_updates =
      ctx.t.ShardMapOut(*counts, "bias_updates", "PNE", PartitionSpec(std::move(entries)));
  return result;
}

// defer_small_all_reduces: each chunk's local [E] expert counts as the layer's [1, chunks, E]
// bias_updates (moe.py: bias_updates[None, :][None] for the one chunk of an unchunked body,
// jnp.stack(bias_updates_list)[None] for token chunks).
Value DeferredCounts(Tracer& t, const std::vector<Value>& chunks) {
  const auto row = [&t](const Value& counts, const char* name, const char* dims) {
    return tr::Reshape(t, counts, {1, 1, counts.dim(0)}, {name, dims});
  };
  if (chunks.size() == 1) return row(chunks.front(), "bias_updates", "1NE");
  std::vector<Value> rows;
  for (const Value& counts : chunks) rows.push_back(row(counts, "expert_counts", "11E"));
  return tr::Concatenate(t, rows, 1, {"bias_updates", "1NE"});
}

// num_moe_token_chunks > 1 on the ring (moe.py's chunked ring-of-experts pipeline): this
// device's tokens split along the sequence into `count` chunks, each through the whole
// _moe_body (its own all-gathers, routing, grouped matmuls and psum_scatter), the outputs
// concatenated back along the sequence. The load-balance loss is the chunks' mean; the bias
// update is one sign of the expert counts summed over the chunks (the release) or the mean
// of the chunks' updates (e591f30).
PathOutput TokenChunkedRing(const MoeContext& ctx, const ShardMapOperands& op, int64_t count) {
  Tracer& t = ctx.t;
  const auto cond = t.Condition("num_moe_token_chunks > 1 and use_ring_of_experts");
  const int64_t seq = op.x.dim(1);
  if (seq % count != 0)
    Fail(
        "num_moe_token_chunks={}: this device's sequence of {} tokens does not split into {} "
        "chunks (moe.py slices seq // {} tokens per chunk and its shard_map output would be "
        "short); use a count that divides it",
        count, seq, count, count);
  const int64_t chunk = seq / count;
  std::vector<Value> outputs, indices, weights, losses, bias;
  BodyResult body;
  for (int64_t i = 0; i < count; ++i) {
    const auto it = t.Iteration("token_chunk", i, count);
    const Value x_c = tr::Slice(t, op.x, 1, i * chunk, chunk, {"x_c", "BSM"});
    const Value logits_c = tr::Slice(t, op.logits, 1, i * chunk, chunk, {"logits_c", "BSE"});
    std::optional<Value> pre_c;
    if (op.pre_bias_logits)
      pre_c = tr::Slice(t, *op.pre_bias_logits, 1, i * chunk, chunk, {"pre_bias_logits_c", "BSE"});
    body = MoeBody(ctx, op, x_c, logits_c, pre_c);
    outputs.push_back(body.output);
    indices.push_back(body.perm.top_k_indices);
    weights.push_back(body.perm.weights);
    if (body.perm.lb_loss) losses.push_back(*body.perm.lb_loss);
    if (body.perm.bias_counts)
      bias.push_back(*body.perm.bias_counts);
    else if (body.perm.bias_updates)
      bias.push_back(*body.perm.bias_updates);
  }
  const auto sum = [&](const std::vector<Value>& parts, const char* name, const char* dims) {
    Value total = parts.front();
    for (size_t i = 1; i < parts.size(); ++i)
      total = tr::Binary(t, OpKind::kAdd, total, parts[i], {name, dims});
    return total;
  };
  const auto mean = [&](const std::vector<Value>& parts, const char* name, const char* dims) {
    const Value total = sum(parts, name, dims);
    const Value n =
        tr::Constant(t, Scalar(static_cast<float>(count), total.dtype()), {"n_chunks", ""});
    return tr::Binary(t, OpKind::kDiv, total, n, {name, dims});
  };
  const Value output = tr::Concatenate(t, outputs, 1, {"output", "BSM"});
  PermuteOutput perm = body.perm;
  perm.top_k_indices = tr::Concatenate(t, indices, 1, {"top_k_indices", "BSK"});
  perm.weights = tr::Concatenate(t, weights, 1, {"weights", "BSK"});
  perm.lb_loss.reset();
  perm.bias_updates.reset();
  perm.bias_counts.reset();
  if (!losses.empty()) perm.lb_loss = mean(losses, "lb_loss", "");
  if (!bias.empty()) {
    if (ctx.setup.defer_bias_counts) {
      perm.bias_counts = DeferredCounts(t, bias);
    } else if (body.perm.bias_counts) {
      const auto c2 = t.Condition("the expert counts summed over the chunks, one sign");
      const Value counts = sum(bias, "expert_counts", "E");
      perm.bias_updates = BiasUpdatesFromCounts(ctx, counts, count * body.perm.bias_rows);
    } else {
      const auto c2 = t.Condition("the chunks' bias updates averaged");
      perm.bias_updates = mean(bias, "bias_updates", "E");
    }
  }
  return DeferredCountsOut(ctx, op, perm.bias_counts,
                           ExitSparseShardMap(ctx, op.shardings, output, perm,
                                              body.routed_batch_spec, body.routed_batch_rows));
}

}  // namespace

PathOutput SparseMatmul(const MoeContext& ctx, const Value& inputs_in, const Value& gate_logits_in,
                        const std::optional<Value>& pre_bias_in, const ExpertKernels& k_in) {
  Tracer& t = ctx.t;
  const MoeSetup& s = ctx.setup;
  const auto scope = t.Scope("sparse_matmul");
  const ShardMapOperands op =
      EnterSparseShardMap(ctx, inputs_in, gate_logits_in, pre_bias_in, k_in, "wrapper");
  const auto wrapper_scope = t.Scope("wrapper");
  if (s.token_chunks > 1) return TokenChunkedRing(ctx, op, s.token_chunks);
  const BodyResult body = MoeBody(ctx, op, op.x, op.logits, op.pre_bias_logits);
  std::optional<Value> counts;
  if (ctx.setup.defer_bias_counts && body.perm.bias_counts)
    counts = DeferredCounts(t, {*body.perm.bias_counts});
  return DeferredCountsOut(ctx, op, counts,
                           ExitSparseShardMap(ctx, op.shardings, body.output, body.perm,
                                              body.routed_batch_spec, body.routed_batch_rows));
}

}  // namespace shardtrace
