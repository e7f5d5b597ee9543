#include "pages/kernel_variants.h"

#include <fmt/format.h>

#include <utility>

#include "config/run_inputs.h"
#include "paths/moe_block.h"
#include "util/error.h"

namespace shardtrace {
namespace {

VariantColumn Column(std::string label, const Trace& t) {
  VariantColumn col{std::move(label), t.mesh, {}, {}};
  for (const TensorRecord& r : t.tensors)
    if (r.kind == TensorKind::kWeight && r.constraint != Constraint::kNone && r.partition_spec)
      col.specs.push_back(
          {fmt::format("`{}` ({})", r.name, ToString(r.constraint)), r.partition_spec->ToString()});
  return col;
}

}  // namespace

std::vector<VariantColumn> KernelVariants(const VariantBase& base, const Trace& traced) {
  const RunInputs in = LoadRunInputs(base.args, base.devices);
  const MoeSetup setup = MakeMoeSetup(in.config, in.mesh);
  // shard_exp_on_fsdp and use_2d_fsdp_sharding give the sparse shard_map specs no 'exp'
  // entry, so they go with expert parallelism 1 there.
  const bool sparse_ep = setup.ep > 1 && setup.path == MoePath::kSparse && !base.masked_loop;
  std::vector<std::pair<std::string, std::vector<std::string>>> variants;
  for (const std::string& key : base.keys) {
    std::pair<std::string, std::vector<std::string>> v = {"`" + key + "=true`", {key + "=true"}};
    if (sparse_ep) {
      v.first += " (EP=1: its specs do not shard experts)";
      v.second.push_back("ici_expert_parallelism=1");
    }
    variants.push_back(std::move(v));
  }
  // The ring needs expert parallelism; the others show the EP switch both ways.
  if (setup.ep > 1 && !setup.ring_of_experts)
    variants.push_back({"EP off (`ici_expert_parallelism=1`)", {"ici_expert_parallelism=1"}});
  if (setup.ep == 1 && base.block == "moe")
    variants.push_back({"EP on (`ici_expert_parallelism=2`)", {"ici_expert_parallelism=2"}});
  variants.insert(variants.end(), base.extra.begin(), base.extra.end());

  std::vector<VariantColumn> out = {Column("as traced", traced)};
  for (const auto& [label, extra] : variants) {
    // A variant is a different config: one it cannot run is reported in its column, the
    // page's own config having traced already.
    try {
      const RunInputs vin = LoadRunInputs(WithOverrides(base.args, extra), base.devices);
      const MoeSetup vsetup = MakeMoeSetup(vin.config, vin.mesh);
      const int n_act = static_cast<int>(vin.config.StrList("mlp_activations").size());
      RunOptions options;
      options.masked_loop = base.masked_loop;
      options.summaries = false;
      const BlockRun run =
          RunBlock(vin.config, vin.mesh, vsetup, MakeParams(vsetup, n_act, /*numeric=*/false, 0),
                   ParseBlock(base.block), options);
      out.push_back(Column(label, run.trace));
    } catch (const Error& e) {
      VariantColumn col{label, "", {}, e.what()};
      out.push_back(std::move(col));
    }
  }
  return out;
}

}  // namespace shardtrace
