#include "emit/mask_tree.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <vector>

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
  if (mask.rank() != 4)
    Fail("mask tree of {}: expected a [B,S,E,C] mask, got shape {}", name,
         ShapeToString(mask.shape));
  if (!mask.numeric()) Fail("mask tree of {}: the mask has no values (symbolic run)", name);
  const int64_t b_size = mask.shape[0], s_size = mask.shape[1], e_size = mask.shape[2],
                c_size = mask.shape[3];
  if (batch < 0 || batch >= b_size)
    Fail("mask tree of {}: batch {} is outside [0, {})", name, batch, b_size);
  if (top_k_indices && (top_k_indices->rank() != 3 || !top_k_indices->numeric() ||
                        top_k_indices->shape[0] != b_size || top_k_indices->shape[1] != s_size))
    Fail("mask tree of {}: top_k_indices of shape {} does not match the mask's [B={},S={}]", name,
         ShapeToString(top_k_indices->shape), b_size, s_size);
  const bool weighted = IsFloating(mask.dtype);
  const std::vector<float>& v = mask.values();
  const auto at = [&](int64_t s, int64_t e, int64_t c) {
    return v[((batch * s_size + s) * e_size + e) * c_size + c];
  };
  std::string out = fmt::format("{}[b={}] as E → C → S (of [B={},S={},E={},C={}]):\n", name, batch,
                                b_size, s_size, e_size, c_size);
  for (int64_t e = 0; e < e_size; ++e) {
    out += fmt::format("\nExpert {}:\n", e);
    for (int64_t c = 0; c < c_size; ++c) {
      std::vector<std::string> leaves, holders;
      for (int64_t s = 0; s < s_size; ++s) {
        const float x = at(s, e, c);
        leaves.push_back(fmt::format("T{}={}", s, Value(x, weighted)));
        if (x != 0.0f)
          holders.push_back(weighted ? fmt::format("T{} with weight {}", s, Value(x, true))
                                     : fmt::format("T{}", s));
      }
      const std::string meaning = holders.empty() ? "empty"
                                                  : (weighted ? "" : "contains ") +
                                                        fmt::format("{}", fmt::join(holders, ", "));
      out += fmt::format("{} slot {}: [{}] → {}\n", c + 1 == c_size ? "└──" : "├──", c,
                         fmt::join(leaves, ", "), meaning);
    }
    if (!top_k_indices) continue;
    // Tokens that chose this expert but hold none of its slots: dropped by capacity.
    const int64_t k_size = top_k_indices->shape[2];
    std::vector<std::string> dropped;
    for (int64_t s = 0; s < s_size; ++s) {
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
  return out;
}

std::string RoutingTree(const Array& top_k_indices, const Array& top_k_weights, int64_t batch) {
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
  std::string out = fmt::format(
      "top_k_indices, top_k_weights[b={}] as Token → choice → expert (of [B={},S={},K={}]):\n",
      batch, b_size, s_size, k_size);
  for (int64_t s = 0; s < s_size; ++s) {
    double sum = 0;
    std::string lines;
    for (int64_t k = 0; k < k_size; ++k) {
      const int64_t at = (batch * s_size + s) * k_size + k;
      const float w = top_k_weights.values()[at];
      sum += w;
      lines += fmt::format("{} k={} → expert {}, weight {}\n", k + 1 == k_size ? "└──" : "├──", k,
                           static_cast<int64_t>(top_k_indices.values()[at]), Value(w, true));
    }
    out += fmt::format("\nT{} (sum of weights {:.4g})\n{}", s, sum, lines);
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

namespace {

void CheckSortedRows(const char* what, const Array& selected, const Array& experts, int64_t top_k) {
  if (selected.rank() != 2 || experts.shape != selected.shape)
    Fail(
        "{}: expected [D,R] sorted_selected_experts and sorted_experts of one shape, got {} and {}",
        what, ShapeToString(selected.shape), ShapeToString(experts.shape));
  if (!selected.numeric() || !experts.numeric())
    Fail("{}: the sorted rows have no values (symbolic run)", what);
  if (top_k <= 0) Fail("{}: top_k {} is not positive", what, top_k);
}

std::string RowRange(int64_t first, int64_t last) {
  return first == last ? fmt::format("row {}", first) : fmt::format("rows {}-{}", first, last);
}

// "T2 k=1" for sorted row `row` of `device`: the flat (token, choice) index it came from.
std::string RowOrigin(const Array& selected, int64_t device, int64_t row, int64_t top_k,
                      const std::string& prefix) {
  const auto flat = static_cast<int64_t>(selected.values()[device * selected.shape[1] + row]);
  return fmt::format("{}T{} k={}", prefix, flat / top_k, flat % top_k);
}

}  // namespace

std::string SortedRowsTree(const Array& sorted_selected_experts, const Array& sorted_experts,
                           int64_t top_k) {
  CheckSortedRows("sorted rows tree", sorted_selected_experts, sorted_experts, top_k);
  const int64_t d_size = sorted_experts.shape[0], r_size = sorted_experts.shape[1];
  int64_t e_size = 0;
  for (const float e : sorted_experts.values()) e_size = std::max(e_size, int64_t(e) + 1);
  std::string out = fmt::format(
      "sorted_inputs per device as Device → expert → sorted rows (of [D={}] x [R={},M], K={}; "
      "T = the device's token b*S+s):\n",
      d_size, r_size, top_k);
  for (int64_t d = 0; d < d_size; ++d) {
    out += fmt::format("\nDevice {} ({} rows):\n", d, r_size);
    int64_t r = 0;
    for (int64_t e = 0; e < e_size; ++e) {
      std::vector<std::string> origins;
      const int64_t first = r;
      while (r < r_size && static_cast<int64_t>(sorted_experts.values()[d * r_size + r]) == e)
        origins.push_back(RowOrigin(sorted_selected_experts, d, r++, top_k, ""));
      const char* branch = e + 1 == e_size ? "└──" : "├──";
      if (origins.empty())
        out += fmt::format("{} expert {}: no rows\n", branch, e);
      else
        out += fmt::format("{} expert {}: {} ← {}\n", branch, e, RowRange(first, r - 1),
                           fmt::join(origins, ", "));
    }
  }
  return out;
}

std::string RaggedBufferTree(const Array& row_sources, const Array& sorted_selected_experts,
                             const Array& sorted_experts, int64_t top_k) {
  CheckSortedRows("ragged buffer tree", sorted_selected_experts, sorted_experts, top_k);
  if (row_sources.rank() != 2 || !row_sources.numeric() ||
      row_sources.shape[0] != sorted_experts.shape[0])
    Fail("ragged buffer tree: expected numeric [D={},U] row sources, got {}",
         sorted_experts.shape[0], ShapeToString(row_sources.shape));
  const int64_t d_size = row_sources.shape[0], u_size = row_sources.shape[1],
                r_size = sorted_experts.shape[1];
  const auto source = [&](int64_t d, int64_t u) {
    return static_cast<int64_t>(row_sources.values()[d * u_size + u]);
  };
  std::string out = fmt::format(
      "x per device as Device → buffer rows → sender → expert (of [D={}] x [U={},M]; Dd.Tt = "
      "device d's token t):\n",
      d_size, u_size);
  for (int64_t d = 0; d < d_size; ++d) {
    // Runs of rows from one sender's consecutive sorted rows.
    struct Run {
      int64_t first, last, sender, sender_first;
    };
    std::vector<Run> runs;
    int64_t filled = 0;
    for (int64_t u = 0; u < u_size; ++u) {
      const int64_t src = source(d, u);
      filled += src >= 0;
      const int64_t sender = src < 0 ? -1 : src / r_size, row = src < 0 ? -1 : src % r_size;
      if (!runs.empty() && runs.back().last + 1 == u && runs.back().sender == sender &&
          (sender < 0 || runs.back().sender_first + (u - runs.back().first) == row)) {
        runs.back().last = u;
      } else {
        runs.push_back({u, u, sender, row});
      }
    }
    out += fmt::format("\nDevice {} (buffer of {} rows, {} filled):\n", d, u_size, filled);
    for (size_t i = 0; i < runs.size(); ++i) {
      const Run& run = runs[i];
      const bool last_run = i + 1 == runs.size();
      const char* branch = last_run ? "└──" : "├──";
      if (run.sender < 0) {
        out += fmt::format("{} {}: empty\n", branch, RowRange(run.first, run.last));
        continue;
      }
      const int64_t from = run.sender_first, to = run.sender_first + run.last - run.first;
      out += fmt::format("{} {} ← device {}, its sorted {}\n", branch,
                         RowRange(run.first, run.last), run.sender, RowRange(from, to));
      // The run split by the sender's expert of each row.
      std::vector<std::pair<int64_t, std::vector<std::string>>> by_expert;
      for (int64_t r = from; r <= to; ++r) {
        const auto e = static_cast<int64_t>(sorted_experts.values()[run.sender * r_size + r]);
        if (by_expert.empty() || by_expert.back().first != e) by_expert.push_back({e, {}});
        by_expert.back().second.push_back(RowOrigin(sorted_selected_experts, run.sender, r, top_k,
                                                    fmt::format("D{}.", run.sender)));
      }
      for (size_t j = 0; j < by_expert.size(); ++j)
        out += fmt::format("{}   {} expert {}: {}\n", last_run ? " " : "│",
                           j + 1 == by_expert.size() ? "└──" : "├──", by_expert[j].first,
                           fmt::join(by_expert[j].second, ", "));
    }
  }
  return out;
}

}  // namespace shardtrace
