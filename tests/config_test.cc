// Tests for Config::Load: the embedded seed-era configs, the current-main configs copied into
// testdata/maxtext-configs (see testdata/PROVENANCE.md), pyconfig's merge order and rule merge,
// derived dims and every validation error.
#include "config/config.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include "config/embedded_configs.h"
#include "config/key_suggest.h"
#include "config/run_inputs.h"
#include "run/run.h"
#include "test_support.h"
#include "util/error.h"

namespace shardtrace {
namespace {

namespace fs = std::filesystem;

// MaxText main's configs (testdata/PROVENANCE.md); the seed-era ones are embedded from
// src/config/maxtext.
#define MAIN_CONFIGS SHARDTRACE_SOURCE_DIR "/testdata/maxtext-configs"
constexpr char kMainConfigs[] = MAIN_CONFIGS;
constexpr char kMainBase[] = MAIN_CONFIGS "/base.yml";
#undef MAIN_CONFIGS
constexpr char kSeedBase[] = SHARDTRACE_SOURCE_DIR "/src/config/maxtext/base.yml";

Config LoadEmbedded(std::vector<std::string> overrides) {
  return Config::Load(ConfigSource{{}, std::move(overrides)});
}

using testing::ReadFile;
using testing::TempDir;

int CountRules(const Config& config, const std::string& name) {
  const AxisRules& rules = config.logical_axis_rules();
  return static_cast<int>(std::count_if(rules.begin(), rules.end(),
                                        [&](const AxisRule& r) { return r.logical == name; }));
}

TEST_CASE("embedded configs match the files under src/config/maxtext byte for byte", "[config]") {
  const fs::path root = fs::path(SHARDTRACE_SOURCE_DIR) / "src/config/maxtext";
  int on_disk = 0;
  for (const auto& entry : fs::recursive_directory_iterator(root)) {
    if (entry.path().extension() != ".yml") continue;
    ++on_disk;
    const std::string relative = fs::relative(entry.path(), root).generic_string();
    const auto text = FindEmbeddedConfig(relative);
    INFO(relative);
    REQUIRE(text.has_value());
    CHECK(*text == ReadFile(entry.path()));
  }
  CHECK(static_cast<int>(EmbeddedConfigFiles().size()) == on_disk);
  CHECK(FindEmbeddedConfig("models/deepseek3-671b.yml").has_value());
  CHECK(FindEmbeddedConfig("custom_mesh_and_rule/pure-fsdp.yml").has_value());
  CHECK_FALSE(FindEmbeddedConfig("models/nope.yml").has_value());
}

TEST_CASE("embedded seed base.yml loads with its mesh and 82 rules", "[config]") {
  const Config config = LoadEmbedded({});
  const std::vector<std::string>& mesh = config.mesh_axes();
  CHECK(mesh.size() == 12);
  CHECK(std::find(mesh.begin(), mesh.end(), "tensor_transpose") != mesh.end());
  CHECK(std::find(mesh.begin(), mesh.end(), "context_usp_ulysses") == mesh.end());
  REQUIRE(config.logical_axis_rules().size() == 82);
  const AxisRule& rule33 = config.logical_axis_rules()[33];
  CHECK(rule33.logical == "activation_batch_moe");
  CHECK(rule33.mesh_axes == std::vector<std::string>{"data", "fsdp", "fsdp_transpose"});
  CHECK_FALSE(rule33.bare_string);
  const AxisRule& exp = config.logical_axis_rules()[39];
  CHECK(exp.logical == "exp");
  CHECK(exp.mesh_axes == std::vector<std::string>{"expert"});
  CHECK(exp.bare_string);
  CHECK(config.logical_axis_rules()[12].logical == "activation_kv_length");
  CHECK(config.logical_axis_rules()[12].mesh_axes.empty());
  REQUIRE(config.data_sharding().size() == 1);
  CHECK(config.data_sharding()[0].size() == 11);
  REQUIRE(config.loaded_files().size() == 1);
  CHECK(config.loaded_files()[0] == "embedded base.yml (MaxText 313890777)");

  // Defaults and derived values at scale 1.
  CHECK(config.Int("num_experts") == 1);
  CHECK(config.Int("emb_dim") == 2048);
  CHECK(config.Int("mlp_dim") == 7168);
  CHECK(config.Int("moe_mlp_dim") == -1);
  CHECK(config.Int("moe_expert_input_dim") == -1);
  CHECK(config.Float("capacity_factor") == -1.0);
  CHECK(config.Bool("sparse_matmul"));
  CHECK_FALSE(config.Bool("using_pipeline_parallelism"));
  CHECK(config.Str("dtype") == "bfloat16");
  CHECK(config.StrList("mlp_activations") == std::vector<std::string>{"silu", "linear"});
  CHECK(config.Get("padded_base_moe_mlp_dim").type == ConfigValue::Type::kNull);
  CHECK_FALSE(config.Bool("prefuse_moe_weights"));
  // HEAD-only keys are known with their defaults on the seed base.
  CHECK(config.Int("num_moe_emb_chunks") == 0);
  CHECK(config.Int("num_moe_token_chunks") == 1);
  CHECK_FALSE(config.Bool("moe_dispatch_no_expert_sharding"));
  CHECK_FALSE(config.Bool("use_ragged_sort"));
  CHECK_FALSE(config.Bool("check_vma"));
  CHECK_FALSE(config.Bool("use_gmm_v2"));
  CHECK(config.Int("ici_context_usp_ulysses_parallelism") == 1);
  CHECK(config.Int("dcn_context_usp_ulysses_parallelism") == 1);
  CHECK(config.Int("ici_tensor_transpose_parallelism") == 1);
  // A nested base.yml mapping survives as kMap.
  CHECK(config.Get("debug").type == ConfigValue::Type::kMap);
  CHECK(config.Get("debug").ToString() == "{'rl': False}");
  CHECK(config.Float("normalization_layer_epsilon") == 1e-05);
  // pyconfig reads the string None as None.
  CHECK(config.Get("max_num_checkpoints_to_keep").type == ConfigValue::Type::kNull);
}

TEST_CASE("HEAD-only keys can be set on the embedded seed base", "[config]") {
  const Config config = LoadEmbedded(
      {"num_moe_token_chunks=4", "use_ragged_sort=true", "ici_context_usp_ulysses_parallelism=2"});
  CHECK(config.Int("num_moe_token_chunks") == 4);
  CHECK(config.Bool("use_ragged_sort"));
  CHECK(config.Int("ici_context_usp_ulysses_parallelism") == 2);
}

TEST_CASE("model_name loads the embedded model file", "[config]") {
  const Config config = LoadEmbedded({"model_name=deepseek3-671b"});
  CHECK(config.Int("emb_dim") == 7168);
  CHECK(config.Int("mlp_dim") == 18432);
  CHECK(config.Int("moe_mlp_dim") == 2048);
  CHECK(config.Int("num_experts") == 256);
  CHECK(config.Int("num_experts_per_tok") == 8);
  CHECK(config.Int("num_decoder_layers") == 61);
  CHECK(config.Int("num_query_heads") == 128);
  CHECK(config.Float("routed_scaling_factor") == 2.5);
  CHECK(config.Str("decoder_block") == "deepseek");
  CHECK(config.Str("model_name") == "deepseek3-671b");
  REQUIRE(config.loaded_files().size() == 2);
  CHECK(config.loaded_files()[1] == "embedded models/deepseek3-671b.yml (MaxText 313890777)");
  // The model file sets no rules: the base list is untouched.
  CHECK(config.logical_axis_rules().size() == 82);
}

TEST_CASE("Instruct model names use the base model file", "[config]") {
  const Config config = LoadEmbedded({"model_name=deepseek3-671b-Instruct"});
  CHECK(config.Int("num_experts") == 256);
  CHECK(config.Str("model_name") == "deepseek3-671b-Instruct");
}

TEST_CASE("every embedded model file loads", "[config]") {
  for (const EmbeddedFile& file : EmbeddedConfigFiles()) {
    if (!file.path.starts_with("models/")) continue;
    std::string name(file.path.substr(7));
    name.resize(name.size() - 4);
    INFO(name);
    CHECK_NOTHROW(LoadEmbedded({"model_name=" + name}));
  }
}

TEST_CASE("current-main base.yml loads with models beside it", "[config]") {
  const Config base = Config::Load(ConfigSource{{kMainBase}, {}});
  CHECK(base.logical_axis_rules().size() == 76);
  const std::vector<std::string>& mesh = base.mesh_axes();
  CHECK(std::find(mesh.begin(), mesh.end(), "context_usp_ulysses") != mesh.end());
  CHECK(std::find(mesh.begin(), mesh.end(), "tensor_transpose") == mesh.end());
  // Seed-only knobs are filled in so the seed-era tracer can read them.
  CHECK(base.Int("ici_tensor_transpose_parallelism") == 1);
  CHECK(base.Int("dcn_tensor_transpose_parallelism") == 1);
  CHECK(base.loaded_files() == std::vector<std::string>{std::string(kMainBase)});

  const Config config = Config::Load(ConfigSource{{kMainBase}, {"model_name=deepseek2-16b"}});
  REQUIRE(config.loaded_files().size() == 2);
  CHECK(config.loaded_files()[1] == std::string(kMainConfigs) + "/models/deepseek2-16b.yml");
  CHECK(config.Int("num_experts") == 64);
  CHECK(config.Int("num_experts_per_tok") == 6);
  CHECK(config.Int("moe_mlp_dim") == 1408);
  CHECK(config.Int("ici_tensor_transpose_parallelism") == 1);

  for (const auto& entry : fs::directory_iterator(std::string(kMainConfigs) + "/models")) {
    INFO(entry.path().string());
    CHECK_NOTHROW(
        Config::Load(ConfigSource{{kMainBase}, {"model_name=" + entry.path().stem().string()}}));
  }
  // The seed-era base.yml loaded from disk (not from the embedded copy) has the seed's rules.
  const Config seed = Config::Load(ConfigSource{{kSeedBase}, {}});
  CHECK(seed.logical_axis_rules().size() == 82);
}

TEST_CASE("override values parse as YAML scalars and flow sequences", "[config]") {
  const Config config = LoadEmbedded(
      {"mlp_activations=[gelu,linear]", "dtype=float32", "capacity_factor=2", "sparse_matmul=false",
       "megablox=False", "mlp_bias=True", "run_name='123'", "per_device_batch_size=0.5"});
  CHECK(config.StrList("mlp_activations") == std::vector<std::string>{"gelu", "linear"});
  CHECK(config.Str("dtype") == "float32");
  CHECK(config.Get("capacity_factor").type == ConfigValue::Type::kFloat);
  CHECK(config.Float("capacity_factor") == 2.0);
  CHECK_FALSE(config.Bool("sparse_matmul"));
  CHECK_FALSE(config.Bool("megablox"));
  CHECK(config.Bool("mlp_bias"));
  CHECK(config.Str("run_name") == "123");
  CHECK(config.Float("per_device_batch_size") == 0.5);
  // An integral float is accepted for an int key.
  CHECK(LoadEmbedded({"num_experts=4.0", "base_moe_mlp_dim=7168"}).Int("num_experts") == 4);
}

TEST_CASE("ConfigValue::ToString prints Python reprs", "[config]") {
  const Config config =
      LoadEmbedded({"capacity_factor=2", "num_experts=4", "base_moe_mlp_dim=7168"});
  CHECK(config.Get("num_experts").ToString() == "4");
  CHECK(config.Get("capacity_factor").ToString() == "2.0");
  CHECK(config.Get("sparse_matmul").ToString() == "True");
  CHECK(config.Get("dtype").ToString() == "'bfloat16'");
  CHECK(config.Get("mlp_activations").ToString() == "['silu', 'linear']");
  CHECK(config.Get("normalization_layer_epsilon").ToString() == "1e-05");
  CHECK(config.Get("padded_base_moe_mlp_dim").ToString() == "None");
  CHECK(config.Get("routed_bias_update_rate").ToString() == "0.0");
}

TEST_CASE("merge precedence: base <- model file <- overrides", "[config]") {
  // The model file beats the base.
  CHECK(LoadEmbedded({"model_name=mixtral-8x7b"}).Int("num_experts") == 8);
  // A key the model file does not set is taken from the overrides.
  CHECK(LoadEmbedded({"model_name=mixtral-8x7b", "capacity_factor=1.5"}).Float("capacity_factor") ==
        1.5);
  // A key set in both is an error unless override_model_config=true...
  CHECK_THROWS_WITH(
      LoadEmbedded({"model_name=mixtral-8x7b", "num_experts_per_tok=1"}),
      Catch::Contains("num_experts_per_tok") && Catch::Contains("override_model_config=true"));
  // ...which lets the override win.
  const Config overridden = LoadEmbedded(
      {"model_name=mixtral-8x7b", "num_experts_per_tok=1", "override_model_config=true"});
  CHECK(overridden.Int("num_experts_per_tok") == 1);
  CHECK(overridden.Int("num_experts") == 8);
  // Setting the same value as the model file is not a conflict (pyconfig compares values).
  CHECK(LoadEmbedded({"model_name=mixtral-8x7b", "num_experts=8"}).Int("num_experts") == 8);
}

TEST_CASE("extra config files merge over the base like a model file", "[config]") {
  const TempDir dir;
  const std::string base = dir.Write("base.yml", ReadFile(kSeedBase));
  dir.Write("models/tiny.yml", "num_experts: 4\nbase_moe_mlp_dim: 7168\n");
  const std::string extra =
      dir.Write("extra.yml",
                "model_name: tiny\nnum_experts_per_tok: 2\ncapacity_factor: 1\n"
                "logical_axis_rules: [['exp', ['fsdp']]]\n");
  const Config config = Config::Load(ConfigSource{{base, extra}, {"capacity_factor=3.0"}});
  CHECK(config.Int("num_experts") == 4);          // from the model file named in extra.yml
  CHECK(config.Int("num_experts_per_tok") == 2);  // from extra.yml
  CHECK(config.Float("capacity_factor") == 3.0);  // the override beats extra.yml
  CHECK(config.logical_axis_rules().back().logical == "exp");
  CHECK(config.logical_axis_rules().back().mesh_axes == std::vector<std::string>{"fsdp"});
  CHECK(CountRules(config, "exp") == 1);
  CHECK(config.loaded_files() ==
        std::vector<std::string>{base, extra, (dir.path() / "models/tiny.yml").string()});
}

TEST_CASE("logical_axis_rules overrides delete same-named rules and append", "[config]") {
  const Config config = LoadEmbedded(
      {"logical_axis_rules=[['embed_moe', ['fsdp']], ['my_axis', 'tensor'], ['qkv', []]]"});
  const AxisRules& rules = config.logical_axis_rules();
  // 82 - 4 embed_moe variants - 1 qkv + 3 new.
  REQUIRE(rules.size() == 80);
  CHECK(CountRules(config, "embed_moe") == 1);
  CHECK(rules[77].logical == "embed_moe");
  CHECK(rules[77].mesh_axes == std::vector<std::string>{"fsdp"});
  CHECK(rules[78].logical == "my_axis");
  CHECK(rules[78].bare_string);
  CHECK(rules[79].logical == "qkv");
  CHECK(rules[79].mesh_axes.empty());
  // Untouched rules keep their relative order (qkv, rule 20, is gone).
  CHECK(rules[32].logical == "activation_batch_moe");
  CHECK(rules[0].logical == "activation_embed_and_logits_batch");
  // The merged list is also what the value map holds.
  CHECK(config.Get("logical_axis_rules").list.size() == 80);
}

TEST_CASE("override_logical_axis_rules replaces the whole list", "[config]") {
  const Config config = LoadEmbedded({"override_logical_axis_rules=true",
                                      "logical_axis_rules=[['exp', 'expert'], ['embed', []]]"});
  REQUIRE(config.logical_axis_rules().size() == 2);
  CHECK(config.logical_axis_rules()[0].logical == "exp");
  CHECK(config.logical_axis_rules()[1].logical == "embed");
  // As in pyconfig, the flag without rules of its own leaves no rules at all.
  CHECK(LoadEmbedded({"override_logical_axis_rules=True"}).logical_axis_rules().empty());
  // A model file with override_logical_axis_rules: true brings its own full list.
  const Config batchsplit = LoadEmbedded({"model_name=deepseek3-671b-batchsplit"});
  CHECK(batchsplit.logical_axis_rules().size() < 82);
  CHECK(CountRules(batchsplit, "expert_only") == 1);
  CHECK(batchsplit.logical_axis_rules()[0].logical != "activation_embed_and_logits_batch");
}

TEST_CASE("custom_mesh_and_rule replaces mesh axes, data sharding and rules", "[config]") {
  const Config config = LoadEmbedded(
      {"custom_mesh_and_rule=pure-fsdp", "logical_axis_rules=[['my_axis', 'tensor']]"});
  CHECK(config.mesh_axes() == std::vector<std::string>{"fsdp"});
  CHECK(config.data_sharding() == std::vector<std::vector<std::string>>{{"fsdp"}});
  REQUIRE(config.logical_axis_rules().size() == 14);
  CHECK(config.logical_axis_rules()[2].logical == "activation_batch_moe");
  CHECK(config.logical_axis_rules()[13].logical == "exp_with_fsdp");
  CHECK(config.logical_axis_rules()[13].bare_string);
  CHECK(CountRules(config, "my_axis") == 0);
  REQUIRE(config.loaded_files().size() == 2);
  CHECK(config.loaded_files()[1] ==
        "embedded custom_mesh_and_rule/pure-fsdp.yml (MaxText 313890777)");
  // Beside a user base.yml it is looked up in <dir>/custom_mesh_and_rule.
  const Config main =
      Config::Load(ConfigSource{{kMainBase}, {"custom_mesh_and_rule=shard-exp-on-fsdp"}});
  CHECK(main.loaded_files()[1] ==
        std::string(kMainConfigs) + "/custom_mesh_and_rule/shard-exp-on-fsdp.yml");
  CHECK_THROWS_WITH(
      LoadEmbedded({"custom_mesh_and_rule=nope"}),
      Catch::Contains("custom_mesh_and_rule") && Catch::Contains("custom_mesh_and_rule/nope.yml"));
}

TEST_CASE("every custom_mesh_and_rule file loads with both bases", "[config]") {
  for (const EmbeddedFile& file : EmbeddedConfigFiles()) {
    if (!file.path.starts_with("custom_mesh_and_rule/")) continue;
    const std::string name = fs::path(file.path).stem().string();
    INFO(name);
    const Config config = LoadEmbedded({"custom_mesh_and_rule=" + name});
    CHECK_FALSE(config.mesh_axes().empty());
    CHECK_FALSE(config.logical_axis_rules().empty());
  }
  for (const auto& entry :
       fs::directory_iterator(std::string(kMainConfigs) + "/custom_mesh_and_rule")) {
    INFO(entry.path().string());
    CHECK_NOTHROW(Config::Load(
        ConfigSource{{kMainBase}, {"custom_mesh_and_rule=" + entry.path().stem().string()}}));
  }
}

TEST_CASE("global_parameter_scale scales the derived dims", "[config]") {
  const Config one = LoadEmbedded({"model_name=mixtral-8x7b"});
  const int64_t emb = one.Int("emb_dim");
  const int64_t mlp = one.Int("mlp_dim");
  const int64_t moe = one.Int("moe_mlp_dim");
  const int64_t layers = one.Int("num_decoder_layers");
  const int64_t heads = one.Int("num_query_heads");

  // 8 = 2^3: (q, r) = (1, 0): everything x2.
  const Config eight = LoadEmbedded({"model_name=mixtral-8x7b", "global_parameter_scale=8"});
  CHECK(eight.Int("emb_dim") == 2 * emb);
  CHECK(eight.Int("mlp_dim") == 2 * mlp);
  CHECK(eight.Int("moe_mlp_dim") == 2 * moe);
  CHECK(eight.Int("num_decoder_layers") == 2 * layers);
  CHECK(eight.Int("num_query_heads") == 2 * heads);
  CHECK(eight.Int("num_experts") == 8);  // never scaled

  // 2 = 2^1: (0, 1): mlp and heads x2, emb and layers x1.
  const Config two = LoadEmbedded({"model_name=mixtral-8x7b", "global_parameter_scale=2"});
  CHECK(two.Int("emb_dim") == emb);
  CHECK(two.Int("mlp_dim") == 2 * mlp);
  CHECK(two.Int("moe_mlp_dim") == 2 * moe);
  CHECK(two.Int("num_query_heads") == 2 * heads);
  CHECK(two.Int("num_decoder_layers") == layers);

  // 4 = 2^2: (0, 2): emb x2 as well.
  const Config four = LoadEmbedded({"model_name=mixtral-8x7b", "global_parameter_scale=4"});
  CHECK(four.Int("emb_dim") == 2 * emb);
  CHECK(four.Int("mlp_dim") == 2 * mlp);
  CHECK(four.Int("num_decoder_layers") == layers);

  CHECK_THROWS_WITH(LoadEmbedded({"global_parameter_scale=3"}),
                    Catch::Contains("global_parameter_scale") && Catch::Contains("power of two"));
  CHECK_THROWS_WITH(LoadEmbedded({"global_parameter_scale=0"}),
                    Catch::Contains("global_parameter_scale"));
}

TEST_CASE("using_pipeline_parallelism and qwen3_moe are derived", "[config]") {
  CHECK(LoadEmbedded({"ici_pipeline_parallelism=2"}).Bool("using_pipeline_parallelism"));
  CHECK(LoadEmbedded({"dcn_pipeline_parallelism=4"}).Bool("using_pipeline_parallelism"));
  // A fully-MoE qwen3_moe model takes base_moe_mlp_dim as its base_mlp_dim.
  const Config qwen = LoadEmbedded({"decoder_block=qwen3_moe", "num_experts=8",
                                    "num_experts_per_tok=2", "base_moe_mlp_dim=256"});
  CHECK(qwen.Int("base_mlp_dim") == 256);
  CHECK(qwen.Int("mlp_dim") == 256);
  CHECK(qwen.Int("moe_mlp_dim") == 256);
  // moe_expert_input_dim is kept as given.
  CHECK(LoadEmbedded({"moe_expert_input_dim=64"}).Int("moe_expert_input_dim") == 64);
}

TEST_CASE("unknown keys suggest the closest known keys", "[config]") {
  CHECK_THROWS_WITH(
      LoadEmbedded({"num_expert=4"}),
      "unknown config key 'num_expert' (did you mean num_experts, num_experts_per_tok?)");
  CHECK_THROWS_WITH(LoadEmbedded({"qqqqqqqqqqqqqqqqqqqq=1"}),
                    "unknown config key 'qqqqqqqqqqqqqqqqqqqq'");
  const std::vector<std::string> known = {"capacity_factor", "sparse_matmul", "megablox"};
  CHECK(config_internal::SuggestKeys("capacity_facter", known) ==
        std::vector<std::string>{"capacity_factor"});
  CHECK(config_internal::EditDistance("kitten", "sitting") == 3);
  // Unknown keys in a model file are named with the file.
  const TempDir dir;
  const std::string base = dir.Write("base.yml", ReadFile(kSeedBase));
  dir.Write("models/bad.yml", "num_expertz: 4\n");
  CHECK_THROWS_WITH(Config::Load(ConfigSource{{base}, {"model_name=bad"}}),
                    Catch::Contains("'num_expertz'") && Catch::Contains("models/bad.yml") &&
                        Catch::Contains("num_experts"));
}

TEST_CASE("values of the wrong type are rejected", "[config]") {
  CHECK_THROWS_WITH(LoadEmbedded({"num_experts=abc"}),
                    "num_experts: expected an integer, got 'abc'");
  CHECK_THROWS_WITH(LoadEmbedded({"num_experts=2.5"}),
                    Catch::Contains("num_experts: expected an integer"));
  CHECK_THROWS_WITH(LoadEmbedded({"capacity_factor=high"}),
                    Catch::Contains("capacity_factor: expected a float"));
  CHECK_THROWS_WITH(LoadEmbedded({"sparse_matmul=2"}),
                    Catch::Contains("sparse_matmul: expected a boolean"));
  CHECK_THROWS_WITH(LoadEmbedded({"mlp_activations=silu"}),
                    Catch::Contains("mlp_activations: expected a list"));
  CHECK_THROWS_WITH(LoadEmbedded({"dtype=[a, b]"}), Catch::Contains("dtype: expected a string"));
  CHECK_THROWS_WITH(LoadEmbedded({"logical_axis_rules=[['exp', 3]]"}),
                    Catch::Contains("logical_axis_rules[0]"));
  // A null default accepts anything.
  CHECK(LoadEmbedded({"padded_base_moe_mlp_dim=128"}).Int("padded_base_moe_mlp_dim") == 128);
  // Typed getters name the key too.
  const Config config = LoadEmbedded({});
  CHECK_THROWS_WITH(config.Int("dtype"), Catch::Contains("dtype"));
  CHECK_THROWS_WITH(config.Get("no_such_key"), Catch::Contains("no_such_key"));
  CHECK_THROWS_WITH(config.Bool("num_experts"), Catch::Contains("num_experts"));
}

TEST_CASE("derived-only keys cannot be set", "[config]") {
  CHECK_THROWS_WITH(LoadEmbedded({"emb_dim=1024"}),
                    Catch::Contains("emb_dim") && Catch::Contains("base_emb_dim"));
  CHECK_THROWS_WITH(LoadEmbedded({"moe_mlp_dim=1024"}), Catch::Contains("base_moe_mlp_dim"));
  CHECK_THROWS_WITH(LoadEmbedded({"mlp_dim=1024"}), Catch::Contains("base_mlp_dim"));
}

TEST_CASE("MoE constraints are validated", "[config]") {
  const std::vector<std::string> moe = {"num_experts=8", "base_moe_mlp_dim=7168"};
  auto with = [&moe](std::vector<std::string> extra) {
    extra.insert(extra.begin(), moe.begin(), moe.end());
    return extra;
  };
  CHECK_NOTHROW(LoadEmbedded(with({"num_experts_per_tok=8"})));
  CHECK_THROWS_WITH(LoadEmbedded(with({"num_experts_per_tok=9"})),
                    Catch::Contains("num_experts_per_tok") && Catch::Contains("num_experts (8)"));
  CHECK_NOTHROW(LoadEmbedded(with({"n_routing_groups=4", "topk_routing_group=2"})));
  CHECK_THROWS_WITH(LoadEmbedded(with({"n_routing_groups=3", "topk_routing_group=1"})),
                    Catch::Contains("n_routing_groups"));
  CHECK_THROWS_WITH(LoadEmbedded(with({"n_routing_groups=4", "topk_routing_group=5"})),
                    Catch::Contains("topk_routing_group"));
  CHECK_THROWS_WITH(LoadEmbedded({"num_experts=8"}),
                    Catch::Contains("moe_mlp_dim") && Catch::Contains("num_experts > 1"));
  CHECK_THROWS_WITH(LoadEmbedded({"num_experts=8", "base_moe_mlp_dim=512"}),
                    Catch::Contains("base_mlp_dim") && Catch::Contains("base_moe_mlp_dim"));
  CHECK_NOTHROW(
      LoadEmbedded({"num_experts=8", "base_moe_mlp_dim=512", "first_num_dense_layers=1"}));
  CHECK_NOTHROW(LoadEmbedded({"num_experts=8", "base_moe_mlp_dim=512", "decoder_block=gemma4"}));

  CHECK_THROWS_WITH(LoadEmbedded(with({"routed_bias=true", "routed_bias_update_rate=0.01",
                                       "decoder_block=mixtral"})),
                    Catch::Contains("routed_bias_update_rate") && Catch::Contains("deepseek"));
  CHECK_NOTHROW(LoadEmbedded(
      with({"routed_bias=true", "routed_bias_update_rate=0.01", "decoder_block=deepseek"})));
  CHECK_NOTHROW(LoadEmbedded(with({"routed_bias=true", "decoder_block=mixtral"})));

  CHECK_THROWS_WITH(
      LoadEmbedded(with({"decoder_block=gpt_oss", "sparse_matmul=false", "capacity_factor=2"})),
      Catch::Contains("capacity_factor") && Catch::Contains("gpt_oss"));
  CHECK_NOTHROW(
      LoadEmbedded(with({"decoder_block=gpt_oss", "sparse_matmul=false", "capacity_factor=-1"})));
  CHECK_NOTHROW(
      LoadEmbedded(with({"decoder_block=mixtral", "sparse_matmul=false", "capacity_factor=2"})));
}

TEST_CASE("file and override errors name the file or argument", "[config]") {
  CHECK_THROWS_WITH(
      LoadEmbedded({"model_name=no-such-model"}),
      Catch::Contains("no-such-model") && Catch::Contains("embedded models/no-such-model.yml"));
  CHECK_THROWS_WITH(Config::Load(ConfigSource{{kMainBase}, {"model_name=no-such-model"}}),
                    Catch::Contains(std::string(kMainConfigs) + "/models/no-such-model.yml"));
  CHECK_THROWS_WITH(Config::Load(ConfigSource{{"/nonexistent/base.yml"}, {}}),
                    Catch::Contains("/nonexistent/base.yml"));

  CHECK_THROWS_WITH(LoadEmbedded({"num_experts"}),
                    Catch::Contains("'num_experts'") && Catch::Contains("key=value"));
  CHECK_THROWS_WITH(LoadEmbedded({"=4"}), Catch::Contains("'=4'"));
  CHECK_THROWS_WITH(LoadEmbedded({"mlp_activations=[silu"}),
                    Catch::Contains("mlp_activations=[silu"));

  const TempDir dir;
  // yaml-cpp notices the unterminated flow sequence at the end of the file (line 4).
  const std::string bad =
      dir.Write("bad.yml", "num_experts: 4\ndtype: float32\nmesh_axes: [data, fsdp\n");
  CHECK_THROWS_WITH(Config::Load(ConfigSource{{bad}, {}}),
                    bad + ":4:1: end of sequence flow not found");

  const std::string bad_indent = dir.Write("indent.yml", "a: 1\n  b: 2\n");
  CHECK_THROWS_WITH(Config::Load(ConfigSource{{bad_indent}, {}}),
                    Catch::StartsWith(bad_indent + ":2:4: "));
  const std::string overlay = dir.Write("overlay.yml", "num_experts: 8\n");
  CHECK_THROWS_WITH(Config::Load(ConfigSource{{overlay}, {}}),
                    Catch::Contains(overlay) && Catch::Contains("not a MaxText base.yml"));
  const std::string not_map = dir.Write("list.yml", "- a\n- b\n");
  CHECK_THROWS_WITH(Config::Load(ConfigSource{{not_map}, {}}), Catch::Contains(not_map));
}

}  // namespace
TEST_CASE("An override replaces every setting of its key, the last of which MaxText would take",
          "[config]") {
  // A user who set remat_policy twice: fit's variant "remat_policy=custom" must not be undone
  // by the second setting (it was, and the variant showed the user's own policy's figures).
  const std::vector<std::string> args = {"base.yml", "remat_policy=custom",
                                         "per_device_batch_size=8", "remat_policy=full"};
  CHECK(WithOverrides(args, {"remat_policy=custom", "decoder_layer_input=offload"}) ==
        std::vector<std::string>{"base.yml", "remat_policy=custom", "per_device_batch_size=8",
                                 "decoder_layer_input=offload"});
  // A key set once keeps its place; a key's prefix is not the key.
  CHECK(WithOverrides({"a.yml", "dtype=bfloat16", "dtype_x=1"}, {"dtype=float32"}) ==
        std::vector<std::string>{"a.yml", "dtype=float32", "dtype_x=1"});
}

}  // namespace shardtrace
