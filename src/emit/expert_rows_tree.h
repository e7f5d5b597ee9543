// Trees of where sparse_matmul's sorted rows sit on each device around the experts, the
// per-device tensors the sparse pages name besides permute's own sort (SortedRowsTree) and
// the forward receive buffer (RaggedBufferTree): the ring of experts' rolled sort of the
// all-gathered tokens, local_permute's order of the received rows, decode's selection of a
// shard's own rows (local_permute with is_offset), and the return ragged_all_to_all. Each
// reads arrays a numeric run captured per device ([D, ...] stacks, MoeContext::
// CapturePerDevice; the capture names are in the trace headers: ep_routing.h, permute.h)
// and only formats them: the hierarchy is Device → expert → runs of rows, each leaf naming
// the (device, token, choice) rows it holds. As for the sparse-row trees (DeviceTreeView):
// the first devices are drawn and a closing line counts the rest, runs of local experts
// without rows fold into one line, and long leaves wrap under the tree's rules.
#pragma once

#include <cstdint>
#include <string>

#include "emit/sparse_row_tree.h"
#include "numeric/array.h"

namespace shardtrace {

// The ring of experts on every device as a tree Device → local / masked rows → rolled id →
// rows. The ring sorts the all-gathered (token, choice) rows by the rolled id
// (expert - roll_to_expert_id) mod E, so the device's own experts come first; the rows past
// sum(group_sizes) belong to other devices' experts and are masked to zero.
//
//   Device 1 (roll_to_expert_id 2: experts 2-3 local; 16 rows, 7 local):
//   ├── rows 0-6: computed here
//   │   ├── rolled 0 = expert 2: rows 0-3 ← D0.T1 k=0, D0.T2 k=1, D2.T0 k=0, D2.T3 k=1
//   │   └── rolled 1 = expert 3: rows 4-6 ← D0.T0 k=1, D2.T1 k=0, D2.T2 k=0
//   └── rows 7-15: masked to 0 (other devices' experts)
//       ├── rolled 2 = expert 0: rows 7-10 ← ...
//
// Inputs (numeric, [D, ...]): `sorted_selected_experts` and rolled `sorted_experts` [D, R]
// (R = gathered tokens x K), `roll_to_expert_id` [D], the local `group_sizes` [D, L],
// `token_sources` [D, T, 2] (for each all-gathered token: source device, its token).
// Throws Error on other shapes. Ends with a newline.
std::string RingRowsTree(const Array& sorted_selected_experts, const Array& sorted_experts,
                         const Array& roll_to_expert_id, const Array& group_sizes,
                         const Array& token_sources, int64_t num_experts, int64_t top_k,
                         const DeviceTreeView& view = {});

// local_permute after the forward ragged_all_to_all, on every device, as a tree Device →
// local expert → runs of sorted rows ← buffer rows: the received rows (row_sources, as for
// RaggedBufferTree) in local-expert order, each run from one sender, then the empty buffer
// rows (their padded id sorts them last; they are in no group). A local expert fed by more
// than 4 senders (a big mesh) lists its rows as one wrapped leaf, the D prefixes naming the
// senders.
//
//   Device 0 (expert shard 0: experts 0-1; buffer of 32 rows, 11 received):
//   ├── local expert 0 = expert 0 (group size 3)
//   │   ├── row 0 ← buffer row 0 (device 0): D0.T2 k=1
//   │   └── rows 1-2 ← buffer rows 3-4 (device 1): D1.T1 k=0, D1.T3 k=0
//   ├── local expert 1 = expert 1 (group size 8)
//   │   └── ...
//   └── rows 11-31 ← buffer rows 11-31: empty
//
// Inputs (numeric): local_permute's `sorted_indices` and `sorted_experts_ids` [D, U']
// (U' <= U: a numeric run's buffer may stop at the most rows any device received; the rows
// past it are empty and stay in order), `local_group_size` [D, L], `expert_shard_id` [D],
// the forward `row_sources` [D, U] and the senders' `sorted_selected_experts`,
// `sorted_experts` [D, R]. Throws Error on other shapes. Ends with a newline.
std::string LocalPermuteTree(const Array& sorted_indices, const Array& sorted_experts_ids,
                             const Array& local_group_size, const Array& expert_shard_id,
                             const Array& row_sources, const Array& sorted_selected_experts,
                             const Array& sorted_experts, int64_t top_k,
                             const DeviceTreeView& view = {});

// Decode's local_permute(is_offset=True) on every device (the batch is replicated, so every
// device holds the same globally sorted rows) as a tree Device → local expert → rows ←
// sorted rows, then the rows of other shards' experts, which get the out-of-range id L and
// sort last:
//
//   Device 1 (expert shard 1: experts 2-3; keeps 1 of 2 rows):
//   ├── local expert 0 = expert 2: no rows
//   ├── local expert 1 = expert 3: row 0 ← sorted row 0: T0 k=1
//   └── id 2 (not this shard's): row 1 ← sorted row 1, expert 6: T0 k=0
//
// Inputs as LocalPermuteTree, with sorted_indices [D, R] indexing the device's own sorted
// rows. Throws Error on other shapes. Ends with a newline.
std::string LocalSelectionTree(const Array& sorted_indices, const Array& sorted_experts_ids,
                               const Array& local_group_size, const Array& expert_shard_id,
                               const Array& sorted_selected_experts, const Array& sorted_experts,
                               int64_t top_k, const DeviceTreeView& view = {});

// The return ragged_all_to_all as a tree Device → runs of its sorted rows ← sender: each
// returned expert output lands in the row of the device's own permute order it was
// computed for (then unpermute), split by expert into (token, choice) rows.
//
//   Device 0 (8 rows, 8 returned):
//   ├── rows 0-2 ← device 0, its buffer rows 0-2
//   │   ├── expert 0: T2 k=1
//   │   └── expert 1: T0 k=0, T3 k=1
//
// `row_sources` [D, R] is what the exchange recorded (sender * `sender_rows` + sender's
// row, -1 for none); `sender_row_name` names a sender's row ("buffer row": the receive
// buffer order the batch-sharded path unsorts to; "local row": decode's local_permute
// order). The rows are read through the receiver's `sorted_selected_experts`
// and `sorted_experts` [D, R]. A device whose rows come back in more than 8 runs (a big
// mesh) shows each run on one line, its experts after it. Throws Error on other shapes.
// Ends with a newline.
std::string ReturnRowsTree(const Array& row_sources, int64_t sender_rows,
                           const std::string& sender_row_name, const Array& sorted_selected_experts,
                           const Array& sorted_experts, int64_t top_k,
                           const DeviceTreeView& view = {});

}  // namespace shardtrace
