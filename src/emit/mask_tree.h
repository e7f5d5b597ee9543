// The tree view of a [B, S, E, C] routing mask (dense_matmul's dispatch_mask and
// combine_mask) that the visualization conventions ask for: a 4-D tensor is unreadable as
// nested lists, so one batch row is fixed and the rest is shown as Expert -> slot -> tokens,
// the hierarchy the dispatch einsum (BSM,BSEC->EBCM: contracts S) consumes it in:
//
//   Expert 1:
//   ├── slot 0: [T0=1, T1=0, T2=0, T3=0] → contains T0
//   └── slot 1: [T0=0, T1=0, T2=0, T3=0] → empty
//
// A weighted mask (combine_mask) shows the routing weights at the leaves. The values come
// from a numeric run (BlockRun::captures); the emitter only formats them.
#pragma once

#include <cstdint>
#include <string>

#include "numeric/array.h"

namespace shardtrace {

// REQUIRES mask.numeric(). Throws Error unless `mask` is rank 4 and 0 <= batch < B.
// Leaves of boolean/integer masks show 0/1; float masks show their weights (4 significant
// digits) and the annotation names the weight. With the routing choices (`top_k_indices`,
// [B, S, K], numeric), each expert also lists the tokens that chose it but hold no slot:
// the choices capacity dropped. Ends with a newline.
std::string MaskTree(const std::string& name, const Array& mask, int64_t batch = 0,
                     const Array* top_k_indices = nullptr);

// The routing of one batch row as a tree Token → choice → expert with its weight: the
// [B, S, K] top_k_indices and top_k_weights read together, which is what dense_matmul's
// dropless `weights` [B, S, E] holds (each token's K weights scattered to their experts)
// and what permute sorts by. Each token also shows the sum of its weights.
//
//   T0 (sum 1.0)
//   ├── k=0 → expert 2, weight 0.5312
//   └── k=1 → expert 0, weight 0.4688
//
// REQUIRES both numeric, rank 3, the same shape. Throws Error otherwise. Ends with a newline.
std::string RoutingTree(const Array& top_k_indices, const Array& top_k_weights, int64_t batch = 0);

// DeepSeek's group-limited routing of one batch row as a tree Token → routing group: each
// group's score (the sum of its two best expert scores), whether the token keeps it
// (`group_mask`), and the experts the token chose, each checked to lie in a kept group.
//
//   T0: chose experts 5, 12 (all in kept groups)
//   ├── group 0 (experts 0-3): score 0.9531 → dropped
//   ├── group 1 (experts 4-7): score 1.211 → kept
//   ...
//
// REQUIRES group_scores, group_mask [B,S,G] and top_k_indices [B,S,K], numeric; throws
// Error otherwise. Ends with a newline.
std::string GroupTree(const Array& group_scores, const Array& group_mask,
                      const Array& top_k_indices, int64_t num_experts, int64_t batch = 0);

// sparse_matmul's permute on every device as a tree Device → expert → sorted rows: which
// (token, choice) each row of `sorted_inputs` repeats. Inputs are the per-device stacks
// (MoeContext::CapturePerDevice) of the sort permutation `sorted_selected_experts` [D, R]
// (entry r: the flat index token * K + k the sorted row r came from) and `sorted_experts`
// [D, R] (the expert of sorted row r). Tokens are the device's own, T = b * S + s.
//
//   Device 0 (8 rows):
//   ├── expert 0: rows 0-1 ← T0 k=1, T2 k=0
//   └── expert 1: no rows
//
// REQUIRES both numeric, rank 2, one shape; throws Error otherwise. Ends with a newline.
std::string SortedRowsTree(const Array& sorted_selected_experts, const Array& sorted_experts,
                           int64_t top_k);

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
                             const Array& sorted_experts, int64_t top_k);

}  // namespace shardtrace
