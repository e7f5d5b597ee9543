#include "config/mesh_config.h"

#include <fmt/format.h>

#include <string>
#include <string_view>
#include <vector>

#include "config/config.h"
#include "util/error.h"

namespace shardtrace {
namespace {

// The parallelism key for a mesh axis: MaxText names the stage axis "pipeline" and maps the
// legacy "model" axis onto tensor.
std::string ParallelismKey(std::string_view prefix, const std::string& axis) {
  std::string name = axis;
  if (axis == "stage") name = "pipeline";
  if (axis == "model") name = "tensor";
  return fmt::format("{}_{}_parallelism", prefix, name);
}

}  // namespace

MeshParallelism ReadMeshParallelism(const Config& config) {
  MeshParallelism p;
  p.axes = config.mesh_axes();
  auto read = [&](std::string_view prefix) {
    std::vector<int64_t> sizes;
    for (const std::string& axis : p.axes) {
      const std::string key = ParallelismKey(prefix, axis);
      sizes.push_back(config.Has(key) ? config.Int(key) : 1);
    }
    return sizes;
  };
  p.ici = read("ici");
  p.dcn = read("dcn");
  p.num_slices = config.Has("num_slices") ? config.Int("num_slices") : 1;
  // -1 (base.yml's default) means automatic: one slice here, as on a single host.
  if (p.num_slices == 0 || p.num_slices < -1)
    Fail("num_slices: expected -1 (automatic) or a positive slice count, got {}", p.num_slices);
  return p;
}

Mesh MeshFromConfig(const Config& config, std::optional<int64_t> devices) {
  return Mesh::Build(ReadMeshParallelism(config), devices);
}

}  // namespace shardtrace
