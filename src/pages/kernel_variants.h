// The config-variant table of a visualization page: the PartitionSpecs of the explicitly
// placed weights under the switches a reader tunes (shard_exp_on_fsdp, use_2d_fsdp_sharding,
// expert parallelism on/off), each column from its own symbolic trace of the page's config
// with one override. `generate` and `render` share it, so a user's page has the same table
// as the documented ones.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "emit/spec_markdown.h"
#include "ir/trace.h"
#include "run/run_request.h"

namespace shardtrace {

// What the variants are variants of: the traced config and how it ran.
struct VariantBase {
  std::vector<std::string> args;  // config files and key=value overrides, as on the CLI
  int64_t devices = 1;
  std::string block = "moe";
  bool masked_loop = false;
  // The boolean switches turned on one at a time (EP on/off is added where it applies).
  std::vector<std::string> keys = {"shard_exp_on_fsdp", "use_2d_fsdp_sharding"};
  // More columns, each a label and its overrides (the dense MLP's tensor-parallel choices,
  // which the MoE switches above do not touch).
  std::vector<std::pair<std::string, std::vector<std::string>>> extra;
};

// The symbolic run every variant changes a key of: the base's config, block and path.
RunRequest VariantRequest(const VariantBase& base);

// "as traced" (from `traced`, no rerun) and one column per variant. A variant the config
// cannot take (an expert count the new mesh does not divide, ...) is a column with
// `not_traced` set to the reason, not an error: the page is about the config as given.
std::vector<VariantColumn> KernelVariants(const VariantBase& base, const Trace& traced);

}  // namespace shardtrace
