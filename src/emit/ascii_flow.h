// The ASCII box diagram of a Trace, drawn the way the visualization conventions
// (../shared/seeds/visualization-conventions.md) ask, within a fixed width (100 columns by
// default) so it reads on GitHub and in a terminal. The trace is cut into stages: one
// `┌─┐` box per run of records in one scope (titled with the scope path, so boxes never
// nest more than one constraint deep), holding that scope's tensors in program order,
// each line saying the tensor's name, weight/act, shape and dtype, and the op that made it
// with its inputs (`← einsum("BSM,ME->BSE", inputs, kernel)`); a chain of casts and
// elementwise ops on one name folds into that one line (`← as f32, softmax, as bf16`).
// A tensor whose sharding an explicit statement fixed (kernel_axes,
// maybe_shard_with_logical/pspec, shard_map in/out specs) sits in a double-line `╔═╗` box
// with, per dim, the logical axis and the mesh axes behind its PartitionSpec, and the
// per-device block. Between stages a `▼` names the tensors the next stage takes from
// earlier ones (its data dependencies); consecutive stages that do not depend on each
// other (wi_0 and wi_1) are drawn side by side under a fork when they fit. Collectives get
// their own `⇄` line. It only formats what the Trace recorded: nothing here resolves a
// sharding.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "ir/trace.h"
#include "spmd/spmd_result.h"

namespace shardtrace {

// Every output line is at most `max_width` display columns (long op descriptions wrap
// with a hanging indent; parallel stages fall back to one below the other). Boxes are
// rectangular. With `only_scope`, only the stages whose scope path contains it are drawn
// (the routing stages of a trace: "get_topk"). Ends with a newline.
// `spmd` is `trace`'s SPMD result: per-device shapes and the collectives XLA inserts.
std::string AsciiFlow(const Trace& trace, const SpmdResult& spmd, size_t max_width = 100,
                      std::string_view only_scope = "");

// "bf16", "f32", "i32", "bool": the short dtype names the flow and the Mermaid graph use.
std::string ShortDtype(DType dtype);

// "dispatch: act [E=4,B=4,C=2,M=16] bf16": how the flow and the Mermaid graph name a tensor.
std::string TensorHead(const TensorRecord& t);

// What an op computes as moe.py writes it, from its `expr` attribute: "(flatten_selected_experts
// - roll_to_expert_id) % num_experts" rather than an op name moe.py does not call (`roll`); a
// transform_array formula names its matrix ("A[shard_id], A = all_shards_group_sizes"). ""
// when the op records none.
std::string OpFormula(const Trace& trace, const OpRecord& op);

}  // namespace shardtrace
