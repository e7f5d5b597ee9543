// Trace: what one run of a MaxText MoE/MLP path recorded, in program order. It is plain
// data (ids are vector indices, no pointers) produced by the Tracer and consumed by the
// emitters (table, json, dump, dot, ...), which never re-derive shardings.
//
// Dim letters (`TensorRecord::dims`), one per dimension, fixed for life:
//   B batch            S sequence (S/cp inside context groups)   N context groups (cp)
//   M model/embed      E experts (global or local)               K top-k choices
//   C expert capacity  H expert hidden (mlp) dim                 G routing groups
//   g experts per group  F dense/shared MLP hidden dim           T tokens (B*S, flattened)
//   R routed rows (T*K, sorted by expert)                        U ragged buffer rows
//   P expert-parallel shards (peers of an all-to-all)            A activations (fused wi)
//   1 a broadcast dim of size 1                                  - a dim with no name
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "numeric/array.h"
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
  int id = 0;
  std::string name;  // the moe.py variable name: gate_logits, dispatch_mask, layer_w0, ...
  TensorKind kind = TensorKind::kAct;
  DType dtype = DType::kFloat32;
  std::string dims;  // one letter per dim, see the table above
  Shape shape;       // global shape; inside shard_map the per-device block shape
  std::optional<LogicalAxes> logical_axes;
  Constraint constraint = Constraint::kNone;
  std::optional<PartitionSpec> partition_spec;  // after size-1 removal; set with a constraint
  Shape local_shape;
  int64_t bytes_per_device = 0;
  std::string scope;      // RoutedMoE/sparse_matmul/wrapper/permute
  std::string condition;  // e.g. "capacity_factor > 0"; empty when unconditional
  bool in_shard_map = false;
  std::optional<NumericSummary> summary;
  std::vector<std::string> warnings;  // uneven divisions
};

// A collective between virtual devices, with the bytes it moves.
struct CollectiveRecord {
  std::vector<std::string> axes;  // mesh axes it runs over
  int64_t participants = 1;       // group size
  int64_t groups = 1;             // independent groups on the mesh
  // Per device (indexed by device), bytes sent and received; symbolic: static sizes.
  std::vector<int64_t> bytes_sent;
  std::vector<int64_t> bytes_received;
};

struct OpRecord {
  int id = 0;
  std::string kind;      // einsum, top_k, all_gather, ragged_all_to_all, constraint, ...
  std::string equation;  // einsum equation as moe.py writes it ("BSM,EMH->BSEH")
  std::vector<int> inputs;
  std::vector<int> outputs;
  std::vector<std::pair<std::string, std::string>> attrs;  // ordered, already formatted
  std::string scope;
  std::optional<CollectiveRecord> collective;
};

// A named numeric fact: capacity, tokens per expert, the all-to-all matrix, ...
struct Fact {
  std::string name;
  std::string scope;
  Shape shape;                 // empty for a scalar
  std::vector<double> values;  // row-major
  std::string note;
};

// One entry of MaxText's debug_sharding activation dump (input_shardings.json).
struct DumpEntry {
  std::string description;  // "moe/gate_logits"
  std::string type;         // "bfloat16[192,2048,64]"
  std::string logical;      // "('activation_batch', 'activation_norm_length', None)" or "Unknown"
  PartitionSpec spec;
};

struct Trace {
  std::string block;  // "moe" | "mlp" | "shared"
  std::string path;   // e.g. "sparse_matmul/ragged_all_to_all"
  bool numeric = false;
  std::string mesh;  // Mesh::ToString()
  int64_t num_devices = 1;
  std::vector<TensorRecord> tensors;
  std::vector<OpRecord> ops;
  std::vector<Fact> facts;
  std::vector<DumpEntry> dump;
  std::vector<std::string> notes;  // path selection reasons, kernel choice, ...

  const TensorRecord* FindLast(std::string_view name) const;
};

}  // namespace shardtrace
