// shardtrace's prediction held against a MaxText sharding_info dump, tensor by tensor.
// Parameters: every MoE and MLP parameter of the dump (`.params/` entries whose module path
// ends in a routed-expert kernel, the router gate, or an MlpBlock kernel; shared_experts
// ones belong to the shared block) against the kernel_axes weight of the same name in the
// trace of that block. MaxText stacks scanned layers on one extra dim (logical `layers`,
// `moe_layers` or `dense_layers`); it is taken out of the dump's logical axes, spec and
// shape before comparing. PartitionSpecs compare after MaxText's size-1 removal (the dump
// records flax's spec, with axes of size 1 still in). Activations: the `moe/` and
// `linears/` entries of input_shardings.json against shardtrace's own dump of the same
// blocks, aligned by name and occurrence. The result is plain data; emit/ formats it.
#pragma once

#include <string>
#include <vector>

#include "check/sharding_dump.h"
#include "config/config.h"
#include "run/run_request.h"
#include "shard/mesh.h"
#include "util/warnings.h"

namespace shardtrace {

struct TensorComparison {
  enum class Kind { kParam, kActivation };
  enum class Status { kAgree, kDiffer, kOnlyInDump, kOnlyInTrace };
  Kind kind = Kind::kParam;
  Status status = Status::kAgree;
  std::string dump_name;   // "decoder/moe_layers/.../wi_0" or "moe/gate_logits"; "" if none
  std::string trace_name;  // "moe RoutedAndSharedMoE/RoutedMoE/wi_0"; "" if none
  // Each side as JAX prints it; empty on the side that lacks the tensor.
  std::string dump_logical, dump_spec, dump_shape;
  std::string trace_logical, trace_spec, trace_shape;
  std::vector<std::string> differing;  // "logical axes", "spec", "shape"
};

struct DumpComparison {
  std::string dump_dir;
  InferredRun inferred;
  std::vector<std::string> traced_args;  // CONFIG files and overrides the trace ran with
  int64_t devices = 0;
  std::vector<std::string> config_files;  // Config::loaded_files()
  std::string maxtext_revision;           // MaxTextRevision::Title(): whose moe.py traced
  std::string dump_mesh, trace_mesh;
  // The traced config's warnings (RunSetup::warnings): `compare-dump` prints them on stderr.
  std::vector<Warning> warnings;
  std::vector<std::string> blocks;  // "moe: sparse_matmul/ragged_all_to_all (...)"
  std::vector<TensorComparison> tensors;
  int params_not_compared = 0;  // attention, norms, embeddings: not traced
  int activations_not_compared = 0;
  // What a lone block's dump (MaxText's oracle exports one block) legitimately lacks, left out
  // and said so rather than counted as a difference: the traced blocks of the model the dump
  // holds no parameter of (a MoE case's dense layers), with their kernels' count ...
  std::vector<std::string> blocks_not_in_dump;
  int trace_params_not_compared = 0;
  // ... and, when the dump is a whole model's (entries outside moe/, linears/ and Unknown), the
  // trace's "Unknown" temporaries: the dump's are left out too (attention has its own).
  int trace_activations_not_compared = 0;

  bool mesh_agrees() const { return dump_mesh == trace_mesh; }
  bool agrees() const;
  int Count(TensorComparison::Status status) const;
};

// Traces every block the request's config implies (symbolically) and compares with `dump`.
DumpComparison CompareWithDump(const ShardingDump& dump, const RunRequest& request);

std::string ToString(TensorComparison::Status status);  // agree | differ | only in dump | ...

}  // namespace shardtrace
