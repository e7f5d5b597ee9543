#include "model/unmodelled_flags.h"

#include <fmt/format.h>

#include <algorithm>

#include "model/attention_step.h"
#include "model/unmodelled.h"

namespace shardtrace::model_internal {

void FlagUnmodelled(const Config& config, bool moe, FitResult* r) {
  const bool tpu = r->target.platform == "tpu";
  if (tpu && r->policy.wrapped && r->policy.offloaded.size() > 1 && r->offloaded_bytes > 0) {
    r->unmodelled.push_back(Unmodelled::kOffloadStaging);
    // Named rather than counted: the staging follows the layouts TPU's layout assignment picks
    // for the stacks, which fit does not trace. Bisected (n1_bisect_* fixtures): Mixtral's
    // dropping path with five names stages at batch 12 and length 4096 on v6e-256 (4 layers
    // too), not at batch 2 and length 2048 there, nor at batch 12 and length 4096 on v6e-8;
    // Llama 4 Maverick with the same five names on v5p-256 stages none.
    r->notes.push_back(fmt::format(
        "not modelled: the policy offloads {} names, each moved to the host a layer at a time "
        "here; TPU's compiler has staged whole stacked offloads in HBM to change their layout "
        "between the forward and the backward (Mixtral 8x7B dropping on v6e-256 with five "
        "names at batch 12: two bf16[32,12,4096,4096], 24 GiB, out of HBM where fit says it "
        "fits, testdata/maxtext-tpu/fit_differences.json): compile to be sure",
        r->policy.offloaded.size()));
  }
  if (tpu && moe && config.Bool("sparse_matmul") && !config.Bool("megablox")) {
    r->unmodelled.push_back(Unmodelled::kRaggedDotVmem);
    r->notes.emplace_back(Explanation(Unmodelled::kRaggedDotVmem));
  }
  if (tpu && moe && !config.Bool("sparse_matmul") &&
      std::any_of(r->params.begin(), r->params.end(), [&](const ParamBuffer& p) {
        return p.role == ParamRole::kMoe && WindowedGather(config, r->mesh, p);
      })) {
    r->unmodelled.push_back(Unmodelled::kDenseDispatchWindows);
    r->notes.emplace_back(Explanation(Unmodelled::kDenseDispatchWindows));
  }
}

}  // namespace shardtrace::model_internal
