// The sharding difference between two configs: each side is loaded and its block traced
// (symbolically, at full size), then the two traces are aligned tensor by tensor and
// collective by collective. The result says which config keys and logical-axis rules
// differ, whether another moe.py path runs (and which changed key selected it), every
// tensor only in A, only in B or changed (logical axes, PartitionSpec, per-device shape
// and bytes), every collective added, removed or changed with its bytes per device, and
// the per-device totals of both sides. Rows are sorted by impact (bytes per device), not
// by program order. Plain data; emit/trace_diff_report.h formats it.
//
// Per-device numbers are only claimed where the trace knows them: tensors placed by kernel
// axes, a sharding constraint, a shard_map spec or the SPMD propagation model (each side's
// SpmdResult, beside its Trace). Any other tensor is "unconstrained (XLA chooses)": listed,
// never counted at its global size. KnownBytesPerDevice is the one place that decides this.
// A side keeps the spec a statement wrote apart from the one propagation gave it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ir/trace.h"
#include "shard/axis_rules.h"
#include "shard/partition_spec.h"
#include "spmd/spmd_result.h"
#include "util/warnings.h"

namespace shardtrace {

// One side of a tensor row.
struct TensorSide {
  TensorKind kind = TensorKind::kAct;
  DType dtype = DType::kFloat32;
  std::string dims;
  Shape shape;
  std::optional<LogicalAxes> logical_axes;
  std::optional<PartitionSpec> written_spec;     // what a statement wrote (partition_spec)
  std::optional<PartitionSpec> propagated_spec;  // what XLA's propagation gives it, if unwritten
  Placement placement = Placement::kUnresolved;  // which of the two holds, per the SPMD model
  std::string constraint;                        // "kernel_axes", ... or "" (none)
  std::optional<Shape> local_shape;              // nullopt: unconstrained (XLA chooses)
  std::optional<int64_t> bytes_per_device;       // nullopt: unconstrained (XLA chooses)
};

struct TensorDiff {
  std::string key;  // alignment key, "RoutedMoE/sparse_matmul/wrapper/x#0"
  std::optional<TensorSide> a, b;
  // dtype, shape, logical axes, spec (the written one), propagated spec, constraint, local shape
  std::vector<std::string> changed;
  int64_t delta_bytes = 0;  // b - a per device (0 when either is unknown)
  int64_t impact = 0;       // bytes per device this row moves (for sorting)
};

struct CollectiveSide {
  CollectiveKind kind = CollectiveKind::kAllGather;
  bool written = true;  // called in moe.py; false: inserted by XLA (SpmdResult::implied)
  std::vector<std::string> axes;
  int64_t participants = 1;
  std::string input, output;        // tensor names (an XLA-inserted one moves `input`)
  int64_t sent_per_device = 0;      // max over devices
  int64_t received_per_device = 0;  // max over devices
};

struct CollectiveDiff {
  // "<scope>/<kind>:<output>#<occurrence>" for a written collective; an XLA-inserted one is
  // keyed by the op it serves: "<that op's key> ⇄ xla <hlo name>:<tensor>".
  std::string key;
  std::optional<CollectiveSide> a, b;
  std::vector<std::string> changed;  // axes, participants, bytes
  int64_t delta_sent = 0;
  int64_t impact = 0;
};

struct KeyChange {
  std::string key;
  std::string a, b;  // printed values; "(unset)" when a side lacks the key
};

struct SideTotals {
  int64_t weight_bytes = 0;           // kernel_axes weights, per device
  int64_t peak_activation_bytes = 0;  // peak temporaries (SpmdResult::memory)
  // Bytes each device sends per layer (this block once): the collectives moe.py writes (each
  // at its busiest device) and those XLA inserts (SpmdResult::implied), apart and summed.
  int64_t written_sent_bytes = 0;
  int64_t implied_sent_bytes = 0;
  int64_t sent_bytes() const { return written_sent_bytes + implied_sent_bytes; }
  std::vector<std::string> unconstrained;  // keys of activations XLA places (not totalled)
  // The training step (spmd/step_model.h), unless the side runs inference: its remat policy,
  // peak per device, what the forward keeps for the backward per layer and what the backward
  // recomputes, and the bytes each device sends in the backward (remat re-runs included).
  bool has_step = false;
  std::string remat_policy;
  int64_t step_peak_bytes = 0;
  int64_t saved_bytes = 0;
  int64_t recomputed_bytes = 0;
  int64_t backward_sent_bytes = 0;
  int64_t step_sent_bytes() const { return sent_bytes() + backward_sent_bytes; }
};

struct DiffSideInfo {
  std::vector<std::string> args;          // CONFIG files and overrides
  std::vector<std::string> config_files;  // Config::loaded_files()
  std::string maxtext_revision;           // MaxTextRevision::Title()
  std::string mesh;
  int64_t devices = 0;
  std::string path;
  std::vector<std::string> path_reasons;
  SideTotals totals;
};

struct TraceDiff {
  std::string block;  // moe | mlp | shared
  DiffSideInfo a, b;
  std::vector<KeyChange> config_keys;         // resolved values that differ, by key
  std::vector<KeyChange> axis_rules;          // logical_axis_rules by logical name
  std::vector<std::string> path_selected_by;  // changed keys behind a path change
  std::vector<TensorDiff> tensors;            // by impact, then program order
  std::vector<CollectiveDiff> collectives;    // by impact, then program order
  // Both sides' config warnings (RunSetup::warnings), A's first: `diff` prints them on stderr.
  std::vector<Warning> warnings;

  bool path_changed() const { return a.path != b.path; }
  bool mesh_changed() const { return a.mesh != b.mesh; }
  // The forward traces agree (the configs may still differ in keys that change no sharding).
  bool same_sharding() const;
  // ... and so do the training steps (remat_policy changes only the step).
  bool same() const;
};

struct DiffRequest {
  std::vector<std::string> args_a, args_b;  // CONFIG files and key=value, per side
  std::string block = "moe";
  std::optional<int64_t> devices;
};

// Loads both configs, traces the block on each, and aligns the traces.
TraceDiff DiffConfigs(const DiffRequest& request);

// The per-device bytes the trace and its SPMD result `s` support for `t`, or nullopt when
// nothing placed it (XLA chooses): a record has a known placement when kernel axes, a
// sharding constraint or a shard_map spec set its PartitionSpec, it lives inside shard_map,
// or the propagation model reached it (or it arrives as the block's argument).
std::optional<int64_t> KnownBytesPerDevice(const TensorRecord& t, const TensorSpmd& s);

// The key two traces are aligned by: each tensor's TensorRecord::stable_id (scope path,
// name, occurrence of that scope and name), the same for the same tensor of two configs.
std::vector<std::string> AlignmentKeys(const Trace& trace);

}  // namespace shardtrace
