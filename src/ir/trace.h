// Trace: what one run of a MaxText MoE/MLP path recorded, in program order. It is plain
// data (ids are vector indices, no pointers) produced by the Tracer and consumed by the
// emitters (table, json, dump, dot, ...), which never re-derive shardings. It holds what the
// code wrote; what XLA's SPMD partitioner would add (propagated specs, per-device shapes,
// implied collectives, memory) is a SpmdResult beside it (spmd/spmd_result.h). Besides its
// index, every tensor has a stable id (scope path, name, occurrence) that names the same
// tensor across configs and runs: the key diff and compare-dump align tensors by.
//
// Dim letters (`TensorRecord::dims`), one per dimension, fixed for life:
//   B batch            S sequence (S/cp inside context groups)   N context groups (cp)
//   M model/embed      E experts (global or local)               K top-k choices
//   C expert capacity  H expert hidden (mlp) dim                 G routing groups
//   g experts per group  F dense/shared MLP hidden dim           T tokens (B*S, flattened)
//   R routed rows (T*K, sorted by expert)                        U ragged buffer rows
//   P expert-parallel shards (peers of an all-to-all)            A activations (fused wi)
//   1 a broadcast dim of size 1                                  - a dim with no name
// and dims moe.py folds from two or sizes that only resemble a letter (pages label them,
// emit/dim_letters.h):
//   L P*E: local_permute's (peer, local expert) slots   W P*M: the ring's batch folded into M
//   J the top 2 experts of a routing group (fixed 2)   V the topk_routing_group kept groups
//   Q one embedding chunk of M (pipeline)              D C+1: the capacity one-hot with slot 0
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "config/maxtext_revision.h"
#include "ir/collective_kind.h"
#include "ir/fact.h"
#include "ir/op_kind.h"
#include "numeric/array.h"
#include "numeric/einsum.h"
#include "shard/axis_rules.h"
#include "shard/partition_spec.h"

namespace shardtrace {

enum class TensorKind { kWeight, kAct };
std::string ToString(TensorKind kind);  // "weight" | "act"

// The explicit statement in moe.py/linears.py that fixed a tensor's sharding.
enum class Constraint {
  kNone,
  kKernelAxes,        // nnx.Param(..., out_sharding=kernel_axes)
  kShardWithLogical,  // _maybe_shard_with_logical / maybe_shard_with_logical
  kShardWithPspec,    // _maybe_shard_with_pspec
  kShardMapIn,        // jax.shard_map in_specs
  kShardMapOut,       // jax.shard_map out_specs
};
// "kernel_axes", "maybe_shard_with_logical", ..., "" for kNone.
std::string ToString(Constraint constraint);

// min/max/mean over every element of every device's shard; nonzeros for masks/ints.
struct NumericSummary {
  double min = 0, max = 0, mean = 0;
  int64_t nonzeros = 0;
  int64_t elements = 0;
};

struct TensorRecord {
  int id = 0;  // index into Trace::tensors
  // "<scope>/<name>#<n>": the n-th tensor named `name` recorded directly in `scope`
  // ("RoutedMoE/gate/output#1"; "inputs#0" at the top). Unique within a trace; tensors
  // elsewhere in the trace do not shift it, so it is stable across configs and paths.
  std::string stable_id;
  std::string name;  // the moe.py variable name: gate_logits, dispatch_mask, layer_w0, ...
  TensorKind kind = TensorKind::kAct;
  DType dtype = DType::kFloat32;
  std::string dims;  // one letter per dim, see the table above
  Shape shape;       // global shape; inside shard_map the per-device block shape
  std::optional<LogicalAxes> logical_axes;
  Constraint constraint = Constraint::kNone;
  // What the statement wrote (after size-1 removal); set with a constraint. The spec XLA would
  // propagate to the others, and every per-device shape, are the SPMD model's
  // (spmd/spmd_result.h), beside the Trace.
  std::optional<PartitionSpec> partition_spec;
  std::string scope;      // RoutedMoE/sparse_matmul/wrapper/permute
  std::string condition;  // e.g. "capacity_factor > 0"; empty when unconditional
  // The nested conditions `condition` joins with " && ", outermost first, so renderers can
  // state a clause once for a whole stage without splitting the text again.
  std::vector<std::string> condition_clauses;
  // What a reader should know about the value that is not a run condition, e.g. "read only
  // by load_balance_loss (moe.py:1706-1707)"; empty for most tensors.
  std::string note;
  bool in_shard_map = false;
  std::optional<NumericSummary> summary;
  std::vector<std::string> warnings;  // uneven divisions
};

// A collective between virtual devices, with the bytes it moves.
struct CollectiveRecord {
  CollectiveKind kind = CollectiveKind::kAllGather;
  CollectiveOrigin origin = CollectiveOrigin::kWritten;
  std::vector<std::string> axes;  // mesh axes it runs over
  int64_t participants = 1;       // group size
  int64_t groups = 1;             // independent groups on the mesh
  // Per device (indexed by device), bytes sent and received; symbolic: static sizes.
  std::vector<int64_t> bytes_sent;
  std::vector<int64_t> bytes_received;
};

struct OpRecord {
  int id = 0;
  OpKind kind = OpKind::kInput;
  // einsum equation as moe.py writes it ("BSM,EMH->BSEH"); a gmm, which moe.py calls with no
  // equation, gets the kernel's "RK,GKN->RN" (rows x contracted, groups x contracted x out)
  std::string equation;
  std::vector<int> inputs;
  std::vector<int> outputs;
  std::vector<std::pair<std::string, std::string>> attrs;  // ordered, already formatted
  std::string scope;
  std::optional<CollectiveRecord> collective;  // a collective moe.py writes
  std::string function;  // kActivation: the activation ("silu", "sigmoid", ...)
  // kEinsum: the equation as the tracer parsed it (operand, output, contracted letters),
  // so emitters read the letters instead of re-parsing `equation`.
  std::optional<ParsedEinsum> einsum;

