#include "emit/mask_tree.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <vector>

#include "emit/tree_text.h"
#include "util/error.h"

namespace shardtrace {
namespace {

std::string Value(float v, bool weighted) {
  if (v == 0.0f) return "0";  // also folds -0
  if (!weighted) return fmt::format("{}", static_cast<int64_t>(v));
  return fmt::format("{:.4g}", v);
}

}  // namespace

std::string MaskTree(const std::string& name, const Array& mask, int64_t batch,
                     const Array* top_k_indices) {
  if (mask.rank() != 4 && mask.rank() != 5)
    Fail("mask tree of {}: expected a [B,S,E,C] or [B,N,S,E,C] mask, got shape {}", name,
         ShapeToString(mask.shape));
  if (!mask.numeric()) Fail("mask tree of {}: the mask has no values (symbolic run)", name);
  // [B,S,E,C] is one subgroup of the whole sequence.
  const bool grouped = mask.rank() == 5;
  const int64_t b_size = mask.shape[0], n_size = grouped ? mask.shape[1] : 1,
                sub = mask.shape[grouped ? 2 : 1], e_size = mask.shape[grouped ? 3 : 2],
                c_size = mask.shape[grouped ? 4 : 3], s_size = n_size * sub;
  if (batch < 0 || batch >= b_size)
    Fail("mask tree of {}: batch {} is outside [0, {})", name, batch, b_size);
  if (top_k_indices && (top_k_indices->rank() != 3 || !top_k_indices->numeric() ||
                        top_k_indices->shape[0] != b_size || top_k_indices->shape[1] != s_size))
    Fail("mask tree of {}: top_k_indices of shape {} does not match the mask's [B={},S={}]", name,
         ShapeToString(top_k_indices->shape), b_size, s_size);
  const bool weighted = IsFloating(mask.dtype);
  const std::vector<float>& v = mask.values();
  // Token s of the whole sequence (subgroup s / sub, position s % sub).
  const auto at = [&](int64_t s, int64_t e, int64_t c) {
    return v[((batch * s_size + s) * e_size + e) * c_size + c];
  };
  std::string out = grouped
                        ? fmt::format(
                              "{}[b={}] as subgroup n → E → C → S (of [B={},N={},S={},E={},C={}]; "
                              "token T = n*S+s):\n",
                              name, batch, b_size, n_size, sub, e_size, c_size)
                        : fmt::format("{}[b={}] as E → C → S (of [B={},S={},E={},C={}]):\n", name,
                                      batch, b_size, s_size, e_size, c_size);
  for (int64_t n = 0; n < n_size; ++n) {
    if (grouped)
      out +=
          fmt::format("\nSubgroup n={} (tokens T{}-T{}, with C={} slots per expert of its own):\n",
                      n, n * sub, (n + 1) * sub - 1, c_size);
    for (int64_t e = 0; e < e_size; ++e) {
      out += fmt::format("\nExpert {}:\n", e);
      for (int64_t c = 0; c < c_size; ++c) {
        std::vector<std::string> leaves, holders;
        for (int64_t s = n * sub; s < (n + 1) * sub; ++s) {
          const float x = at(s, e, c);
          leaves.push_back(fmt::format("T{}={}", s, Value(x, weighted)));
          if (x != 0.0f)
            holders.push_back(weighted ? fmt::format("T{} with weight {}", s, Value(x, true))
                                       : fmt::format("T{}", s));
        }
        const std::string meaning =
            holders.empty()
                ? "empty"
                : (weighted ? "" : "contains ") + fmt::format("{}", fmt::join(holders, ", "));
        out += TreeLine(Branch(c, c_size), UnderBranch(c, c_size),
                        fmt::format("slot {}: [{}] → {}", c, fmt::join(leaves, ", "), meaning));
      }
      if (!top_k_indices) continue;
      // Tokens that chose this expert but hold none of its slots: dropped by capacity.
      const int64_t k_size = top_k_indices->shape[2];
      std::vector<std::string> dropped;
      for (int64_t s = n * sub; s < (n + 1) * sub; ++s) {
        bool chose = false, placed = false;
        for (int64_t k = 0; k < k_size; ++k)
          chose |= top_k_indices->values()[(batch * s_size + s) * k_size + k] == e;
        for (int64_t c = 0; c < c_size; ++c) placed |= at(s, e, c) != 0.0f;
        if (chose && !placed) dropped.push_back(fmt::format("T{}", s));
      }
      if (!dropped.empty())
        out += fmt::format("    (dropped: {} chose expert {}, but its {} slots were full)\n",
                           fmt::join(dropped, ", "), e, c_size);
    }
  }
  return out;
}

std::string RoutingTree(const Array& top_k_indices, const Array& top_k_weights, int64_t batch,
                        const RoutingTreeValues& values) {
  const Array* dense_weights = values.dense_weights;
  const Array* scores = values.router_scores;
  if (top_k_indices.rank() != 3 || top_k_weights.shape != top_k_indices.shape)
    Fail(
        "routing tree: expected [B,S,K] top_k_indices and top_k_weights of one shape, got {} "
        "and {}",
        ShapeToString(top_k_indices.shape), ShapeToString(top_k_weights.shape));
  if (!top_k_indices.numeric() || !top_k_weights.numeric())
    Fail("routing tree: the top-k arrays have no values (symbolic run)");
  const int64_t b_size = top_k_indices.shape[0], s_size = top_k_indices.shape[1],
                k_size = top_k_indices.shape[2];
  if (batch < 0 || batch >= b_size)
    Fail("routing tree: batch {} is outside [0, {})", batch, b_size);
  if (dense_weights && (dense_weights->rank() != 3 || !dense_weights->numeric() ||
                        dense_weights->shape[0] != b_size || dense_weights->shape[1] != s_size))
    Fail("routing tree: expected numeric [B={},S={},E] weights, got {}", b_size, s_size,
         ShapeToString(dense_weights->shape));
  if (scores && scores->shape != top_k_indices.shape)
    Fail("routing tree: expected router_scores of the top-k shape {}, got {}",
         ShapeToString(top_k_indices.shape), ShapeToString(scores->shape));
  std::string out =
      dense_weights
          ? fmt::format(
                "weights[b={}] as Token → choice → expert (of [B={},S={},E={}], chosen by "
                "top_k_indices [B,S,K={}]):\n",
                batch, b_size, s_size, dense_weights->shape[2], k_size)
      : scores ? TreeLine("", "",
                          fmt::format("top_k_indices, top_k_weights (logits), router_scores[b={}] "
                                      "as Token → choice → expert (of [B={},S={},K={}]):",
                                      batch, b_size, s_size, k_size))
               : fmt::format(
                     "top_k_indices, top_k_weights[b={}] as Token → choice → expert (of "
                     "[B={},S={},K={}]):\n",
                     batch, b_size, s_size, k_size);
  for (int64_t s = 0; s < s_size; ++s) {
    double sum = 0;
    std::string lines;
    for (int64_t k = 0; k < k_size; ++k) {
      const int64_t at = (batch * s_size + s) * k_size + k;
      const auto expert = static_cast<int64_t>(top_k_indices.values()[at]);
      const int64_t e_size = dense_weights ? dense_weights->shape[2] : 0;
      if (dense_weights && (expert < 0 || expert >= e_size))
        Fail("routing tree: expert {} is outside the weights' [0, {})", expert, e_size);
      const float w = dense_weights
                          ? dense_weights->values()[(batch * s_size + s) * e_size + expert]
                          : top_k_weights.values()[at];
      sum += w;
      const std::string value = scores ? fmt::format("logit {}, router score {}", Value(w, true),
                                                     Value(scores->values()[at], true))
                                       : fmt::format("weight {}", Value(w, true));
      lines += fmt::format("{} k={} → expert {}, {}\n", k + 1 == k_size ? "└──" : "├──", k, expert,
                           value);
    }
    out += scores ? fmt::format("\nT{} (its input × router score; combine weight 1)\n{}", s, lines)
                  : fmt::format("\nT{} (sum of weights {:.4g})\n{}", s, sum, lines);
  }
  return out;
}

std::string GroupTree(const Array& group_scores, const Array& group_mask,
                      const Array& top_k_indices, int64_t num_experts, int64_t batch) {
  if (group_scores.rank() != 3 || group_mask.shape != group_scores.shape ||
      top_k_indices.rank() != 3 || top_k_indices.shape[0] != group_scores.shape[0] ||
      top_k_indices.shape[1] != group_scores.shape[1])
    Fail(
        "group tree: expected [B,S,G] group_scores and group_mask and [B,S,K] top_k_indices, "
        "got {}, {} and {}",
        ShapeToString(group_scores.shape), ShapeToString(group_mask.shape),
        ShapeToString(top_k_indices.shape));
  if (!group_scores.numeric() || !group_mask.numeric() || !top_k_indices.numeric())
    Fail("group tree: the routing arrays have no values (symbolic run)");
  const int64_t b_size = group_scores.shape[0], s_size = group_scores.shape[1],
                g_size = group_scores.shape[2], k_size = top_k_indices.shape[2];
  if (batch < 0 || batch >= b_size) Fail("group tree: batch {} is outside [0, {})", batch, b_size);
  if (g_size == 0 || num_experts % g_size != 0)
    Fail("group tree: {} experts do not split into {} groups", num_experts, g_size);
  const int64_t per_group = num_experts / g_size;
  std::string out = fmt::format(
      "group_scores, group_mask[b={}] as Token → routing group (of [B={},S={},G={}], {} experts "
      "per group):\n",
      batch, b_size, s_size, g_size, per_group);
  for (int64_t s = 0; s < s_size; ++s) {
    const auto kept = [&](int64_t g) {
      return group_mask.values()[(batch * s_size + s) * g_size + g] != 0.0f;
    };
    std::vector<std::string> chosen;
    bool inside = true;
    for (int64_t k = 0; k < k_size; ++k) {
      const auto e =
          static_cast<int64_t>(top_k_indices.values()[(batch * s_size + s) * k_size + k]);
      chosen.push_back(std::to_string(e));
      inside &= kept(e / per_group);
    }
    out += fmt::format("\nT{}: chose experts {} ({})\n", s, fmt::join(chosen, ", "),
                       inside ? "all in kept groups" : "NOT all in kept groups");
    for (int64_t g = 0; g < g_size; ++g)
      out += fmt::format("{} group {} (experts {}-{}): score {} → {}\n",
                         g + 1 == g_size ? "└──" : "├──", g, g * per_group, (g + 1) * per_group - 1,
                         Value(group_scores.values()[(batch * s_size + s) * g_size + g], true),
                         kept(g) ? "kept" : "dropped");
  }
  return out;
}

}  // namespace shardtrace
