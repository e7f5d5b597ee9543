// Tests for MeshFromConfig / Mesh::Build (MaxText's create_device_mesh: mesh_axes order, ici x dcn
// sizes, the single -1 "fill the rest" axis; facts section 3) and the device numbering
// helpers the collectives use (Coords, DeviceAt, AxisIndex, Group).
#include "shard/mesh.h"

#include <catch2/catch.hpp>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "config/config.h"
#include "config/mesh_config.h"
#include "util/error.h"

namespace shardtrace {
namespace {

Mesh MeshFor(std::vector<std::string> overrides, std::optional<int64_t> devices) {
  return MeshFromConfig(Config::Load({{}, std::move(overrides)}), devices);
}

TEST_CASE("The default embedded config without --devices gives one device", "[shard][mesh]") {
  const Mesh mesh = MeshFor({}, std::nullopt);
  CHECK(mesh.num_devices() == 1);
  CHECK(mesh.num_slices() == 1);
  CHECK(mesh.ToString() == "mesh[]");
  // Seed-commit mesh_axes (facts 1.1), every axis kept at size 1.
  REQUIRE(mesh.axes().size() == 12);
  CHECK(mesh.ToFullString() ==
        "mesh['diloco'=1, 'data'=1, 'stage'=1, 'fsdp'=1, 'fsdp_transpose'=1, 'context'=1, "
        "'context_autoregressive'=1, 'tensor'=1, 'tensor_transpose'=1, 'tensor_sequence'=1, "
        "'expert'=1, 'autoregressive'=1]");
}

TEST_CASE("ici_expert_parallelism=2 on 8 devices fills fsdp with 4", "[shard][mesh]") {
  const Mesh mesh = MeshFor({"ici_expert_parallelism=2"}, 8);
  CHECK(mesh.ToString() == "mesh['fsdp'=4, 'expert'=2]");
  CHECK(mesh.num_devices() == 8);
  CHECK(mesh.Size("fsdp") == 4);
  CHECK(mesh.Size("expert") == 2);
  CHECK(mesh.Size("tensor") == 1);
  CHECK(mesh.Size("no_such_axis") == 1);
  CHECK_FALSE(mesh.HasAxis("no_such_axis"));
  CHECK(mesh.HasAxis("tensor"));
  CHECK(mesh.Size(std::vector<std::string>{"fsdp", "expert"}) == 8);
  for (const MeshAxis& axis : mesh.axes()) {
    INFO(axis.name);
    CHECK(axis.dcn == 1);
    CHECK(axis.size == axis.ici);
  }
}

TEST_CASE("The HEAD base.yml builds its own mesh axes", "[shard][mesh]") {
  const Config config =
      Config::Load({{SHARDTRACE_SOURCE_DIR "/testdata/maxtext-configs/base.yml"},
                    {"ici_fsdp_parallelism=2", "ici_context_usp_ulysses_parallelism=2",
                     "ici_expert_parallelism=2"}});
  const Mesh mesh = MeshFromConfig(config, 8);
  CHECK(mesh.ToString() == "mesh['fsdp'=2, 'context_usp_ulysses'=2, 'expert'=2]");
  CHECK_FALSE(mesh.HasAxis("tensor_transpose"));
}

TEST_CASE("Two -1 parallelism values are an Error naming both axes", "[shard][mesh]") {
  CHECK_THROWS_AS(MeshFor({"ici_expert_parallelism=-1"}, 8), Error);
  CHECK_THROWS_WITH(MeshFor({"ici_expert_parallelism=-1"}, 8),
                    Catch::Contains("fsdp") && Catch::Contains("expert") && Catch::Contains("-1"));
}

TEST_CASE("A -1 axis that cannot be filled is an Error saying not divisible", "[shard][mesh]") {
  CHECK_THROWS_AS(MeshFor({"ici_expert_parallelism=3"}, 8), Error);
  CHECK_THROWS_WITH(MeshFor({"ici_expert_parallelism=3"}, 8),
                    Catch::Contains("not divisible") && Catch::Contains("expert"));
}

TEST_CASE("Explicit sizes that do not multiply to --devices are an Error", "[shard][mesh]") {
  const std::vector<std::string> overrides = {"ici_fsdp_parallelism=2", "ici_expert_parallelism=2"};
  CHECK(MeshFor(overrides, std::nullopt).ToString() == "mesh['fsdp'=2, 'expert'=2]");
  CHECK(MeshFor(overrides, 4).num_devices() == 4);
  CHECK_THROWS_AS(MeshFor(overrides, 8), Error);
  CHECK_THROWS_WITH(MeshFor(overrides, 8), Catch::Contains("4") && Catch::Contains("8"));
}

TEST_CASE("num_slices=2 with dcn_data_parallelism=-1 puts the slices on data", "[shard][mesh]") {
  const Mesh mesh = MeshFor({"num_slices=2"}, 16);
  CHECK(mesh.ToString() == "mesh['data'=2, 'fsdp'=8]");
  CHECK(mesh.num_slices() == 2);
  CHECK(mesh.num_devices() == 16);
  for (const MeshAxis& axis : mesh.axes()) {
    INFO(axis.name);
    if (axis.name == "data") {
      CHECK(axis.dcn == 2);
      CHECK(axis.ici == 1);
    } else if (axis.name == "fsdp") {
      CHECK(axis.dcn == 1);
      CHECK(axis.ici == 8);
    } else {
      CHECK(axis.size == 1);
    }
  }
  // The slice index is the major factor: the first 8 devices are slice 0 (data 0).
  CHECK(mesh.AxisIndex(7, {"data"}) == 0);
  CHECK(mesh.AxisIndex(8, {"data"}) == 1);
  CHECK(mesh.AxisIndex(8, {"fsdp"}) == 0);
}

TEST_CASE("Coords and DeviceAt are inverse row-major maps", "[shard][mesh]") {
  const Mesh mesh({{"fsdp", 2, 2, 1}, {"tensor", 2, 2, 1}, {"expert", 2, 2, 1}});
  CHECK(mesh.Coords(0) == std::vector<int64_t>{0, 0, 0});
  CHECK(mesh.Coords(1) == std::vector<int64_t>{0, 0, 1});  // last axis fastest
  CHECK(mesh.Coords(6) == std::vector<int64_t>{1, 1, 0});
  CHECK(mesh.DeviceAt({1, 0, 1}) == 5);
  for (int64_t d = 0; d < mesh.num_devices(); ++d) {
    INFO("device " << d);
    CHECK(mesh.DeviceAt(mesh.Coords(d)) == d);
  }
  const Mesh big = MeshFor({"ici_expert_parallelism=2"}, 8);
  for (int64_t d = 0; d < big.num_devices(); ++d) {
    INFO("device " << d);
    const std::vector<int64_t> coords = big.Coords(d);
    CHECK(coords.size() == big.axes().size());
    CHECK(big.DeviceAt(coords) == d);
  }
}

TEST_CASE("Group lists the collective's participants ordered by their axis index",
          "[shard][mesh]") {
  // Device d = fsdp*4 + tensor*2 + expert; device 6 is (fsdp 1, tensor 1, expert 0).
  const Mesh mesh({{"fsdp", 2, 2, 1}, {"tensor", 2, 2, 1}, {"expert", 2, 2, 1}});
  CHECK(mesh.Group(6, {"expert"}) == std::vector<int64_t>{6, 7});
  CHECK(mesh.Group(7, {"expert"}) == std::vector<int64_t>{6, 7});
  CHECK(mesh.Group(6, {"fsdp"}) == std::vector<int64_t>{2, 6});
  CHECK(mesh.Group(6, {"fsdp", "expert"}) == std::vector<int64_t>{2, 3, 6, 7});
  CHECK(mesh.Group(6, {"expert", "fsdp"}) == std::vector<int64_t>{2, 6, 3, 7});
  CHECK(mesh.Group(6, {}) == std::vector<int64_t>{6});
  for (const std::vector<std::string>& axes : {std::vector<std::string>{"expert"},
                                               {"fsdp", "expert"},
                                               {"expert", "fsdp"},
                                               {"fsdp", "tensor", "expert"}}) {
    const std::vector<int64_t> group = mesh.Group(5, axes);
    for (size_t k = 0; k < group.size(); ++k) CHECK(mesh.AxisIndex(group[k], axes) == int64_t(k));
  }
}

TEST_CASE("AxisIndex over a tuple of axes is major-first", "[shard][mesh]") {
  const Mesh mesh({{"fsdp", 2, 2, 1}, {"tensor", 2, 2, 1}, {"expert", 2, 2, 1}});
  CHECK(mesh.AxisIndex(6, {"fsdp"}) == 1);
  CHECK(mesh.AxisIndex(6, {"expert"}) == 0);
  CHECK(mesh.AxisIndex(6, {"fsdp", "expert"}) == 2);  // 1 * 2 + 0
  CHECK(mesh.AxisIndex(6, {"expert", "fsdp"}) == 1);  // 0 * 2 + 1
  CHECK(mesh.AxisIndex(5, {"fsdp", "tensor", "expert"}) == 5);
  // Mesh A: fsdp 4 x expert 2, device 5 is (fsdp 2, expert 1).
  const Mesh a = MeshFor({"ici_expert_parallelism=2"}, 8);
  CHECK(a.AxisIndex(5, {"fsdp", "expert"}) == 5);
  CHECK(a.AxisIndex(5, {"expert", "fsdp"}) == 6);
  CHECK(a.Group(5, {"expert"}) == std::vector<int64_t>{4, 5});
  CHECK(a.Group(5, {"fsdp"}) == std::vector<int64_t>{1, 3, 5, 7});
}

}  // namespace
}  // namespace shardtrace
