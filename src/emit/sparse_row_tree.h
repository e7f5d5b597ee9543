// The tree views of sparse_matmul's per-device rows, the tensors a reader of the sparse
// pages needs most and can least read as nested lists: each device's `sorted_inputs` (its
// (token, choice) rows repeated K times and sorted by expert) and, with expert parallelism,
// the receive buffer `x` of the forward ragged_all_to_all (which sender's rows landed where).
// The values are the ones each simulated device held inside shard_map (captured by the
// numeric run); these functions only format them. On a big mesh the trees show the first
// devices and say how many they leave out; runs of experts with no rows fold into one line,
// and long row lists wrap within the code block's 100 columns.
#pragma once

#include <cstdint>
#include <string>

#include "emit/tree_text.h"
#include "numeric/array.h"

namespace shardtrace {

// sparse_matmul's permute on every device as a tree Device → expert → sorted rows: which
// (token, choice) each row of `sorted_inputs` repeats. Inputs are the per-device stacks
// (MoeContext::CapturePerDevice) of the sort permutation `sorted_selected_experts` [D, R]
// (entry r: the flat index token * K + k the sorted row r came from) and `sorted_experts`
// [D, R] (the expert of sorted row r). Tokens are the device's own, T = b * S + s.
//
//   Device 0 (8 rows):
//   ├── expert 0: rows 0-1 ← T0 k=1, T2 k=0
//   └── experts 1-3: no rows
//
// REQUIRES both numeric, rank 2, one shape; throws Error otherwise. Ends with a newline.
std::string SortedRowsTree(const Array& sorted_selected_experts, const Array& sorted_experts,
                           int64_t top_k, const DeviceTreeView& view = {});

// The receive buffers of the forward ragged_all_to_all as a tree Device → runs of buffer
// rows: the sending device and its sorted rows each run holds, split by expert into the
// (token, choice) rows, and the buffer's empty tail. `row_sources` [D, U] is what the
// exchange recorded (Tracer::RaggedAllToAll: sender * R + sender's sorted row, -1 empty);
// the sender's rows are read through its `sorted_selected_experts` and `sorted_experts`
// [D, R], as for SortedRowsTree.
//
//   Device 1 (buffer of 16 rows, 5 filled):
//   ├── rows 0-2 ← device 0, its sorted rows 2-4
//   │   ├── expert 2: D0.T1 k=0
//   │   └── expert 3: D0.T0 k=1, D0.T3 k=0
//   └── rows 5-15: empty
//
// REQUIRES numeric arrays, row_sources rank 2 with D rows, the others as SortedRowsTree;
// throws Error otherwise. Ends with a newline.
std::string RaggedBufferTree(const Array& row_sources, const Array& sorted_selected_experts,
                             const Array& sorted_experts, int64_t top_k,
                             const DeviceTreeView& view = {});

}  // namespace shardtrace
