// MaxText's debug_sharding activation dump (input_shardings.json) as shardtrace predicts it:
// the entries of every block a model's decoder layers run (a dense MlpBlock when the model
// has dense layers, the MoE block, its shared experts), each block traced through Run, in
// MaxText's order and with MaxText's de-duplication of repeated entries.
#pragma once

#include <vector>

#include "ir/trace.h"
#include "run/run_request.h"

namespace shardtrace {

std::vector<DumpEntry> DumpModel(const RunRequest& request);

// The same for the given blocks only (of ModelBlocks, in its order): what a dump of those
// blocks alone holds, e.g. a lone MoE block exported without the model's dense layers.
std::vector<DumpEntry> DumpBlocks(const RunRequest& request, const std::vector<Block>& blocks);

}  // namespace shardtrace
