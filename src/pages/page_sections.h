// The worked examples a visualization page shows after its flow, built from one numeric
// run's trace and captures: the routing trees (top-k choices, the dense [B,S,E] weights,
// DeepSeek's routing groups), the dense path's dispatch/combine masks, sparse_matmul's
// per-device sorted rows and ragged receive buffers, and the ragged all-to-all send
// matrices. The documented pages (`generate`) name the trees they draw; `render` draws every
// tree its run can (DrawableTrees), on configs of any size. The words around each tree live
// here once, so the two commands explain the same tensor the same way.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "emit/sparse_row_tree.h"
#include "ir/captures.h"
#include "emit/spec_markdown.h"
#include "numeric/array.h"
#include "ir/trace.h"

namespace shardtrace {

// A numeric run's global arrays by golden-format name (BlockRun::captures).

// The tree names a page may ask for, in page order, each the tensor its tree explains:
// "top_k_indices"/"top_k_weights" (Token → choice → expert), "weights" (the same read from
// dense_matmul's dropless [B,S,E] weights), "group_scores"/"group_mask" (DeepSeek routing
// groups), "dispatch_mask"/"combine_mask" (Expert → slot → tokens), "sorted_inputs" (each
// device's permuted rows: under the ring of experts its rolled sort of the gathered tokens;
// with expert parallelism also local_permute's order of the rows it computes), "x" (each
// device's ragged_all_to_all receive buffer), "intermediate_output" (where the return
// ragged_all_to_all puts each expert output).
const std::vector<std::string>& TreeNames();

// The names of TreeNames() whose captures the run holds (numeric runs only).
std::vector<std::string> DrawableTrees(const Captures& captures);

// The "## Tree: ..." sections for `trees` (names from TreeNames(), any order), batch row 0
// of the run, in page order. Throws Error naming the tensor when the run captured none.
std::vector<MarkdownExample> TreeSections(const Trace& trace, const Captures& captures,
                                          const std::vector<std::string>& trees,
                                          const DeviceTreeView& view = {});

// The ragged all-to-all send matrices (the trace's `rows sent [device, peer]` facts) as
// grids, rows = sending device, and each exchange's four parameter arrays per device (the
// "<output> <param> per device" captures): empty when the trace has no exchange. The view's
// max_devices bounds the rows and columns shown.
std::vector<MarkdownExample> SendMatrixSections(const Trace& trace, const Captures& captures,
                                                const DeviceTreeView& view = {});

}  // namespace shardtrace
