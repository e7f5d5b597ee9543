// The mesh a config describes: reads mesh_axes, the ici_*/dcn_*_parallelism keys and
// num_slices into the MeshParallelism that shard/mesh.h builds from. This is the only place
// the mesh's inputs are looked up by key, so shard/ never depends on config/.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "shard/mesh.h"
#include "util/warnings.h"

namespace shardtrace {

class Config;

// mesh_axes and, per axis, its ici_/dcn_ parallelism (1 when the config lacks the key;
// MaxText names the "stage" axis's keys *_pipeline_parallelism and maps the legacy "model"
// axis onto *_tensor_parallelism).
MeshParallelism ReadMeshParallelism(const Config& config);

// Mesh::Build(ReadMeshParallelism(config), devices).
Mesh MeshFromConfig(const Config& config, std::optional<int64_t> devices);

// What the mesh's keys say that MaxText ignores without a word: a parallelism > 1 for an axis
// mesh_axes lack (kUnusedParallelism), a logical rule naming such an axis (kUnknownRuleAxis).
std::vector<Warning> MeshWarnings(const Config& config);

}  // namespace shardtrace