  // The name the op is written as: the activation for kActivation, else ToString(kind).
  std::string Name() const;

  // "<scope>/<name>:<first output>#<n>": the n-th such op recorded directly in `scope`
  // ("RoutedMoE/sparse_matmul/wrapper/ragged_all_to_all:x#0"). Unique within a trace and,
  // like a tensor's, not shifted by unrelated ops, so diff aligns ops across configs by it.
  std::string stable_id;
};

// The description MaxText's dump gives a constrained value no local variable names.
inline constexpr std::string_view kUnknownActivation = "Unknown";

// One entry of MaxText's debug_sharding activation dump (input_shardings.json).
struct DumpEntry {
  std::string description;  // "moe/gate_logits"
  std::string type;         // "bfloat16[192,2048,64]"
  std::string logical;      // "('activation_batch', 'activation_norm_length', None)" or "Unknown"
  PartitionSpec spec;
};

// One iteration of a loop the code runs (the masked loop's `for e in range(E)`, the
// pipeline's embedding chunks): the records in `scope` and below it are that iteration's.
// A renderer may draw one iteration for all of them (the Mermaid graph), after checking
// that the iterations recorded the same ops on the same shapes.
struct LoopIteration {
  std::string loop;   // what the loop runs over, also the scope's stem: "expert", "chunk"
  std::string scope;  // the iteration's scope path: "RoutedMoE/masked_loop/expert_0"
  int64_t index = 0;
  int64_t count = 0;  // iterations of the loop
};

// A remat tag: one name adc.checkpoint_name puts on a value. moe.py nests the calls
// (checkpoint_name(checkpoint_name(x, "mlpwi_0"), "moe_mlpwi_0")), so a value can carry two
// names; the op records only the outer one (its `name` attr). Tags the forward records no op
// for are here too (linears.py's mlpwi_0/mlpwo in MlpBlock, moe_x_sorted on the sorted rows,
// moe_routing_maps on the top-k ids). The step model (spmd/step_model.h) reads which names a
// remat policy keeps; the forward's emitters ignore them.
struct CheckpointTag {
  int tensor = -1;
  std::string name;
};

struct Trace {
  std::string block;  // "moe" | "mlp" | "shared"
  std::string path;   // e.g. "sparse_matmul/ragged_all_to_all"
  // Whose moe.py the trace follows: "MaxText 0.2.5 (the PyPI release)" and how that was
  // decided (config/maxtext_revision.h); every output names it.
  std::string maxtext_revision;
  std::string maxtext_revision_why;
  // The same revision as an id: emitters resolve the statements they cite through its line
  // table (config/moe_lines.h), so a trace of the release cites the release's moe.py.
  RevisionId revision = RevisionId::kSeed;
  bool numeric = false;
  std::string mesh;  // Mesh::ToString()
  int64_t num_devices = 1;
  std::vector<TensorRecord> tensors;
  std::vector<OpRecord> ops;
  std::vector<Fact> facts;
  std::vector<DumpEntry> dump;
  std::vector<std::string> notes;  // path selection reasons, kernel choice, ...
  // Where what MaxText computes on this mesh differs from the same block on one device (its
  // shardings change the math, not only where it runs): one sentence each, naming the rule or
  // axis. Every output shows them (text `warning`, JSON `warnings`, the page's summary).
  std::vector<std::string> warnings;
  // shardtrace's masked-loop reference (`--path masked_loop`): no branch of moe.py selects
  // it, so the trace has no path reasons and the pages say how it is selected instead.
  bool reference_path = false;
  std::vector<LoopIteration> loop_iterations;  // in program order
  // Why get_topk routes this way (MoeSetup::routing_reasons); empty for blocks without routing.
  std::vector<std::string> routing;
  std::vector<CheckpointTag> checkpoint_tags;  // in program order

  // Tensors the invariants and golden checks read by meaning; -1 when the path has none.
  int input = -1;  // the block's input [B,S,M]
  // Every parameter's Weight record by the golden-format name of its array ("gate_kernel",
  // "wi_0", "shared_wo", "mlp_wi_1"), in the order the block creates them: what a training
  // step differentiates with respect to (testdata/golden-format.md, `grad_<name>`).
  std::vector<std::pair<std::string, int>> parameters;
  int output = -1;         // the block's output [B,S,M]
  int top_k_indices = -1;  // the routing's chosen experts
  int dispatch_mask = -1;  // dense_matmul with capacity: the constrained masks
  int combine_mask = -1;

  // The tensor with `stable_id`, or nullptr.
  const TensorRecord* Find(std::string_view stable_id) const;
  // tensors[index], or nullptr for -1.
  const TensorRecord* At(int index) const;
  // The first fact of `kind` (about `subject`, for per-collective facts), or nullptr.
  const Fact* FindFact(FactKind kind, std::string_view subject = {}) const;
};

// True when `scope` ("RoutedAndSharedMoE/shared_experts/wi_0") has `component` as one of its
// '/'-separated parts.
bool ScopeHasComponent(std::string_view scope, std::string_view component);
// True when `scope` lies in a block's shared-expert MlpBlock (RoutedAndSharedMoE's
// `shared_experts`, Qwen3NextSparseMoeBlock's `shared_expert`).
bool InSharedExperts(std::string_view scope);

}  // namespace shardtrace
