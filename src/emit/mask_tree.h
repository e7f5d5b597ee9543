// The tree view of a [B, S, E, C] routing mask (dense_matmul's dispatch_mask and
// combine_mask; in inference [B, N, S, E, C], one level more per context subgroup) that the
// visualization conventions ask for: a 4-D tensor is unreadable as nested lists, so one batch row
// is fixed and the rest is shown as Expert -> slot -> tokens, the hierarchy the dispatch einsum
// (BSM,BSEC->EBCM: contracts S) consumes it in:
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

// REQUIRES mask.numeric(). Throws Error unless `mask` is rank 4 ([B,S,E,C]) or 5
// ([B,N,S,E,C]: subgroups of S/N tokens, each with its own slots) and 0 <= batch < B.
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
// What else the tree reads beside the top-k arrays.
struct RoutingTreeValues {
  // dense_matmul's dropless `weights` [B, S, E]: each choice shows the weight that tensor
  // holds at its expert, what the weight-sum really multiplies by.
  const Array* dense_weights = nullptr;
  // Llama 4's `router_scores` [B, S, K] = sigmoid(top-k logit): the top-k "weights" are raw
  // logits there, the score scales the token's input and the combine weight is 1, so each
  // choice shows both and no sum.
  const Array* router_scores = nullptr;
};

// REQUIRES both numeric, rank 3, the same shape (and the values' shapes as above). Throws
// Error otherwise. Ends with a newline.
std::string RoutingTree(const Array& top_k_indices, const Array& top_k_weights, int64_t batch = 0,
                        const RoutingTreeValues& values = {});

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

}  // namespace shardtrace
