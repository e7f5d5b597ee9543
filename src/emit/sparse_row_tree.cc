#include "emit/sparse_row_tree.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <vector>

#include "emit/tree_text.h"
#include "util/error.h"

namespace shardtrace {
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

std::string Range(const char* one, const char* many, int64_t first, int64_t last) {
  return first == last ? fmt::format("{} {}", one, first)
                       : fmt::format("{} {}-{}", many, first, last);
}

std::string RowRange(int64_t first, int64_t last) { return Range("row", "rows", first, last); }

// "T2 k=1" for sorted row `row` of `device`: the flat (token, choice) index it came from.
std::string RowOrigin(const Array& selected, int64_t device, int64_t row, int64_t top_k,
                      const std::string& prefix) {
  const auto flat = static_cast<int64_t>(selected.values()[device * selected.shape[1] + row]);
  return fmt::format("{}T{} k={}", prefix, flat / top_k, flat % top_k);
}

}  // namespace

std::string SortedRowsTree(const Array& sorted_selected_experts, const Array& sorted_experts,
                           int64_t top_k, const DeviceTreeView& view) {
  CheckSortedRows("sorted rows tree", sorted_selected_experts, sorted_experts, top_k);
  const int64_t d_size = sorted_experts.shape[0], r_size = sorted_experts.shape[1];
  int64_t e_size = 0;
  for (const float e : sorted_experts.values()) e_size = std::max(e_size, int64_t(e) + 1);
  std::string out = TreeLine(
      "", "",
      fmt::format("sorted_inputs per device as Device → expert → sorted rows (of [D={}] x "
                  "[R={},M], K={}; T = the device's token b*S+s):",
                  d_size, r_size, top_k),
      view.width);
  const int64_t shown = ShownDevices(d_size, view);
  const auto same_as_previous = [&](int64_t d) {
    const auto row = [&](const Array& a, int64_t dev) { return a.values().begin() + dev * r_size; };
    return d > 0 &&
           std::equal(row(sorted_experts, d), row(sorted_experts, d) + r_size,
                      row(sorted_experts, d - 1)) &&
           std::equal(row(sorted_selected_experts, d), row(sorted_selected_experts, d) + r_size,
                      row(sorted_selected_experts, d - 1));
  };
  for (int64_t d = 0; d < shown; ++d) {
    // Devices that hold the same tokens (a tensor-parallel axis) sort them the same way.
    if (same_as_previous(d)) {
      out += fmt::format("\nDevice {} ({} rows): sorted exactly as device {}\n", d, r_size, d - 1);
      continue;
    }
    out += fmt::format("\nDevice {} ({} rows):\n", d, r_size);
    // One node per expert with rows; a run of experts without rows is one node.
    std::vector<std::string> nodes;
    int64_t r = 0, idle_from = -1;
    for (int64_t e = 0; e <= e_size; ++e) {
      std::vector<std::string> origins;
      const int64_t first = r;
      while (e < e_size && r < r_size &&
             static_cast<int64_t>(sorted_experts.values()[d * r_size + r]) == e)
        origins.push_back(RowOrigin(sorted_selected_experts, d, r++, top_k, ""));
      if (origins.empty() && e < e_size) {
        if (idle_from < 0) idle_from = e;
        continue;
      }
      if (idle_from >= 0)
        nodes.push_back(Range("expert", "experts", idle_from, e - 1) + ": no rows");
      idle_from = -1;
      if (e < e_size)
        nodes.push_back(
            fmt::format("expert {}: {} ← {}", e, RowRange(first, r - 1), fmt::join(origins, ", ")));
    }
    for (size_t i = 0; i < nodes.size(); ++i)
      out += TreeLine(Branch(i, nodes.size()), UnderBranch(i, nodes.size()), nodes[i], view.width);
  }
  return out + DevicesLeftOut(shown, d_size);
}

std::string RaggedBufferTree(const Array& row_sources, const Array& sorted_selected_experts,
                             const Array& sorted_experts, int64_t top_k,
                             const DeviceTreeView& view) {
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
  std::string out = TreeLine("", "",
                             fmt::format("x per device as Device → buffer rows → sender → expert "
                                         "(of [D={}] x [U={},M]; Dd.Tt = device d's token t):",
                                         d_size, u_size),
                             view.width);
  const int64_t shown = ShownDevices(d_size, view);
  for (int64_t d = 0; d < shown; ++d) {
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
      const char* branch = Branch(i, runs.size());
      const std::string under = UnderBranch(i, runs.size());
      if (run.sender < 0) {
        out += TreeLine(branch, under, RowRange(run.first, run.last) + ": empty", view.width);
        continue;
      }
      const int64_t from = run.sender_first, to = run.sender_first + run.last - run.first;
      out += TreeLine(branch, under,
                      fmt::format("{} ← device {}, its sorted {}", RowRange(run.first, run.last),
                                  run.sender, RowRange(from, to)),
                      view.width);
      // The run split by the sender's expert of each row.
      std::vector<std::pair<int64_t, std::vector<std::string>>> by_expert;
      for (int64_t r = from; r <= to; ++r) {
        const auto e = static_cast<int64_t>(sorted_experts.values()[run.sender * r_size + r]);
        if (by_expert.empty() || by_expert.back().first != e) by_expert.push_back({e, {}});
        by_expert.back().second.push_back(RowOrigin(sorted_selected_experts, run.sender, r, top_k,
                                                    fmt::format("D{}.", run.sender)));
      }
      for (size_t j = 0; j < by_expert.size(); ++j)
        out += TreeLine(
            under + Branch(j, by_expert.size()), under + UnderBranch(j, by_expert.size()),
            fmt::format("expert {}: {}", by_expert[j].first, fmt::join(by_expert[j].second, ", ")),
            view.width);
    }
  }
  return out + DevicesLeftOut(shown, d_size);
}

}  // namespace shardtrace
