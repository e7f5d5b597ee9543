// The shard_map boundary of sparse_matmul, shared by the seed's monolithic `wrapper`
// (sparse_matmul.cc) and the refactored route/dispatch/gmm pipeline (sparse_pipeline.cc):
// get_routed_moe_shardings, the constraints moe.py applies before the call (including
// moe_fsdp_use_two_stage_all_gather), the in_specs slicing, and the out_specs reassembly
// with the routing captures golden checks compare.
#pragma once

#include <optional>

#include "paths/moe_context.h"
#include "paths/permute.h"

namespace shardtrace {

struct RoutedShardings {
  std::string batch_logical_axis;
  LogicalAxes input_axes, gate_axes;
  PartitionSpec input, gate_logits;
  std::optional<PartitionSpec> pre_bias_logits;
  PartitionSpec w0, w1, wo, w0_bias, w1_bias, wo_bias;
  PartitionSpec output;
  // The logical axes each spec above was resolved from (input_axes/gate_axes for the
  // activations); a wi_spec_override leaves w0_axes/w1_axes empty.
  std::optional<LogicalAxes> w0_axes, w1_axes, wo_axes, w0_bias_axes, w1_bias_axes, wo_bias_axes,
      output_axes;
};

RoutedShardings GetRoutedMoeShardings(const MoeContext& ctx, bool batch_sharded_by_expert);

// The per-device operands of the shard_map body.
struct ShardMapOperands {
  RoutedShardings shardings;
  Value x, logits;
  std::optional<Value> pre_bias_logits;
  Value w0, w1, wo;
  std::optional<Value> w0_bias, w1_bias, wo_bias;
  // The rules left the experts unsharded under expert parallelism: w0/w1/wo hold all E experts
  // and the megablox gmm reads the first E/EP (Gmm's rhs_holds_all_experts); the trace warns.
  bool experts_replicated = false;
};

// Applies the pre-shard_map constraints and slices every operand; `wi_spec_override`
// replaces the w0/w1 in_spec (the chunked pipeline keeps their embed dim sharded). The
// sliced operands are recorded under `body_scope` (the shard_map'd function's name); the
// tracer is left inside the shard_map body.
ShardMapOperands EnterSparseShardMap(
    const MoeContext& ctx, const Value& inputs, const Value& gate_logits,
    const std::optional<Value>& pre_bias_logits, const ExpertKernels& kernels,
    const std::string& body_scope,
    const std::optional<PartitionSpec>& wi_spec_override = std::nullopt);

// Leaves the body: captures routing for golden checks (top_k_* assembled with
// `routed_batch_spec`), then out_specs: output by (batch, norm_length, embed), lb_loss and
// bias_updates as P() (device 0's per-shard value, as MaxText declares them replicated).
// `routed_batch_rows` > 0: only the first that many rows of each device's routing are its
// batch, the rest copies of them (the ring's gather of a batch not sharded over the expert
// axes), and `routed_batch_spec` places those rows.
PathOutput ExitSparseShardMap(const MoeContext& ctx, const RoutedShardings& shardings,
                              const Value& output, const PermuteOutput& routing,
                              const PartitionSpec& routed_batch_spec,
                              int64_t routed_batch_rows = 0);

// `spec` without the mesh axes `axes` (the ring's all-gathered batch).
PartitionSpec WithoutAxes(const PartitionSpec& spec, const std::vector<std::string>& axes);

}  // namespace shardtrace
