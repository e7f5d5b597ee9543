// The MoE key table (config/moe_keys.h): every MoE key of the release's base.yml, set away from
// its default through the CLI with that base.yml, changes the trace (modelled), appears in a
// note (forward-neutral) or is refused in one line naming it (not modelled); its defaults are
// the base.yml's; docs/maxtext-keys.md is the table.
#include "config/moe_keys.h"

#include <fmt/format.h>

#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "config/config.h"
#include "config/run_inputs.h"
#include "test_support.h"

namespace shardtrace {
namespace {

using testing::CommandResult;
using testing::RunShardtrace;
using testing::SourcePath;

const std::string kRelease = SourcePath("testdata/maxtext/configs/base.yml");

// The run (a small sparse config, EP=4 x fsdp=2 on 8 devices) as `command`, with
// `extra` overrides, each replacing the same key's earlier value.
CommandResult Run(const std::string& command, const std::vector<std::string>& extra,
                  const std::vector<std::string>& options = {}) {
  std::vector<std::string> args = {command,
                                   kRelease,
                                   "base_emb_dim=512",
                                   "base_mlp_dim=1024",
                                   "base_moe_mlp_dim=1024",
                                   "num_experts=8",
                                   "num_experts_per_tok=2",
                                   "ici_expert_parallelism=4",
                                   "ici_fsdp_parallelism=2",
                                   "--devices",
                                   "8"};
  args = WithOverrides(args, extra);
  args.insert(args.end(), options.begin(), options.end());
  return RunShardtrace(args);
}

std::vector<std::string> Words(std::string_view text) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start < text.size()) {
    const size_t end = std::min(text.find(' ', start), text.size());
    if (end > start) out.emplace_back(text.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

// What a modelled key can change: the trace (tensors, ops with their attributes, notes) and
// MaxText's dump of the whole model (which layers are MoE).
// A value that changes only numbers (routed_scaling_factor) shows in a numeric run of the same
// mesh at small dims.
std::string Observed(const std::vector<std::string>& extra) {
  const CommandResult trace = Run("trace", extra, {"--format", "json"});
  const CommandResult dump = Run("dump", extra);
  std::vector<std::string> small = {"base_emb_dim=16", "base_mlp_dim=32", "base_moe_mlp_dim=32",
                                    "max_target_length=4", "per_device_batch_size=1"};
  small.insert(small.end(), extra.begin(), extra.end());
  const CommandResult numeric = Run("trace", small, {"--numeric", "--quiet", "--format", "json"});
  return fmt::format("{}\n{}{}\n{}{}\n{}{}", trace.status, trace.out, trace.err, dump.out, dump.err,
                     numeric.out, numeric.err);
}

}  // namespace

TEST_CASE("The key table's defaults are the release base.yml's", "[keys]") {
  const Config release = Config::Load(ConfigSource{{kRelease}, {}});
  for (const MoeKeyEntry& e : MoeKeyTable()) {
    INFO(e.key);
    REQUIRE(release.Has(e.key));
    CHECK(release.Get(e.key).ToString() == e.default_value);
  }
}

TEST_CASE("Every MoE key set away from its default changes the trace, is noted or is refused",
          "[keys]") {
  int modelled = 0, neutral = 0, refused = 0;
  for (const MoeKeyEntry& e : MoeKeyTable()) {
    const std::string key(e.key);
    const std::vector<std::string> needs = Words(e.needs);
    std::vector<std::string> set = needs;
    set.push_back(key + "=" + std::string(e.example));
    INFO(set.back() << " with '" << e.needs << "'");
    REQUIRE(Run("trace", needs).status == 0);
    const CommandResult after = Run("trace", set);
    switch (e.status) {
      case MoeKeyStatus::kModelled:
        // A refusal counts only where it names the key (MaxText fails there too).
        if (after.status != 0)
          CHECK(after.err.find(key) != std::string::npos);
        else
          CHECK(Observed(set) != Observed(needs));
        ++modelled;
        break;
      case MoeKeyStatus::kForwardNeutral:
        CHECK(after.status == 0);
        CHECK(after.out.find("\nnote   " + key + "=") != std::string::npos);
        ++neutral;
        break;
      case MoeKeyStatus::kNotModelled:
        CHECK(after.status == 2);
        CHECK(after.out.empty());
        CHECK(after.err.rfind("shardtrace: error: " + key + "=", 0) == 0);
        CHECK(after.err.find('\n') == after.err.size() - 1);
        ++refused;
        break;
    }
  }
  CHECK(modelled > 20);
  CHECK(neutral > 40);
  CHECK(refused > 5);
}

TEST_CASE("docs/maxtext-keys.md is the key table", "[keys]") {
  testing::CompareWithGolden("../docs/maxtext-keys.md", MoeKeyTableMarkdown());
}

}  // namespace shardtrace
