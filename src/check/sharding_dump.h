// A MaxText sharding_info directory (tests/utils/sharding_dump.py) read into plain data:
// the parameters of named_shardings.json (mesh, PartitionSpec as flax resolved it, before
// MaxText drops size-1 axes) joined with logical_shardings.json (logical axes, shape), the
// mesh the dump was made on, and the activation entries of input_shardings.json. Only the
// `.params/` tree is kept: `.opt_state/` repeats it for the optimizer moments.
//
// The directory name says how the dump was made. MaxText lays it out as
// `<model>/<topology>/slice_<n>/rule_<rule>_<key>=<value>_...`; copies flatten that to
// `<model>_<topology>_<rule>_<key>-<value>_...` (`=` becomes `-`, so -1 reads `--1`).
// InferRun turns either form into the shardtrace arguments that trace the same run.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "numeric/array.h"
#include "shard/axis_rules.h"
#include "shard/mesh.h"
#include "shard/partition_spec.h"

namespace shardtrace {

struct DumpParam {
  std::string path;                  // "decoder/moe_layers/DeepSeekMoeBlock_0/MoeBlock_0/wi_0"
  std::vector<std::string> modules;  // the same path split at '/'
  LogicalAxes logical;               // logical_shardings.json
  PartitionSpec flax_spec;           // named_shardings.json (size-1 axes still in)
  Shape shape;
};

// One input_shardings.json entry, as MaxText printed it.
struct DumpActivation {
  std::string description;  // "moe/gate_logits"
  std::string type;         // "bfloat16[192,2048,64]"
  std::string logical;      // "('activation_batch', ...)" or "Unknown"
  std::string spec;         // "P(('fsdp', 'expert'), None, None)"
};

struct ShardingDump {
  std::string dir;
  std::vector<MeshAxis> mesh;  // named_shardings.json's mesh, every axis (size 1 too)
  std::vector<DumpParam> params;
  std::vector<DumpActivation> activations;
};

// Throws Error naming the file and key when a file is missing or not in MaxText's format.
ShardingDump ReadShardingDump(const std::string& dir);

// What the directory name (and the dump's mesh) say about the run.
struct InferredRun {
  std::string model_name;              // empty when the name does not say
  std::string topology;                // "v6e-16"
  std::string rule;                    // "default" or a custom_mesh_and_rule name
  std::vector<std::string> overrides;  // "key=value", from the name
  std::optional<int64_t> devices;      // product of the dump's mesh
  // A case directory's dump (<case>/sharding): the case's config.yml when it says its keys
  // are command-line overrides (config/case_config.h), the run MaxText dumped.
  std::optional<std::string> case_config;
};
InferredRun InferRun(const ShardingDump& dump);

// The mesh axes of size > 1, as Mesh::ToString prints them: mesh['fsdp'=4, 'expert'=4].
std::string DumpMeshString(const ShardingDump& dump);

}  // namespace shardtrace
