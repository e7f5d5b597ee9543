// Tests for logical-axis resolution (flax's nn.logical_to_mesh_axes priority algorithm
// followed by MaxText's remove_size_one_mesh_axis). The tables are copied verbatim from
// the project's MaxText research notes (maxtext-facts.md, sections 2.4 and 2.5): they are MaxText's
// truth, checked there against MaxText's own sharding goldens.
#include "shard/axis_rules.h"

#include <catch2/catch.hpp>
#include <cstdint>
#include <iterator>
#include <optional>
#include <string>
#include <vector>

#include "config/config.h"
#include "config/mesh_config.h"
#include "shard/mesh.h"
#include "shard/partition_spec.h"
#include "util/error.h"

namespace shardtrace {
namespace {

constexpr char kHeadBase[] = SHARDTRACE_SOURCE_DIR "/testdata/maxtext-configs/base.yml";

// One row of a facts table: the logical names, the seed-rules value and the HEAD-rules
// value ("same" = identical to the seed value), all as printed in the markdown.
struct TableRow {
  const char* logical;
  const char* seed;
  const char* head;
};

// 2.4 Resolved specs before size-1 removal (mesh-independent): 50 rows
constexpr TableRow kSection24[] = {
    {"('exp', 'embed_moe', 'mlp_moe')",
     "('expert', ('fsdp', 'tensor_transpose', 'context'), ('fsdp_transpose', 'tensor', "
     "'tensor_sequence', 'autoregressive'))",
     "('expert', ('fsdp', 'context', 'context_usp_ulysses'), ('fsdp_transpose', 'tensor', "
     "'tensor_sequence', 'autoregressive'))"},
    {"('exp', 'mlp_moe', 'embed_moe')",
     "('expert', ('fsdp_transpose', 'tensor', 'tensor_sequence', 'autoregressive'), ('fsdp', "
     "'tensor_transpose', 'context'))",
     "('expert', ('fsdp_transpose', 'tensor', 'tensor_sequence', 'autoregressive'), ('fsdp', "
     "'context', 'context_usp_ulysses'))"},
    {"('embed_moe', None, 'mlp_moe')",
     "(('fsdp', 'tensor_transpose', 'context'), None, ('fsdp_transpose', 'tensor', "
     "'tensor_sequence', 'autoregressive'))",
     "(('fsdp', 'context', 'context_usp_ulysses'), None, ('fsdp_transpose', 'tensor', "
     "'tensor_sequence', 'autoregressive'))"},
    {"('embed_moe', 'mlp_moe', None)",
     "(('fsdp', 'tensor_transpose', 'context'), ('fsdp_transpose', 'tensor', 'tensor_sequence', "
     "'autoregressive'), None)",
     "(('fsdp', 'context', 'context_usp_ulysses'), ('fsdp_transpose', 'tensor', 'tensor_sequence', "
     "'autoregressive'), None)"},
    {"('embed', None)",
     "(('fsdp', 'fsdp_transpose', 'tensor_transpose', 'context', 'expert'), None)",
     "(('fsdp', 'fsdp_transpose', 'context', 'context_usp_ulysses', 'expert'), None)"},
    {"('embed_moe', None)", "(('fsdp', 'fsdp_transpose', 'tensor_transpose', 'context'), None)",
     "(('fsdp', 'fsdp_transpose', 'context', 'context_usp_ulysses'), None)"},
    {"(None,)", "(None)", "same"},
    {"('exp', 'activation_mlp')", "('expert', ('tensor', 'tensor_transpose', 'tensor_sequence'))",
     "('expert', ('tensor', 'tensor_sequence'))"},
    {"('exp', 'activation_embed')", "('expert', ('tensor', 'tensor_transpose'))",
     "('expert', 'tensor')"},
    {"('exp',)", "('expert')", "same"},
    {"('embed', 'mlp')",
     "(('fsdp', 'tensor_transpose', 'context', 'expert'), ('fsdp_transpose', 'tensor', "
     "'tensor_sequence', 'autoregressive'))",
     "(('fsdp', 'context', 'context_usp_ulysses', 'expert'), ('fsdp_transpose', 'tensor', "
     "'tensor_sequence', 'autoregressive'))"},
    {"('mlp', 'embed')",
     "(('fsdp_transpose', 'tensor', 'tensor_sequence', 'autoregressive'), ('fsdp', "
     "'tensor_transpose', 'context', 'expert'))",
     "(('fsdp_transpose', 'tensor', 'tensor_sequence', 'autoregressive'), ('fsdp', 'context', "
     "'context_usp_ulysses', 'expert'))"},
    {"('embed', 'num_activations', 'mlp')",
     "(('fsdp', 'tensor_transpose', 'context', 'expert'), None, ('fsdp_transpose', 'tensor', "
     "'tensor_sequence', 'autoregressive'))",
     "(('fsdp', 'context', 'context_usp_ulysses', 'expert'), None, ('fsdp_transpose', 'tensor', "
     "'tensor_sequence', 'autoregressive'))"},
    {"('activation_batch', 'activation_length', 'activation_mlp')",
     "(('data', 'fsdp', 'fsdp_transpose', 'expert'), 'context', ('tensor', 'tensor_transpose', "
     "'tensor_sequence'))",
     "(('data', 'fsdp', 'fsdp_transpose', 'expert'), ('context', 'context_usp_ulysses'), "
     "('tensor', 'tensor_sequence'))"},
    {"('activation_batch', 'prefill_activation_length', 'activation_mlp')",
     "(('data', 'fsdp', 'fsdp_transpose', 'expert'), 'context', ('tensor', 'tensor_transpose', "
     "'tensor_sequence'))",
     "(('data', 'fsdp', 'fsdp_transpose', 'expert'), ('context', 'context_usp_ulysses'), "
     "('tensor', 'tensor_sequence'))"},
    {"('activation_batch', 'activation_norm_length', None)",
     "(('data', 'fsdp', 'fsdp_transpose', 'expert'), ('tensor_sequence', 'context'), None)",
     "(('data', 'fsdp', 'fsdp_transpose', 'expert'), ('tensor_sequence', 'context', "
     "'context_usp_ulysses'), None)"},
    {"('activation_batch', 'activation_norm_length', 'activation_embed')",
     "(('data', 'fsdp', 'fsdp_transpose', 'expert'), ('tensor_sequence', 'context'), ('tensor', "
     "'tensor_transpose'))",
     "(('data', 'fsdp', 'fsdp_transpose', 'expert'), ('tensor_sequence', 'context', "
     "'context_usp_ulysses'), 'tensor')"},
    {"('decode_batch_moe', 'activation_norm_length', None)",
     "(None, ('tensor_sequence', 'context'), None)",
     "(None, ('tensor_sequence', 'context', 'context_usp_ulysses'), None)"},
    {"('exp', 'embed_tensor_transpose', 'mlp_no_fsdp')",
     "('expert', 'tensor_transpose', ('tensor', 'tensor_sequence', 'autoregressive'))",
     "('expert', None, ('tensor', 'tensor_sequence', 'autoregressive'))"},
    {"('exp', 'mlp_no_fsdp', 'embed_tensor_transpose')",
     "('expert', ('tensor', 'tensor_sequence', 'autoregressive'), 'tensor_transpose')",
     "('expert', ('tensor', 'tensor_sequence', 'autoregressive'), None)"},
    {"('exp', None, 'mlp_no_fsdp')",
     "('expert', None, ('tensor', 'tensor_sequence', 'autoregressive'))", "same"},
    {"('exp', 'mlp_no_fsdp', None)",
     "('expert', ('tensor', 'tensor_sequence', 'autoregressive'), None)", "same"},
    {"('embed_tensor_transpose', None, 'mlp_no_fsdp')",
     "('tensor_transpose', None, ('tensor', 'tensor_sequence', 'autoregressive'))",
     "(None, None, ('tensor', 'tensor_sequence', 'autoregressive'))"},
    {"('embed_tensor_transpose', 'mlp_no_fsdp', None)",
     "('tensor_transpose', ('tensor', 'tensor_sequence', 'autoregressive'), None)",
     "(None, ('tensor', 'tensor_sequence', 'autoregressive'), None)"},
    {"(None, None, 'mlp_no_fsdp')", "(None, None, ('tensor', 'tensor_sequence', 'autoregressive'))",
     "same"},
    {"(None, 'mlp_no_fsdp', None)", "(None, ('tensor', 'tensor_sequence', 'autoregressive'), None)",
     "same"},
    {"('exp_with_fsdp', 'embed_tensor_transpose', 'mlp')",
     "('fsdp', 'tensor_transpose', ('fsdp_transpose', 'tensor', 'tensor_sequence', "
     "'autoregressive'))",
     "('fsdp', None, ('fsdp_transpose', 'tensor', 'tensor_sequence', 'autoregressive'))"},
    {"('exp_with_fsdp', 'mlp', 'embed_tensor_transpose')",
     "('fsdp', ('fsdp_transpose', 'tensor', 'tensor_sequence', 'autoregressive'), "
     "'tensor_transpose')",
     "('fsdp', ('fsdp_transpose', 'tensor', 'tensor_sequence', 'autoregressive'), None)"},
    {"('exp_with_fsdp', None, 'mlp')",
     "('fsdp', None, ('fsdp_transpose', 'tensor', 'tensor_sequence', 'autoregressive'))", "same"},
    {"('exp_with_fsdp', 'mlp', None)",
     "('fsdp', ('fsdp_transpose', 'tensor', 'tensor_sequence', 'autoregressive'), None)", "same"},
    {"('activation_batch_moe', 'activation_length_moe', None)",
     "(('data', 'fsdp', 'fsdp_transpose'), 'context', None)",
     "(('data', 'fsdp', 'fsdp_transpose', 'expert'), ('context', 'context_usp_ulysses'), None)"},
    {"('activation_batch_moe', 'activation_norm_length_moe', 'activation_embed_moe')",
     "(('data', 'fsdp', 'fsdp_transpose'), ('tensor_sequence', 'context'), ('tensor', "
     "'tensor_transpose'))",
     "(('data', 'fsdp', 'fsdp_transpose', 'expert'), ('tensor_sequence', 'context', "
     "'context_usp_ulysses'), 'tensor')"},
    {"('activation_batch_moe', None, None)", "(('data', 'fsdp', 'fsdp_transpose'), None, None)",
     "(('data', 'fsdp', 'fsdp_transpose', 'expert'), None, None)"},
    {"('activation_batch', 'activation_norm_length', None, None)",
     "(('data', 'fsdp', 'fsdp_transpose', 'expert'), ('tensor_sequence', 'context'), None, None)",
     "(('data', 'fsdp', 'fsdp_transpose', 'expert'), ('tensor_sequence', 'context', "
     "'context_usp_ulysses'), None, None)"},
    {"('activation_batch_moe', 'activation_norm_length_moe', None, None)",
     "(('data', 'fsdp', 'fsdp_transpose'), ('tensor_sequence', 'context'), None, None)",
     "(('data', 'fsdp', 'fsdp_transpose', 'expert'), ('tensor_sequence', 'context', "
     "'context_usp_ulysses'), None, None)"},
    {"('activation_exp', 'activation_batch_moe', None, 'activation_embed_moe')",
     "('expert', ('data', 'fsdp', 'fsdp_transpose'), None, ('tensor', 'tensor_transpose'))",
     "(None, ('data', 'fsdp', 'fsdp_transpose', 'expert'), None, 'tensor')"},
    {"('activation_exp', 'activation_batch_moe', None, 'activation_mlp')",
     "('expert', ('data', 'fsdp', 'fsdp_transpose'), None, ('tensor', 'tensor_transpose', "
     "'tensor_sequence'))",
     "(None, ('data', 'fsdp', 'fsdp_transpose', 'expert'), None, ('tensor', 'tensor_sequence'))"},
    {"('exp', None, 'mlp')",
     "('expert', None, ('fsdp_transpose', 'tensor', 'tensor_sequence', 'autoregressive'))", "same"},
    {"('exp', 'mlp', None)",
     "('expert', ('fsdp_transpose', 'tensor', 'tensor_sequence', 'autoregressive'), None)", "same"},
    {"('activation_batch', None, None)",
     "(('data', 'fsdp', 'fsdp_transpose', 'expert'), None, None)", "same"},
    {"('activation_length', None)", "('context', None)",
     "(('context', 'context_usp_ulysses'), None)"},
    {"('activation_batch', 'activation_length', None)",
     "(('data', 'fsdp', 'fsdp_transpose', 'expert'), 'context', None)",
     "(('data', 'fsdp', 'fsdp_transpose', 'expert'), ('context', 'context_usp_ulysses'), None)"},
    {"('activation_batch_moe', 'activation_norm_length_moe', None, None, None)",
     "(('data', 'fsdp', 'fsdp_transpose'), ('tensor_sequence', 'context'), None, None, None)",
     "(('data', 'fsdp', 'fsdp_transpose', 'expert'), ('tensor_sequence', 'context', "
     "'context_usp_ulysses'), None, None, None)"},
    {"('activation_norm_length_moe', 'activation_batch_moe', None, None, None)",
     "(('tensor_sequence', 'context'), ('data', 'fsdp', 'fsdp_transpose'), None, None, None)",
     "(('tensor_sequence', 'context', 'context_usp_ulysses'), ('data', 'fsdp', 'fsdp_transpose', "
     "'expert'), None, None, None)"},
    {"('activation_exp', 'activation_batch_moe', None, None, 'activation_embed_moe')",
     "('expert', ('data', 'fsdp', 'fsdp_transpose'), None, None, ('tensor', 'tensor_transpose'))",
     "(None, ('data', 'fsdp', 'fsdp_transpose', 'expert'), None, None, 'tensor')"},
    {"('activation_exp', 'activation_batch_moe', None, None, 'activation_mlp')",
     "('expert', ('data', 'fsdp', 'fsdp_transpose'), None, None, ('tensor', 'tensor_transpose', "
     "'tensor_sequence'))",
     "(None, ('data', 'fsdp', 'fsdp_transpose', 'expert'), None, None, ('tensor', "
     "'tensor_sequence'))"},
    {"(None, 'activation_batch_moe', 'activation_norm_length_moe', None, 'activation_embed_moe')",
     "(None, ('data', 'fsdp', 'fsdp_transpose'), ('tensor_sequence', 'context'), None, ('tensor', "
     "'tensor_transpose'))",
     "(None, ('data', 'fsdp', 'fsdp_transpose', 'expert'), ('tensor_sequence', 'context', "
     "'context_usp_ulysses'), None, 'tensor')"},
    {"('activation_batch', None, None, None)",
     "(('data', 'fsdp', 'fsdp_transpose', 'expert'), None, None, None)", "same"},
    {"('activation_batch', 'activation_norm_length', None, None, None)",
     "(('data', 'fsdp', 'fsdp_transpose', 'expert'), ('tensor_sequence', 'context'), None, None, "
     "None)",
     "(('data', 'fsdp', 'fsdp_transpose', 'expert'), ('tensor_sequence', 'context', "
     "'context_usp_ulysses'), None, None, None)"},
    {"('activation_embed_and_logits_batch', 'activation_norm_length')",
     "(('data', 'stage', 'fsdp', 'fsdp_transpose', 'expert'), ('tensor_sequence', 'context'))",
     "(('data', 'stage', 'fsdp', 'fsdp_transpose', 'expert'), ('tensor_sequence', 'context', "
     "'context_usp_ulysses'))"},
};

// mesh A fsdp4 x ep2: 17 rows
constexpr TableRow kMeshA[] = {
    {"('exp', 'embed_moe', 'mlp_moe')", "P('expert', 'fsdp', None)", "same"},
    {"('exp', 'mlp_moe', 'embed_moe')", "P('expert', None, 'fsdp')", "same"},
    {"('embed_moe', None)", "P('fsdp', None)", "same"},
    {"('embed', None)", "P(('fsdp', 'expert'), None)", "same"},
    {"('embed', 'mlp')", "P(('fsdp', 'expert'), None)", "same"},
    {"('mlp', 'embed')", "P(None, ('fsdp', 'expert'))", "same"},
    {"('activation_batch', 'activation_norm_length', None)", "P(('fsdp', 'expert'), None, None)",
     "same"},
    {"('activation_batch', 'activation_norm_length', 'activation_embed')",
     "P(('fsdp', 'expert'), None, None)", "same"},
    {"('exp', 'embed_tensor_transpose', 'mlp_no_fsdp')", "P('expert', None, None)", "same"},
    {"('exp', 'mlp_no_fsdp', 'embed_tensor_transpose')", "P('expert', None, None)", "same"},
    {"('activation_batch_moe', 'activation_length_moe', None)", "P('fsdp', None, None)",
     "P(('fsdp', 'expert'), None, None)"},
    {"('activation_batch_moe', 'activation_norm_length_moe', 'activation_embed_moe')",
     "P('fsdp', None, None)", "P(('fsdp', 'expert'), None, None)"},
    {"('activation_exp', 'activation_batch_moe', None, 'activation_embed_moe')",
     "P('expert', 'fsdp', None, None)", "P(None, ('fsdp', 'expert'), None, None)"},
    {"('activation_exp', 'activation_batch_moe', None, 'activation_mlp')",
     "P('expert', 'fsdp', None, None)", "P(None, ('fsdp', 'expert'), None, None)"},
    {"('activation_batch', 'activation_length', 'activation_mlp')",
     "P(('fsdp', 'expert'), None, None)", "same"},
    {"('exp', 'activation_mlp')", "P('expert', None)", "same"},
    {"('exp', 'activation_embed')", "P('expert', None)", "same"},
};

// mesh B fsdp2 x tp2 x ep2: 17 rows
constexpr TableRow kMeshB[] = {
    {"('exp', 'embed_moe', 'mlp_moe')", "P('expert', 'fsdp', 'tensor')", "same"},
    {"('exp', 'mlp_moe', 'embed_moe')", "P('expert', 'tensor', 'fsdp')", "same"},
    {"('embed_moe', None)", "P('fsdp', None)", "same"},
    {"('embed', None)", "P(('fsdp', 'expert'), None)", "same"},
    {"('embed', 'mlp')", "P(('fsdp', 'expert'), 'tensor')", "same"},
    {"('mlp', 'embed')", "P('tensor', ('fsdp', 'expert'))", "same"},
    {"('activation_batch', 'activation_norm_length', None)", "P(('fsdp', 'expert'), None, None)",
     "same"},
    {"('activation_batch', 'activation_norm_length', 'activation_embed')",
     "P(('fsdp', 'expert'), None, 'tensor')", "same"},
    {"('exp', 'embed_tensor_transpose', 'mlp_no_fsdp')", "P('expert', None, 'tensor')", "same"},
    {"('exp', 'mlp_no_fsdp', 'embed_tensor_transpose')", "P('expert', 'tensor', None)", "same"},
    {"('activation_batch_moe', 'activation_length_moe', None)", "P('fsdp', None, None)",
     "P(('fsdp', 'expert'), None, None)"},
    {"('activation_batch_moe', 'activation_norm_length_moe', 'activation_embed_moe')",
     "P('fsdp', None, 'tensor')", "P(('fsdp', 'expert'), None, 'tensor')"},
    {"('activation_exp', 'activation_batch_moe', None, 'activation_embed_moe')",
     "P('expert', 'fsdp', None, 'tensor')", "P(None, ('fsdp', 'expert'), None, 'tensor')"},
    {"('activation_exp', 'activation_batch_moe', None, 'activation_mlp')",
     "P('expert', 'fsdp', None, 'tensor')", "P(None, ('fsdp', 'expert'), None, 'tensor')"},
    {"('activation_batch', 'activation_length', 'activation_mlp')",
     "P(('fsdp', 'expert'), None, 'tensor')", "same"},
    {"('exp', 'activation_mlp')", "P('expert', 'tensor')", "same"},
    {"('exp', 'activation_embed')", "P('expert', 'tensor')", "same"},
};

// mesh C fsdp2 x fsdpT2 x tp2: 17 rows
constexpr TableRow kMeshC[] = {
    {"('exp', 'embed_moe', 'mlp_moe')", "P(None, 'fsdp', ('fsdp_transpose', 'tensor'))", "same"},
    {"('exp', 'mlp_moe', 'embed_moe')", "P(None, ('fsdp_transpose', 'tensor'), 'fsdp')", "same"},
    {"('embed_moe', None)", "P(('fsdp', 'fsdp_transpose'), None)", "same"},
    {"('embed', None)", "P(('fsdp', 'fsdp_transpose'), None)", "same"},
    {"('embed', 'mlp')", "P('fsdp', ('fsdp_transpose', 'tensor'))", "same"},
    {"('mlp', 'embed')", "P(('fsdp_transpose', 'tensor'), 'fsdp')", "same"},
    {"('activation_batch', 'activation_norm_length', None)",
     "P(('fsdp', 'fsdp_transpose'), None, None)", "same"},
    {"('activation_batch', 'activation_norm_length', 'activation_embed')",
     "P(('fsdp', 'fsdp_transpose'), None, 'tensor')", "same"},
    {"('exp', 'embed_tensor_transpose', 'mlp_no_fsdp')", "P(None, None, 'tensor')", "same"},
    {"('exp', 'mlp_no_fsdp', 'embed_tensor_transpose')", "P(None, 'tensor', None)", "same"},
    {"('activation_batch_moe', 'activation_length_moe', None)",
     "P(('fsdp', 'fsdp_transpose'), None, None)", "same"},
    {"('activation_batch_moe', 'activation_norm_length_moe', 'activation_embed_moe')",
     "P(('fsdp', 'fsdp_transpose'), None, 'tensor')", "same"},
    {"('activation_exp', 'activation_batch_moe', None, 'activation_embed_moe')",
     "P(None, ('fsdp', 'fsdp_transpose'), None, 'tensor')", "same"},
    {"('activation_exp', 'activation_batch_moe', None, 'activation_mlp')",
     "P(None, ('fsdp', 'fsdp_transpose'), None, 'tensor')", "same"},
    {"('activation_batch', 'activation_length', 'activation_mlp')",
     "P(('fsdp', 'fsdp_transpose'), None, 'tensor')", "same"},
    {"('exp', 'activation_mlp')", "P(None, 'tensor')", "same"},
    {"('exp', 'activation_embed')", "P(None, 'tensor')", "same"},
};

std::string HeadValue(const TableRow& row) {
  return std::string(row.head) == "same" ? row.seed : row.head;
}

// The facts table writes Python 1-tuples without their trailing comma ("(None)",
// "('expert')"); Python (and ToTupleString) print "(None,)". Restores the comma.
std::string TupleFromTable(std::string text, size_t rank) {
  if (rank == 1 && text.size() >= 2 && text.substr(text.size() - 2) != ",)")
    text = text.substr(0, text.size() - 1).append(",)");
  return text;
}

const Config& SeedConfig() {
  static const Config config = Config::Load({});
  return config;
}

const Config& HeadConfig() {
  static const Config config = Config::Load({{kHeadBase}, {}});
  return config;
}

std::string Before(const LogicalAxes& axes, const AxisRules& rules) {
  return ResolveLogicalAxes(axes, rules, nullptr).before_removal.ToTupleString();
}

TEST_CASE("Every row of facts 2.4 resolves as flax does under the seed rules",
          "[shard][axis_rules]") {
  for (const TableRow& row : kSection24) {
    const LogicalAxes axes = ParseLogicalAxes(row.logical);
    INFO("logical " << row.logical);
    REQUIRE(LogicalAxesToString(axes) == row.logical);
    CHECK(Before(axes, SeedConfig().logical_axis_rules()) == TupleFromTable(row.seed, axes.size()));
  }
}

TEST_CASE("Every row of facts 2.4 resolves as flax does under the HEAD rules",
          "[shard][axis_rules]") {
  for (const TableRow& row : kSection24) {
    const LogicalAxes axes = ParseLogicalAxes(row.logical);
    INFO("logical " << row.logical);
    REQUIRE(LogicalAxesToString(axes) == row.logical);
    CHECK(Before(axes, HeadConfig().logical_axis_rules()) ==
          TupleFromTable(HeadValue(row), axes.size()));
  }
}

TEST_CASE("Without a mesh nothing is removed and spec equals the flax result",
          "[shard][axis_rules]") {
  for (const TableRow& row : kSection24) {
    const LogicalAxes axes = ParseLogicalAxes(row.logical);
    INFO("logical " << row.logical);
    const Resolution res = ResolveLogicalAxes(axes, SeedConfig().logical_axis_rules(), nullptr);
    CHECK(res.spec == res.before_removal);
    REQUIRE(res.dims.size() == axes.size());
    for (size_t d = 0; d < axes.size(); ++d) {
      CHECK(res.dims[d].logical == axes[d]);
      CHECK(res.dims[d].before_removal == res.before_removal[d]);
      CHECK(res.dims[d].removed.empty());
    }
  }
}

enum class Rules { kSeed, kHead };

// Checks every row of a facts 2.5 table on the mesh the overrides build with 8 devices.
void CheckMeshTable(Rules which, const std::vector<std::string>& overrides,
                    const std::string& expected_mesh, const TableRow* rows, size_t count) {
  const Config config = which == Rules::kSeed ? Config::Load({{}, overrides})
                                              : Config::Load({{kHeadBase}, overrides});
  const Mesh mesh = MeshFromConfig(config, 8);
  REQUIRE(mesh.ToString() == expected_mesh);
  for (size_t i = 0; i < count; ++i) {
    const TableRow& row = rows[i];
    const LogicalAxes axes = ParseLogicalAxes(row.logical);
    INFO("logical " << row.logical);
    REQUIRE(LogicalAxesToString(axes) == row.logical);
    const Resolution res = ResolveLogicalAxes(axes, config.logical_axis_rules(), &mesh);
    CHECK(res.spec.ToString() == (which == Rules::kSeed ? std::string(row.seed) : HeadValue(row)));
  }
}

const std::vector<std::string> kMeshAOverrides = {"ici_expert_parallelism=2"};
const std::vector<std::string> kMeshBOverrides = {
    "ici_fsdp_parallelism=2", "ici_tensor_parallelism=2", "ici_expert_parallelism=2"};
const std::vector<std::string> kMeshCOverrides = {
    "ici_fsdp_parallelism=2", "ici_fsdp_transpose_parallelism=2", "ici_tensor_parallelism=2"};
constexpr char kMeshAName[] = "mesh['fsdp'=4, 'expert'=2]";
constexpr char kMeshBName[] = "mesh['fsdp'=2, 'tensor'=2, 'expert'=2]";
constexpr char kMeshCName[] = "mesh['fsdp'=2, 'fsdp_transpose'=2, 'tensor'=2]";

TEST_CASE("Every row of facts 2.5 mesh A (fsdp 4 x expert 2) matches under the seed rules",
          "[shard][axis_rules]") {
  CheckMeshTable(Rules::kSeed, kMeshAOverrides, kMeshAName, kMeshA, std::size(kMeshA));
}

TEST_CASE("Every row of facts 2.5 mesh A (fsdp 4 x expert 2) matches under the HEAD rules",
          "[shard][axis_rules]") {
  CheckMeshTable(Rules::kHead, kMeshAOverrides, kMeshAName, kMeshA, std::size(kMeshA));
}

TEST_CASE(
    "Every row of facts 2.5 mesh B (fsdp 2 x tensor 2 x expert 2) matches under the seed rules",
    "[shard][axis_rules]") {
  CheckMeshTable(Rules::kSeed, kMeshBOverrides, kMeshBName, kMeshB, std::size(kMeshB));
}

TEST_CASE(
    "Every row of facts 2.5 mesh B (fsdp 2 x tensor 2 x expert 2) matches under the HEAD rules",
    "[shard][axis_rules]") {
  CheckMeshTable(Rules::kHead, kMeshBOverrides, kMeshBName, kMeshB, std::size(kMeshB));
}

TEST_CASE(
    "Every row of facts 2.5 mesh C (fsdp 2 x fsdp_transpose 2 x tensor 2) matches under the seed "
    "rules",
    "[shard][axis_rules]") {
  CheckMeshTable(Rules::kSeed, kMeshCOverrides, kMeshCName, kMeshC, std::size(kMeshC));
}

TEST_CASE(
    "Every row of facts 2.5 mesh C (fsdp 2 x fsdp_transpose 2 x tensor 2) matches under the HEAD "
    "rules",
    "[shard][axis_rules]") {
  CheckMeshTable(Rules::kHead, kMeshCOverrides, kMeshCName, kMeshC, std::size(kMeshC));
}

// --- The algorithm on small hand-written rule lists. ---

Mesh SmallMesh() {
  // x=2, y=2, z=1 ("ghost" is not in the mesh at all).
  return Mesh({{"x", 2, 2, 1}, {"y", 2, 2, 1}, {"z", 1, 1, 1}});
}

TEST_CASE("A rule applies whole or not at all", "[shard][axis_rules]") {
  const AxisRules rules = {{"b", {"y"}}, {"a", {"x", "y"}}};
  const Resolution res = ResolveLogicalAxes(ParseLogicalAxes("a,b"), rules, nullptr);
  // 'a' is not given the free 'x' alone: its only rule conflicts on 'y' and is dropped.
  CHECK(res.before_removal.ToTupleString() == "(None, 'y')");
  REQUIRE(res.dims[0].decisions.size() == 1);
  CHECK(res.dims[0].decisions[0].outcome == RuleDecision::Outcome::kMeshAxisUsed);
  CHECK(res.dims[0].decisions[0].blocking_axis == "y");
  CHECK(res.dims[0].before_removal.empty());
  CHECK(res.dims[0].has_rule);
}

TEST_CASE("Rule list order and not dim order decides priority", "[shard][axis_rules]") {
  const AxisRules rules = {{"b", {"x"}}, {"a", {"x"}}, {"a", {"y"}}};
  CHECK(Before(ParseLogicalAxes("a,b"), rules) == "('y', 'x')");
  CHECK(Before(ParseLogicalAxes("b,a"), rules) == "('x', 'y')");
}

TEST_CASE("A later rule with the same name is a fallback tried only after a blocked one",
          "[shard][axis_rules]") {
  const AxisRules rules = {{"b", {"x"}}, {"a", {"x", "y"}}, {"a", {"y"}}, {"a", {"z"}}};
  const Resolution res = ResolveLogicalAxes(ParseLogicalAxes("a,b"), rules, nullptr);
  CHECK(res.before_removal.ToTupleString() == "('y', 'x')");
  const std::vector<RuleDecision>& d = res.dims[0].decisions;
  REQUIRE(d.size() == 3);
  CHECK(d[0].rule_index == 1);
  CHECK(d[0].outcome == RuleDecision::Outcome::kMeshAxisUsed);
  CHECK(d[0].blocking_axis == "x");
  CHECK(d[1].rule_index == 2);
  CHECK(d[1].outcome == RuleDecision::Outcome::kApplied);
  CHECK(d[2].rule_index == 3);
  CHECK(d[2].outcome == RuleDecision::Outcome::kDimAlreadyAssigned);
  CHECK(d[2].blocking_axis.empty());
  // Without the conflict the first rule wins and the fallbacks are not used.
  CHECK(Before(ParseLogicalAxes("a"), rules) == "(('x', 'y'),)");
}

TEST_CASE("A rule with no mesh axes claims its dim and leaves the axes free",
          "[shard][axis_rules]") {
  const AxisRules rules = {{"a", {}}, {"a", {"x"}}, {"b", {"x"}}};
  const Resolution res = ResolveLogicalAxes(ParseLogicalAxes("a,b"), rules, nullptr);
  CHECK(res.before_removal.ToTupleString() == "(None, 'x')");
  const std::vector<RuleDecision>& d = res.dims[0].decisions;
  REQUIRE(d.size() == 2);
  CHECK(d[0].outcome == RuleDecision::Outcome::kApplied);
  CHECK(d[0].mesh_axes.empty());
  CHECK(d[1].outcome == RuleDecision::Outcome::kDimAlreadyAssigned);
  CHECK(res.dims[0].has_rule);
}

TEST_CASE("Names without a rule and unnamed dims are replicated", "[shard][axis_rules]") {
  const AxisRules rules = {{"a", {"x"}}};
  const Mesh mesh = SmallMesh();
  const Resolution res = ResolveLogicalAxes(ParseLogicalAxes("unknown,None,a"), rules, &mesh);
  CHECK(res.before_removal.ToTupleString() == "(None, None, 'x')");
  CHECK(res.spec.ToString() == "P(None, None, 'x')");
  CHECK_FALSE(res.dims[0].has_rule);
  CHECK(res.dims[0].decisions.empty());
  CHECK(res.dims[0].logical == std::optional<std::string>("unknown"));
  CHECK_FALSE(res.dims[1].logical.has_value());
  CHECK_FALSE(res.dims[1].has_rule);
  CHECK(res.dims[2].has_rule);
  CHECK(Before(ParseLogicalAxes("q"), {}) == "(None,)");
}

TEST_CASE("A logical name used twice is an Error but unnamed dims may repeat",
          "[shard][axis_rules]") {
  const AxisRules rules = {{"a", {"x"}}};
  CHECK_THROWS_AS(ResolveLogicalAxes(ParseLogicalAxes("a,None,a"), rules, nullptr), Error);
  CHECK_THROWS_WITH(ResolveLogicalAxes(ParseLogicalAxes("a,a"), rules, nullptr),
                    Catch::Contains("'a'"));
  // Even a name without any rule may not repeat (flax checks names, not rules).
  CHECK_THROWS_AS(ResolveLogicalAxes(ParseLogicalAxes("q,q"), rules, nullptr), Error);
  CHECK_NOTHROW(ResolveLogicalAxes(ParseLogicalAxes("None,None,a"), rules, nullptr));
}

TEST_CASE("Axes absent from the mesh or of size 1 still block but are removed",
          "[shard][axis_rules]") {
  const Mesh mesh = SmallMesh();
  const AxisRules rules = {
      {"a", {"ghost", "x"}}, {"b", {"ghost", "y"}}, {"c", {"z"}}, {"c", {"y"}}, {"e", {"z", "y"}}};
  const Resolution res = ResolveLogicalAxes(ParseLogicalAxes("a,b,c"), rules, &mesh);
  // 'b' is blocked by 'ghost', which the mesh does not even have.
  CHECK(res.before_removal.ToTupleString() == "(('ghost', 'x'), None, 'z')");
  CHECK(res.spec.ToString() == "P('x', None, None)");
  REQUIRE(res.dims[1].decisions.size() == 1);
  CHECK(res.dims[1].decisions[0].outcome == RuleDecision::Outcome::kMeshAxisUsed);
  CHECK(res.dims[1].decisions[0].blocking_axis == "ghost");
  CHECK(res.dims[0].before_removal == std::vector<std::string>{"ghost", "x"});
  CHECK(res.dims[0].removed == std::vector<std::string>{"ghost"});
  CHECK(res.dims[2].removed == std::vector<std::string>{"z"});
  // 'c' took size-1 'z' first, so its 'y' fallback never fires: sizes play no role.
  CHECK(res.dims[2].decisions.size() == 2);
  CHECK(res.dims[2].decisions[1].outcome == RuleDecision::Outcome::kDimAlreadyAssigned);
  // A multi-axis entry keeps its order minus the removed axes.
  const Resolution e = ResolveLogicalAxes(ParseLogicalAxes("e"), rules, &mesh);
  CHECK(e.before_removal.ToTupleString() == "(('z', 'y'),)");
  CHECK(e.spec.ToString() == "P('y',)");
}

TEST_CASE("Decisions for the expert weight under the seed rules follow facts 1.2 and 2.2",
          "[shard][axis_rules]") {
  // Seed rules (facts 1.2): 39 exp->expert, 40 mlp_moe, 41-44 the four embed_moe variants.
  const AxisRules& rules = SeedConfig().logical_axis_rules();
  const Resolution res =
      ResolveLogicalAxes(ParseLogicalAxes("exp,embed_moe,mlp_moe"), rules, nullptr);
  REQUIRE(res.dims.size() == 3);
  REQUIRE(res.dims[0].decisions.size() == 1);
  CHECK(res.dims[0].decisions[0].rule_index == 39);
  CHECK(res.dims[0].decisions[0].outcome == RuleDecision::Outcome::kApplied);
  CHECK(rules[39].bare_string);
  REQUIRE(res.dims[2].decisions.size() == 1);
  CHECK(res.dims[2].decisions[0].rule_index == 40);
  CHECK(res.dims[2].decisions[0].outcome == RuleDecision::Outcome::kApplied);
  const std::vector<RuleDecision>& embed = res.dims[1].decisions;
  REQUIRE(embed.size() == 4);
  CHECK(embed[0].rule_index == 41);
  CHECK(embed[0].logical == "embed_moe");
  CHECK(embed[0].mesh_axes ==
        std::vector<std::string>{"fsdp", "fsdp_transpose", "tensor_transpose", "context"});
  CHECK(embed[0].outcome == RuleDecision::Outcome::kMeshAxisUsed);
  CHECK(embed[0].blocking_axis == "fsdp_transpose");
  CHECK(embed[1].rule_index == 42);
  CHECK(embed[1].outcome == RuleDecision::Outcome::kApplied);
  CHECK(embed[2].rule_index == 43);
  CHECK(embed[2].outcome == RuleDecision::Outcome::kDimAlreadyAssigned);
  CHECK(embed[3].rule_index == 44);
  CHECK(embed[3].outcome == RuleDecision::Outcome::kDimAlreadyAssigned);
}

TEST_CASE("LogicalAxesToString prints a Python tuple", "[shard][axis_rules]") {
  CHECK(LogicalAxesToString({}) == "()");
  CHECK(LogicalAxesToString({std::nullopt}) == "(None,)");
  CHECK(LogicalAxesToString({std::string("exp")}) == "('exp',)");
  CHECK(LogicalAxesToString(
            {std::string("activation_batch"), std::nullopt, std::string("activation_embed")}) ==
        "('activation_batch', None, 'activation_embed')");
}

TEST_CASE("ParseLogicalAxes reads the comma syntax with None or empty for unnamed dims",
          "[shard][axis_rules]") {
  const LogicalAxes axes = ParseLogicalAxes("exp,embed_moe,None");
  REQUIRE(axes.size() == 3);
  CHECK(axes[0] == std::optional<std::string>("exp"));
  CHECK(axes[1] == std::optional<std::string>("embed_moe"));
  CHECK_FALSE(axes[2].has_value());
  CHECK(LogicalAxesToString(ParseLogicalAxes("a,,b")) == "('a', None, 'b')");
  CHECK(LogicalAxesToString(ParseLogicalAxes("None")) == "(None,)");
  CHECK(LogicalAxesToString(ParseLogicalAxes("exp")) == "('exp',)");
  CHECK(LogicalAxesToString(ParseLogicalAxes("('exp', 'embed_moe', None)")) ==
        "('exp', 'embed_moe', None)");
}

TEST_CASE("ParseLogicalAxes reads back a Python 1-tuple as LogicalAxesToString prints it",
          "[shard][axis_rules]") {
  // MaxText's debug log prints 1-D logical names as "('exp',)"; a user pasting that into
  // `explain --axes` means one dim, not ('exp', None).
  CHECK(LogicalAxesToString(ParseLogicalAxes("('exp',)")) == "('exp',)");
  CHECK(LogicalAxesToString(ParseLogicalAxes("(None,)")) == "(None,)");
}

// ResolveSpec is the resolution without its records (fit and plan call it for every parameter
// of every config): the same spec as ResolveLogicalAxes, on every row of facts 2.4, under both
// rule sets, on a mesh where some axes have one device (removed) and some are absent.
TEST_CASE("ResolveSpec gives ResolveLogicalAxes's spec for every row, rules and mesh",
          "[shard][axis_rules]") {
  const Mesh mesh({{"data", 1, 1, 1}, {"fsdp", 4, 4, 1}, {"tensor", 2, 2, 1}, {"expert", 2, 2, 1},
                   {"context", 1, 1, 1}});
  for (const Config* config : {&SeedConfig(), &HeadConfig()}) {
    for (const TableRow& row : kSection24) {
      const LogicalAxes axes = ParseLogicalAxes(row.logical);
      INFO("logical " << row.logical);
      for (const Mesh* m : {&mesh, static_cast<const Mesh*>(nullptr)}) {
        CHECK(ResolveSpec(axes, config->logical_axis_rules(), m) ==
              ResolveLogicalAxes(axes, config->logical_axis_rules(), m).spec);
      }
    }
  }
  CHECK_THROWS_WITH(ResolveSpec(LogicalNames({"exp", "exp"}), SeedConfig().logical_axis_rules(), &mesh),
                    Catch::Contains("name 'exp' appears twice"));
}

}  // namespace
}  // namespace shardtrace
