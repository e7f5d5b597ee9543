#include "paths/permute.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>

#include "config/moe_lines.h"
#include "numeric/shape_ops.h"
#include "paths/routing.h"
#include "paths/traced_ops.h"
#include "util/checked.h"
#include "util/error.h"

namespace shardtrace {

namespace tr = traced;
using Args = std::vector<const Array*>;

namespace {

// jnp.take(mode="clip")'s indices: clamped into [0, n).
Array ClipIndices(const Array& indices, int64_t n) {
  Array idx = indices;
  for (float& v : idx.mutable_values()) v = std::clamp<float>(v, 0.0f, static_cast<float>(n - 1));
  return idx;
}

// where((arange(rows) < sum(group_sizes))[:, None], rows, 0): the rows past the groups zeroed.
Array ZeroRowsPastGroups(const Array& rows, const Array& group_sizes) {
  if (!rows.numeric()) return rows;
  Array out = rows;
  float kept = 0;
  for (const float g : group_sizes.values()) kept += g;
  const int64_t row = out.shape[1];
  const int64_t first = std::min<int64_t>(static_cast<int64_t>(kept), out.shape[0]);
  std::fill(out.mutable_values().begin() + first * row, out.mutable_values().end(), 0.0f);
  return out;
}

// The letter of a value's last dim: M, or Mc (Q) for one embedding chunk of the pipeline.
std::string LastLetter(Tracer& t, const Value& v) {
  const std::string& dims = t.trace().tensors[v.tensor].dims;
  return dims.empty() ? "M" : dims.substr(dims.size() - 1);
}

// get_topk plus the optional load-balance loss and bias updates (permute's first lines).
PermuteOutput TopKAndLosses(const MoeContext& ctx, const Value& gate_logits,
                            const std::optional<Value>& pre_bias_logits,
                            const std::vector<std::string>& bias_count_axes = {},
                            const std::optional<PrecomputedTopK>& precomputed = std::nullopt) {
  Tracer& t = ctx.t;
  const TopKOutput top = precomputed ? TopKOutput{precomputed->weights, precomputed->indices}
                                     : GetTopK(ctx, gate_logits, pre_bias_logits);
  PermuteOutput out;
  out.weights = top.weights;
  out.top_k_indices = top.indices;
  if (ctx.settings().load_balance_loss_weight > 0.0) {
    const auto cond = t.Condition("load_balance_loss_weight > 0");
    if (precomputed && precomputed->density_prob) {
      out.lb_loss = LoadBalanceLossFromDensityProb(ctx, top.indices, *precomputed->density_prob);
    } else {
      // The release takes the loss's probabilities from the unbiased scores when the routing
      // keeps them (moe.py:1521-1523), so the router bias gets no gradient from the loss.
      const bool unbiased =
          pre_bias_logits && ctx.settings().revision.behaviour.sparse_lb_loss_from_pre_bias_logits;
      const Value probs = RouterProbs(ctx, unbiased ? *pre_bias_logits : gate_logits);
      out.lb_loss = LoadBalanceLoss(ctx, top.indices, probs);
    }
  }
  if (ctx.settings().UpdatesLoadBalanceBias()) {
    const auto cond = t.Condition("routed_bias && routed_bias_update_rate > 0");
    if (ctx.setup.defer_bias_counts) {
      // defer_small_all_reduces: this shard's own counts, no psum (calculate_expert_counts).
      const auto scope = t.Scope("calculate_expert_counts");
      const ExpertCounts counts = CountExperts(ctx, top.indices);
      out.bias_counts = counts.counts;
      out.bias_rows = counts.rows;
    } else if (ctx.setup.token_chunks > 1 &&
               ctx.settings().revision.behaviour.token_chunks_sum_bias_counts) {
      const auto scope = t.Scope("calculate_expert_counts");
      const ExpertCounts counts = CountExperts(ctx, top.indices, bias_count_axes);
      out.bias_counts = counts.counts;
      out.bias_rows = counts.rows;
    } else {
      out.bias_updates = LoadBalanceUpdates(ctx, top.indices, bias_count_axes);
    }
  }
  return out;
}

// flatten_selected_experts (rolled for the ring of experts) and its sort order.
Value FlattenAndSort(const MoeContext& ctx, PermuteOutput& out,
                     const std::optional<Value>& roll_to_expert_id) {
  Tracer& t = ctx.t;
  const int64_t rows = out.top_k_indices.array().size(), e = ctx.setup.num_experts;
  Value flat = tr::Reshape(t, out.top_k_indices, {rows}, {"flatten_selected_experts", "R"});
  if (roll_to_expert_id) {
    const auto cond = t.Condition("use_ring_of_experts");
    flat = t.Apply({OpKind::kRoll,
                    "",
                    {{"expr", "(flatten_selected_experts - roll_to_expert_id) % num_experts"}}},
                   {&flat, &*roll_to_expert_id}, {"flatten_selected_experts", "R"},
                   [&](const Args& a) {
                     return Mod(Sub(*a[0], *a[1]), Scalar(static_cast<float>(e), DType::kInt32));
                   });
  }
  out.sorted_selected_experts = tr::Argsort(t, flat, {"sorted_selected_experts", "R"});
  return flat;
}

// group_size = bincount(flat) and the expert id of each sorted row.
void GroupSizes(const MoeContext& ctx, PermuteOutput& out, const Value& flat) {
  Tracer& t = ctx.t;
  const int64_t e = ctx.setup.num_experts;
  out.group_size = tr::Bincount(t, flat, e, {"group_size", "E"});
  const Value expert_indices = tr::Constant(t, Arange(e), {"expert_indices", "E"});
  out.sorted_experts =
      tr::RepeatBy(t, expert_indices, out.group_size, flat.array().size(), {"sorted_experts", "R"});
}

// inputs_2d = inputs.reshape(B*S, M), scaled by the router scores for llama4.
Value Inputs2d(const MoeContext& ctx, const Value& inputs, const Value& weights) {
  (void)weights;
  return tr::Reshape(ctx.t, inputs, {inputs.dim(0) * inputs.dim(1), inputs.dim(2)},
                     {"inputs_2d", fmt::format("T{}", LastLetter(ctx.t, inputs))});
}

Value ScaleByRouterScores(const MoeContext& ctx, Value inputs_2d, const Value& weights) {
  Tracer& t = ctx.t;
  const MoeSetup& s = ctx.setup;
  if (s.decoder_block != "llama4") return inputs_2d;
  const auto cond = t.Condition("decoder_block == llama4");
  const Value f32 = tr::Cast(t, weights, DType::kFloat32, {"weights", "BSK"});
  const Value scores = tr::Activation(t, "sigmoid", f32, {"router_scores", "BSK"});
  const Value flat_scores =
      tr::Reshape(t, scores, {inputs_2d.dim(0), s.top_k}, {"router_scores", "TK"});
  return tr::Binary(t, OpKind::kMul, inputs_2d, flat_scores,
                    {"inputs_2d", fmt::format("T{}", LastLetter(t, inputs_2d))});
}

// replicated_inputs_2d = repeat(inputs_2d, K); sorted_inputs = its rows in expert order.
// With the release's moe_use_direct_token_gather, _route_activations takes each sorted row
// from the tokens themselves: row j of the (token, k) order is token j // K, so the rows are
// inputs_2d[argsort(flat) // K], the same values without the [R, M] copies.
Value ReplicateAndSort(const MoeContext& ctx, const Value& inputs_2d,
                       const Value& sorted_selected_experts) {
  Tracer& t = ctx.t;
  const std::string rm = fmt::format("R{}", LastLetter(t, inputs_2d));
  if (ctx.settings().moe_use_direct_token_gather) {
    const auto cond = t.Condition("moe_use_direct_token_gather");
    // sort_activations.route argsorts the same flat ids again; it is sorted_selected_experts
    // (one argsort after XLA's CSE), so the trace reuses it.
    const auto k = static_cast<float>(ctx.setup.top_k);
    const Value tokens =
        t.Apply({OpKind::kFloorDivide,
                 "",
                 {{"expr", "argsort(flatten_selected_experts) // num_experts_per_tok"}}},
                {&sorted_selected_experts}, {"token_indices", "R"},
                [&](const Args& a) { return FloorDivide(*a[0], Scalar(k, DType::kInt32)); });
    const Value sorted = tr::Take(t, inputs_2d, tokens, 0, {"sorted_inputs", rm});
    return tr::Cast(t, sorted, ctx.setup.dtype, {"sorted_inputs", rm});
  }
  const Value replicated =
      tr::Repeat(t, inputs_2d, ctx.setup.top_k, 0, {"replicated_inputs_2d", rm});
  const Value sorted = tr::Take(t, replicated, sorted_selected_experts, 0, {"sorted_inputs", rm});
  return tr::Cast(t, sorted, ctx.setup.dtype, {"sorted_inputs", rm});
}

}  // namespace

PermuteOutput RouteTokens(const MoeContext& ctx, const Value& gate_logits,
                          const std::optional<Value>& pre_bias_logits,
                          const std::optional<Value>& roll_to_expert_id) {
  PermuteOutput out = TopKAndLosses(ctx, gate_logits, pre_bias_logits);
  const Value flat = FlattenAndSort(ctx, out, roll_to_expert_id);
  GroupSizes(ctx, out, flat);
  return out;
}

Value SortRows(const MoeContext& ctx, const Value& inputs, const PermuteOutput& routing) {
  const Value inputs_2d =
      ScaleByRouterScores(ctx, Inputs2d(ctx, inputs, routing.weights), routing.weights);
  return ReplicateAndSort(ctx, inputs_2d, routing.sorted_selected_experts);
}

// moe.py's permute, in its order (MoeStatement::kPermute): the inputs are reshaped
// before get_topk, and the rows are repeated and sorted before bincount counts them.
PermuteOutput Permute(const MoeContext& ctx, const Value& inputs, const Value& gate_logits,
                      const std::optional<Value>& pre_bias_logits,
                      const std::optional<Value>& roll_to_expert_id,
                      const std::vector<std::string>& bias_count_axes,
                      const std::optional<PrecomputedTopK>& precomputed) {
  const auto scope = ctx.t.Scope("permute");
  const Value inputs_2d_plain = Inputs2d(ctx, inputs, gate_logits);
  PermuteOutput out =
      TopKAndLosses(ctx, gate_logits, pre_bias_logits, bias_count_axes, precomputed);
  const Value inputs_2d = ScaleByRouterScores(ctx, inputs_2d_plain, out.weights);
  const Value flat = FlattenAndSort(ctx, out, roll_to_expert_id);
  out.sorted_inputs = ReplicateAndSort(ctx, inputs_2d, out.sorted_selected_experts);
  GroupSizes(ctx, out, flat);
  return out;
}

Value Unpermute(const MoeContext& ctx, const Value& intermediate,
                const Value& sorted_selected_experts, const Value& weights, int64_t batch_size,
                int64_t sequence_length) {
  Tracer& t = ctx.t;
  const MoeSetup& s = ctx.setup;
  const auto scope = t.Scope("unpermute");
  const int64_t k = s.top_k;
  const Value inverse = tr::Argsort(t, sorted_selected_experts, {"unsort_indices", "R"});
  const Value unsorted = tr::Take(t, intermediate, inverse, 0, {"unsort_intermediate", "RM"});
  Value w = tr::Reshape(t, weights, {weights.array().size() / k, k}, {"reshaped_weights", "TK"});
  Value x =
      tr::Reshape(t, unsorted, {w.dim(0), k, unsorted.dim(1)}, {"reshaped_intermediate", "TKM"});
  const auto ws = t.Scope("weight_sum");
  if (s.decoder_block == "llama4") {
    const auto cond = t.Condition("decoder_block == llama4");
    w = t.Apply(
        {OpKind::kOnesLike, "", {}}, {&w}, {"reshaped_weights", "TK"},
        [](const Args& a) { return FullLike(*a[0], 1.0f, a[0]->dtype); },
        [](const Args&, const Args&, const Args&) { return std::vector<Array>{Array{}}; });
    ctx.CapturePerDevice(Capture::kWeightSumWeightsPerDevice, w.shards);
  }
  if (ctx.settings().float32_weight_sum) {
    const auto cond = t.Condition("float32_weight_sum");
    x = tr::Cast(t, x, DType::kFloat32, {"reshaped_intermediate", "TKM"});
    w = tr::Cast(t, w, DType::kFloat32, {"reshaped_weights", "TK"});
  }
  // moe.py spells it "BKE,BK -> BE" (E = the embedding there).
  const Value out =
      tr::Einsum(t, "BKE,BK -> BE", x, w, PromoteTypes(x.dtype(), w.dtype()), {"output", "TM"});
  // moe.py reshapes to (batch_size, sequence_length, -1). Under the ring of experts the rows
  // are the whole expert-parallel group's, so -1 folds the gathered batch into the last dim
  // ([1, S, 2*M] for 2 shards): that dim is P*M (W), not M.
  const int64_t last = out.array().size() / (batch_size * sequence_length);
  const std::string dims = last == out.dim(1) ? "BSM" : "BSW";
  const Value reshaped = tr::Reshape(t, out, {batch_size, sequence_length, -1}, {"output", dims});
  return tr::Cast(t, reshaped, s.dtype, {"output", dims});
}

LocalPermuteOutput LocalSortOrder(const MoeContext& ctx, int64_t rows, const std::string& row_dim,
                                  const Value& global_group_sizes, int64_t local_expert_size,
                                  const Value& shard_index, bool is_offset,
                                  const std::optional<Value>& global_sorted_experts,
                                  const Value* inputs) {
  Tracer& t = ctx.t;
  const int64_t shards = global_group_sizes.dim(0), l = local_expert_size;
  const Value local_sizes_2d = t.Apply(
      {OpKind::kDynamicSliceInDim,
       "",
       {{"start", "shard_index * local_expert_size"}, {"size", std::to_string(l)}, {"axis", "1"}}},
      {&global_group_sizes, &shard_index},
      // the batch shards' dim as global_group_sizes has it: P, or 1 when the batch is replicated
      {"all_shard_local_sizes",
       t.trace().tensors[global_group_sizes.tensor].dims.substr(0, 1) + "E"},
      [&](const Args& a) {
        const int64_t start = a[1]->numeric() ? static_cast<int64_t>(a[1]->values()[0]) * l : 0;
        return Slice(*a[0], 1, start, l);
      });
  // [P*E]: every peer's local-expert slots in one axis (kLocalSizesReshape), not the E experts;
  // with one batch shard (decode) just this device's experts.
  const std::string slots = shards == 1 ? "E" : "L";
  const Value local_sizes = tr::Reshape(t, local_sizes_2d, {shards * l}, {"local_sizes", slots});
  LocalPermuteOutput out;
  if (ctx.settings().ragged_buffer_factor > 0.0 &&
      ctx.settings().revision.behaviour.ragged_buffer_truncates_group_sizes) {
    // _maybe_truncate_local_group_size: the slices arrive in (peer, local expert) order and the
    // buffer keeps the first `buffer` rows, so each slot counts only its rows below that.
    // MaxText clamps at inputs.shape[0], the buffer's rows (what a numeric run's record shows;
    // its array holds only the rows that arrived, fewer when no device overflows).
    const auto cond = t.Condition("ragged_buffer_factor > 0");
    const int64_t buffer = t.RecordedRows(row_dim, rows);
    out.local_group_size =
        t.Apply({OpKind::kSum,
                 "",
                 {{"expr",
                   "sum(diff(minimum(cumsum(concat([0], all_shard_local_sizes.reshape(-1))), "
                   "buffer)).reshape(P, L), 0)"},
                  {"buffer", std::to_string(buffer)}}},
                {&local_sizes_2d}, {"local_group_size", "E"}, [&](const Args& a) {
                  if (!a[0]->numeric()) return Sum(*a[0], 0, false);
                  const std::vector<float>& sizes = a[0]->values();
                  std::vector<float> kept(static_cast<size_t>(l), 0.0f);
                  int64_t before = 0;  // rows of the slots before this one, within the buffer
                  for (size_t i = 0; i < sizes.size(); ++i) {
                    const int64_t end = std::min(before + static_cast<int64_t>(sizes[i]), buffer);
                    kept[i % static_cast<size_t>(l)] += static_cast<float>(end - before);
                    before = end;
                  }
                  return Array::FromData({l}, a[0]->dtype, std::move(kept));
                });
  } else {
    out.local_group_size = tr::Sum(t, local_sizes_2d, 0, false, {"local_group_size", "E"});
  }
  Value expert_indices;
  if (is_offset) {
    const auto cond = t.Condition("is_offset (batch replicated across expert shards)");
    expert_indices = t.Apply({OpKind::kWhere,
                              "",
                              {{"expr",
                                "where(global_sorted_experts // local_expert_size == shard_index, "
                                "global_sorted_experts % local_expert_size, local_expert_size)"}}},
                             {&*global_sorted_experts, &shard_index}, {"expert_indices", row_dim},
                             [&](const Args& a) {
                               const Array lsize = Scalar(static_cast<float>(l), DType::kInt32);
                               const Array divided = FloorDivide(*a[0], lsize);
                               return Where(Equal(divided, *a[1]), Mod(*a[0], lsize),
                                            FullLike(*a[0], static_cast<float>(l), DType::kInt32));
                             });
  } else {
    const Value base =
        tr::Constant(t, Mod(Arange(shards * l), Scalar(static_cast<float>(l), DType::kInt32)),
                     {"base_indices", slots});
    expert_indices = tr::RepeatBy(t, base, local_sizes, rows, {"expert_indices", row_dim});
  }
  out.sorted_indices = tr::Argsort(t, expert_indices, {"sorted_indices", row_dim});
  if (inputs)
    out.sorted_inputs = tr::Take(t, *inputs, out.sorted_indices, 0,
                                 {"sorted_inputs", row_dim + LastLetter(t, *inputs)});
  out.sorted_experts_ids =
      tr::Take(t, expert_indices, out.sorted_indices, 0, {"sorted_experts_ids", row_dim});
  // What each device's sort did, for the pages' trees of the local order.
  ctx.CapturePerDevice(Capture::kLocalPermuteSortedIndicesPerDevice, out.sorted_indices.shards);
  ctx.CapturePerDevice(Capture::kLocalPermuteSortedExpertsIdsPerDevice,
                       out.sorted_experts_ids.shards);
  ctx.CapturePerDevice(Capture::kLocalGroupSizePerDevice, out.local_group_size.shards);
  ctx.CapturePerDevice(Capture::kExpertShardIdPerDevice, shard_index.shards);
  return out;
}

LocalPermuteOutput LocalPermute(const MoeContext& ctx, const Value& inputs,
                                const Value& global_group_sizes, int64_t local_expert_size,
                                const Value& shard_index, bool is_offset,
                                const std::optional<Value>& global_sorted_experts) {
  const auto scope = ctx.t.Scope("local_permute");
  const std::string row_dim = ctx.t.trace().tensors[inputs.tensor].dims.substr(0, 1);
  // moe.py sorts the inputs before it reads the sorted expert ids (in local_permute).
  LocalPermuteOutput out =
      LocalSortOrder(ctx, inputs.dim(0), row_dim, global_group_sizes, local_expert_size,
                     shard_index, is_offset, global_sorted_experts, &inputs);
  return out;
}

void CaptureAllToAllParams(const MoeContext& ctx, Exchange exchange, const AllToAllParams& p) {
  const std::array<Capture, 4> ids = AllToAllParamCaptures(exchange);
  const std::array<const Value*, 4> values = {&p.input_offsets, &p.send_sizes, &p.output_offsets,
                                              &p.recv_sizes};
  for (size_t i = 0; i < ids.size(); ++i) ctx.CapturePerDevice(ids[i], values[i]->shards);
}

AllToAllParams GetAllToAllParams(const MoeContext& ctx, const Value& all_shards_group_sizes,
                                 const Value& shard_id, int64_t n, bool is_batch_sharded) {
  Tracer& t = ctx.t;
  const auto scope = t.Scope("get_all_to_all_params");
  const auto cond = t.Condition(is_batch_sharded ? "" : "batch not sharded by expert");
  auto make = [&](const char* name, const char* expr, auto fn) {
    return t.Apply({OpKind::kTransformArray, "", {{"strategy", name}, {"expr", expr}}},
                   {&all_shards_group_sizes, &shard_id}, {name, "P"}, [&](const Args& a) {
                     if (!a[0]->numeric() || !a[1]->numeric())
                       return Array::Symbolic({n}, DType::kInt32);
                     const std::vector<float>& g = a[0]->values();
                     const auto id = static_cast<int64_t>(a[1]->values()[0]);
                     std::vector<float> v(static_cast<size_t>(n), 0.0f);
                     for (int64_t j = 0; j < n; ++j) v[j] = fn(g, id, j);
                     return Array::FromData({n}, DType::kInt32, std::move(v));
                   });
  };
  if (is_batch_sharded) {
    // g is [n(src), n(dst)], row-major.
    auto at = [n](const std::vector<float>& g, int64_t src, int64_t dst) {
      return g[src * n + dst];
    };
    return {make("input_offsets", "concat([0], cumsum(A[shard_id])[:-1])",
                 [&](const std::vector<float>& g, int64_t id, int64_t j) {
                   float sum = 0;
                   for (int64_t x = 0; x < j; ++x) sum += at(g, id, x);
                   return sum;
                 }),
            make("send_sizes", "A[shard_id]",
                 [&](const std::vector<float>& g, int64_t id, int64_t j) { return at(g, id, j); }),
            make("output_offsets", "cumsum(concat([0-row], A), axis=0)[shard_id]",
                 [&](const std::vector<float>& g, int64_t id, int64_t j) {
                   float sum = 0;
                   for (int64_t s = 0; s < id; ++s) sum += at(g, s, j);
                   return sum;
                 }),
            make("recv_sizes", "A[:, shard_id]",
                 [&](const std::vector<float>& g, int64_t id, int64_t j) { return at(g, j, id); })};
  }
  // g is [n]: every shard sends its own slice to everyone.
  return {make("input_offsets", "zeros(EP)",
               [](const std::vector<float>&, int64_t, int64_t) { return 0.0f; }),
          make("send_sizes", "repeat(A[shard_id], EP)",
               [](const std::vector<float>& g, int64_t id, int64_t) { return g[id]; }),
          make("output_offsets", "repeat(concat([0], cumsum(A[:-1]))[shard_id], EP)",
               [](const std::vector<float>& g, int64_t id, int64_t) {
                 float sum = 0;
                 for (int64_t x = 0; x < id; ++x) sum += g[x];
                 return sum;
               }),
          make("recv_sizes", "A",
               [](const std::vector<float>& g, int64_t, int64_t j) { return g[j]; })};
}

int64_t RaggedBufferSize(int64_t local_batch, int64_t ep_degree, int64_t global_experts,
                         int64_t top_k, double ragged_buffer_factor) {
  const double balanced = static_cast<double>(local_batch);
  if (ragged_buffer_factor > 0.0) {
    const int64_t rows = CheckedToInt(balanced * ragged_buffer_factor,
                                      "ragged buffer size (local tokens x ragged_buffer_factor)");
    // moe.py sizes the buffer int(local rows x factor) and allocates it as it is: a factor
    // below 1/rows leaves no row to receive into, which MaxText cannot run (shardtrace traced
    // it as a [0, M] buffer and exited 0).
    if (rows < 1)
      Fail(
          "ragged_buffer_factor: {} leaves the ragged buffer int({} local rows x {}) = {} rows; "
          "expected a factor of at least 1/{} (or <= 0 for the worst-case buffer)",
          ragged_buffer_factor, local_batch, ragged_buffer_factor, rows, local_batch);
    return rows;
  }
  // Worst case: every local token on one shard, capped by E/K when local experts < top_k.
  const double worst = std::min(static_cast<double>(ep_degree),
                                static_cast<double>(global_experts) / static_cast<double>(top_k));
  return CheckedToInt(balanced * worst, "ragged buffer size (worst case)");
}

Value Gmm(const MoeContext& ctx, const Value& inputs, const Value& kernel, const Value& group_sizes,
          const std::string& name, bool wo_tiles, bool rhs_holds_all_experts) {
  Tracer& t = ctx.t;
  const MoeSettings& c = ctx.settings();
  const MoeSetup& s = ctx.setup;
  // A numeric ragged buffer holds only the routed rows; the op reports MaxText's rows.
  const int64_t rows = t.RecordedRows(t.trace().tensors[inputs.tensor].dims, inputs.dim(0));
  const int64_t tile = c.wi_tile_fwd.batch_seq;
  const int64_t padded = tile > 0 ? (rows + tile - 1) / tile * tile : rows;
  const GmmTiling& tiles = wo_tiles ? c.wo_tile_fwd : c.wi_tile_fwd;
  const int64_t tk = wo_tiles ? tiles.mlp_dim : tiles.embed_dim;
  const int64_t tn = wo_tiles ? tiles.embed_dim : tiles.mlp_dim;
  const int64_t tm = tiles.batch_seq;
  std::string tiling = fmt::format("({}, {}, {})", tm, tk, tn);
  if (s.gmm_kernel == "jax.lax.ragged_dot")  // jax_ragged_dot_gmm clips the tiles to the operand
    tiling = fmt::format("({}, {}, {})", std::min(tm, padded), std::min(tk, inputs.dim(1)),
                         std::min(tn, kernel.dim(2)));
  const std::string row = t.trace().tensors[inputs.tensor].dims.substr(0, 1);
  const std::string out_dims = row + (wo_tiles ? "M" : "H");
  // moe.py's gmm letters (K = the contracted dim, G = groups); emitters read them parsed to
  // write the page's ("UM,EMH->UH").
  OpDesc op(
      OpKind::kGmm, "RK,GKN->RN",
      {{"kernel", s.gmm_kernel},
       {"tiling_fwd", tiling},
       {"rows", std::to_string(rows)},
       {"padded_rows", fmt::format("{} (multiple of wi_tile_fwd_batch_seq {})", padded, tile)},
       {"padding", std::to_string(padded - rows)}});
  // Experts replicated into shard_map (EnterSparseShardMap allows it for megablox only): rhs
  // holds every expert, group_sizes the local ones, and megablox with group_offset 0 reads rhs
  // groups 0 .. len(group_sizes)-1 (backend.py's rhs index group_id - group_offset).
  const int64_t groups = group_sizes.dim(0);
  const int64_t extra = rhs_holds_all_experts ? kernel.dim(0) - groups : 0;
  if (extra > 0) {
    op.attrs.push_back({"group_offset", "0"});
    op.attrs.push_back({"rhs_groups_read", fmt::format("0-{} of {}", groups - 1, kernel.dim(0))});
  }
  op.einsum = ParseEinsum(op.equation);
  const DType dtype = s.dtype;
  const auto used = [groups, extra](const Array& rhs) {
    return extra > 0 ? Slice(rhs, 0, 0, groups) : rhs;
  };
  return t.Apply(
      op, {&inputs, &kernel, &group_sizes}, {name, out_dims},
      [&](const Args& a) {
        // Zero padding rows never reach a group, so the math is ragged_dot's.
        return RaggedDot(Cast(*a[0], dtype), Cast(used(*a[1]), dtype), *a[2], dtype, t.pool());
      },
      [dtype, used, extra](const Args& a, const Args&, const Args& g) {
        auto [dl, dr] = RaggedDotVjp(Cast(*a[0], dtype), Cast(used(*a[1]), dtype), *a[2], *g[0]);
        Array d_rhs = CastVjp(used(*a[1]), dr);
        // megablox's tgmm writes the gradient of the groups it visits only: the rest of its
        // [G, K, N] output is never written (uninitialized memory on TPU, NaN in Pallas
        // interpret mode, which MaxText's step on CPU shows), so it is NaN here too.
        if (extra > 0) d_rhs = Pad(d_rhs, 0, 0, extra, std::numeric_limits<float>::quiet_NaN());
        return std::vector<Array>{CastVjp(*a[0], dl), std::move(d_rhs), Array{}};
      });
}

Value TransformBias(const MoeContext& ctx, const Value& expert_ids, const Value& bias,
                    const std::string& name) {
  const std::string row = ctx.t.trace().tensors[expert_ids.tensor].dims.substr(0, 1);
  const std::string col = ctx.t.trace().tensors[bias.tensor].dims.substr(1);
  return ctx.t.Apply(
      {OpKind::kTake, "", {{"expr", "bias[expert_ids]"}, {"mode", "clip"}}}, {&bias, &expert_ids},
      {name, row + col},
      [](const Args& a) {
        if (!a[0]->numeric() || !a[1]->numeric()) {
          Shape s = a[1]->shape;
          s.push_back(a[0]->shape[1]);
          return Array::Symbolic(s, a[0]->dtype);
        }
        return Take(*a[0], ClipIndices(*a[1], a[0]->shape[0]), 0);
      },
      [](const Args& a, const Args&, const Args& g) {
        const Array idx = ClipIndices(*a[1], a[0]->shape[0]);
        return std::vector<Array>{SelectionVjp([&](const Array& p) { return Take(p, idx, 0); },
                                               a[0]->shape, a[0]->dtype, *g[0]),
                                  Array{}};
      });
}

Value MaskRowsPastGroups(const MoeContext& ctx, const Value& rows, const Value& group_sizes,
                         const std::string& name) {
  const std::string dims = ctx.t.trace().tensors[rows.tensor].dims;
  return ctx.t.Apply(
      {OpKind::kWhere,
       "",
       {{"expr",
         fmt::format("where((arange({0}.shape[0]) < sum(group_sizes))[:, None], {0}, 0)", name)}}},
      {&rows, &group_sizes}, {name, dims},
      [](const Args& a) { return ZeroRowsPastGroups(*a[0], *a[1]); },
      // A mask that does not depend on the rows: the cotangent is masked the same way.
      [](const Args& a, const Args&, const Args& g) {
        return std::vector<Array>{ZeroRowsPastGroups(*g[0], *a[1]), Array{}};
      });
}

void AddGroupSizeFacts(const MoeContext& ctx, const Value& group_sizes) {
  if (!ctx.t.numeric()) return;
  std::vector<double> sizes;
  double max_rows = 0, total_rows = 0;
  for (const Array& g : group_sizes.shards) {
    double rows = 0;
    for (const float v : g.values()) {
      sizes.push_back(v);
      rows += v;
    }
    max_rows = std::max(max_rows, rows);
    total_rows += rows;
  }
  const int64_t devices = static_cast<int64_t>(group_sizes.shards.size());
  ctx.t.AddFact({FactKind::kGroupSizesPerDevice, "", "", {devices, group_sizes.dim(0)}, sizes, {}});
  const double mean = total_rows / static_cast<double>(devices);
  ctx.t.AddFact({FactKind::kLoadImbalance, "", "", {}, {mean > 0 ? max_rows / mean : 0.0}, {}});
}

}  // namespace shardtrace
