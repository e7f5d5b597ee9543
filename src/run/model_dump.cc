#include "run/model_dump.h"

#include "run/run.h"

namespace shardtrace {

std::vector<DumpEntry> DumpModel(const RunRequest& request) {
  return DumpBlocks(request, ModelBlocks(Prepare(request).setup));
}

std::vector<DumpEntry> DumpBlocks(const RunRequest& request, const std::vector<Block>& blocks) {
  std::vector<DumpEntry> entries;
  for (const Block block : blocks) {
    RunRequest block_request = request;
    block_request.block = block;
    for (DumpEntry& e : Run(block_request).trace.dump) {
      bool seen = false;
      for (const DumpEntry& x : entries)
        seen |= x.description == e.description && x.type == e.type && x.spec == e.spec;
      if (!seen) entries.push_back(std::move(e));
    }
  }
  return entries;
}

}  // namespace shardtrace
