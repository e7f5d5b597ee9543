#include "pages/kernel_variants.h"

#include <fmt/format.h>

#include <utility>

#include "paths/moe_block.h"
#include "run/run.h"
#include "util/error.h"

namespace shardtrace {
namespace {

VariantColumn Column(std::string label, const Trace& t) {
  VariantColumn col{std::move(label), t.mesh, {}, {}};
  // Rows are keyed by scope as well as name: a shared-expert MlpBlock's 2-D wi_0 is another
  // weight than the routed experts' [E, M, H] wi_0.
  for (const TensorRecord& r : t.tensors)
    if (r.kind == TensorKind::kWeight && r.constraint != Constraint::kNone && r.partition_spec)
      col.specs.push_back({fmt::format("`{}{}` ({})", InSharedExperts(r.scope) ? "shared " : "",
                                       r.name, ToString(r.constraint)),
                           r.partition_spec->ToString()});
  return col;
}

}  // namespace

RunRequest VariantRequest(const VariantBase& base) {
  RunRequest request = SymbolicRequest(base.args, base.devices, ParseBlock(base.block));
  request.masked_loop = base.masked_loop;
  request.summaries = false;  // no column prints values
  return request;
}

std::vector<VariantColumn> KernelVariants(const VariantBase& base, const Trace& traced) {
  const RunRequest request = VariantRequest(base);
  const MoeSetup setup = Prepare(request).setup;
  // shard_exp_on_fsdp and use_2d_fsdp_sharding give the sparse shard_map specs no 'exp'
  // entry, so they go with expert parallelism 1 there.
  const bool sparse_ep = setup.ep > 1 && setup.path == MoePath::kSparse && !base.masked_loop;
  std::vector<std::pair<std::string, std::vector<std::string>>> variants;
  // A variant that changes the expert axis lets fsdp take the remaining devices (-1, as in
  // MaxText's base.yml), so a config that pins ici_fsdp_parallelism still fills the mesh.
  for (const std::string& key : base.keys) {
    std::pair<std::string, std::vector<std::string>> v = {"`" + key + "=true`", {key + "=true"}};
    if (sparse_ep) {
      // Both leave the sparse shard_map's in_specs no expert entry for 'expert' to split.
      v.first += key == "shard_exp_on_fsdp" ? " (EP=1: experts on fsdp instead)" : " (EP=1)";
      v.second.insert(v.second.end(), {"ici_expert_parallelism=1", "ici_fsdp_parallelism=-1"});
    }
    variants.push_back(std::move(v));
  }
  // The ring needs expert parallelism; the others show the EP switch both ways.
  if (setup.ep > 1 && !setup.ring_of_experts)
    variants.push_back({"EP off (`ici_expert_parallelism=1`)",
                        {"ici_expert_parallelism=1", "ici_fsdp_parallelism=-1"}});
  if (setup.ep == 1 && base.block == "moe")
    variants.push_back({"EP on (`ici_expert_parallelism=2`)",
                        {"ici_expert_parallelism=2", "ici_fsdp_parallelism=-1"}});
  variants.insert(variants.end(), base.extra.begin(), base.extra.end());

  std::vector<VariantColumn> out = {Column("as traced", traced)};
  for (const auto& [label, extra] : variants) {
    // A variant is a different config: one it cannot run is reported in its column, the
    // page's own config having traced already.
    try {
      out.push_back(Column(label, Run(WithOverrides(request, extra)).trace));
    } catch (const Error& e) {
      VariantColumn col{label, "", {}, e.what()};
      out.push_back(std::move(col));
    }
  }
  return out;
}

}  // namespace shardtrace
