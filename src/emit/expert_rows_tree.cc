#include "emit/expert_rows_tree.h"

#include <fmt/format.h>

#include <algorithm>
#include <vector>

#include "emit/text_table.h"
#include "util/error.h"

namespace shardtrace {

namespace {

constexpr size_t kWidth = 120;

int64_t At(const Array& a, int64_t flat) { return static_cast<int64_t>(a.values()[flat]); }

std::string Span(int64_t first, int64_t last) {
  return first == last ? fmt::format("{}", first) : fmt::format("{}-{}", first, last);
}

std::string RowSpan(const std::string& what, int64_t first, int64_t last) {
  return fmt::format("{}{} {}", what, first == last ? "" : "s", Span(first, last));
}

const char* Branch(bool last) { return last ? "└── " : "├── "; }
const char* Under(bool last) { return last ? "    " : "│   "; }

// Appends `lead + text`, wrapped within kWidth columns; continuation lines start with `cont`
// (the tree's vertical bars, as wide as `lead`) and four more spaces.
void AddLine(std::string& out, const std::string& lead, const std::string& cont,
             const std::string& text) {
  const size_t room = kWidth - std::min(DisplayWidth(lead), kWidth - 40);
  const std::vector<std::string> lines = WrapText(text, room, 4);
  for (size_t i = 0; i < lines.size(); ++i) out += (i == 0 ? lead : cont) + lines[i] + "\n";
}

void RequireNumeric(const char* tree, const char* name, const Array& a, const Shape& shape) {
  if (!a.numeric() || a.shape != shape)
    Fail("{}: expected numeric {} {}, got {}{}", tree, name, ShapeToString(shape),
         ShapeToString(a.shape), a.numeric() ? "" : " (symbolic)");
}

void RequireTopK(const char* tree, int64_t top_k) {
  if (top_k <= 0) Fail("{}: top_k {} is not positive", tree, top_k);
}

// "T2 k=1" (with `prefix`, "D0.T2 k=1"): the (token, choice) sorted row `row` of `device`
// repeats, from the flat index token * K + k its sort permutation holds.
std::string Origin(const Array& selected, int64_t device, int64_t row, int64_t top_k,
                   const std::string& prefix) {
  const int64_t flat = At(selected, device * selected.shape[1] + row);
  return fmt::format("{}T{} k={}", prefix, flat / top_k, flat % top_k);
}

// Rows of one device whose position and source index both advance by one: a run of a
// sorted order over contiguous source rows (tag: the sender, or -1).
struct Run {
  int64_t first, last, source_first, tag;
};

void Extend(std::vector<Run>& runs, int64_t row, int64_t source, int64_t tag) {
  if (!runs.empty()) {
    Run& r = runs.back();
    if (r.last + 1 == row && r.tag == tag && r.source_first + (row - r.first) == source) {
      r.last = row;
      return;
    }
  }
  runs.push_back({row, row, source, tag});
}

}  // namespace

std::string RingRowsTree(const Array& sorted_selected_experts, const Array& sorted_experts,
                         const Array& roll_to_expert_id, const Array& group_sizes,
                         const Array& token_sources, int64_t num_experts, int64_t top_k) {
  const char* tree = "ring rows tree";
  RequireTopK(tree, top_k);
  if (sorted_selected_experts.rank() != 2)
    Fail("{}: expected [D,R] sorted_selected_experts, got {}", tree,
         ShapeToString(sorted_selected_experts.shape));
  const int64_t d_size = sorted_selected_experts.shape[0];
  const int64_t r_size = sorted_selected_experts.shape[1];
  RequireNumeric(tree, "sorted_selected_experts", sorted_selected_experts, {d_size, r_size});
  RequireNumeric(tree, "sorted_experts", sorted_experts, {d_size, r_size});
  RequireNumeric(tree, "roll_to_expert_id", roll_to_expert_id, {d_size});
  if (group_sizes.rank() != 2)
    Fail("{}: expected [D,L] group_sizes, got {}", tree, ShapeToString(group_sizes.shape));
  const int64_t l_size = group_sizes.shape[1];
  RequireNumeric(tree, "group_sizes", group_sizes, {d_size, l_size});
  if (r_size % top_k != 0)
    Fail("{}: {} sorted rows are not a whole number of tokens at K={}", tree, r_size, top_k);
  const int64_t t_size = r_size / top_k;
  RequireNumeric(tree, "token_sources", token_sources, {d_size, t_size, 2});
  if (num_experts < l_size) Fail("{}: {} experts, fewer than {} local", tree, num_experts, l_size);

  std::string out;
  AddLine(out, "", "",
          "sorted_inputs per device under the ring of experts as Device → local/masked rows → "
          "rolled id → rows");
  AddLine(out, "", "",
          fmt::format("(of [D={}] x [R={},M] all-gathered rows; K={}, E={}, L={}; rolled id = "
                      "(expert - roll_to_expert_id) mod E;",
                      d_size, r_size, top_k, num_experts, l_size));
  AddLine(out, "", "", "Dd.Tt = device d's token t):");
  for (int64_t d = 0; d < d_size; ++d) {
    const int64_t roll = At(roll_to_expert_id, d);
    const auto expert_of = [&](int64_t rolled) { return (rolled + roll) % num_experts; };
    int64_t local = 0;
    for (int64_t j = 0; j < l_size; ++j) local += At(group_sizes, d * l_size + j);
    std::vector<int64_t> gathered_from;
    for (int64_t g = 0; g < t_size; ++g) {
      const int64_t src = At(token_sources, (d * t_size + g) * 2);
      if (std::find(gathered_from.begin(), gathered_from.end(), src) == gathered_from.end())
        gathered_from.push_back(src);
    }
    out += "\n";
    AddLine(out, "", "",
            fmt::format("Device {} (roll_to_expert_id {}: experts {}-{} local; tokens of devices "
                        "{}; {} rows, {} local):",
                        d, roll, expert_of(0), expert_of(l_size - 1),
                        fmt::join(gathered_from, ", "), r_size, local));
    // The rows of each rolled id, contiguous in the sort.
    std::vector<std::pair<int64_t, int64_t>> span(static_cast<size_t>(num_experts), {-1, -2});
    for (int64_t r = 0; r < r_size; ++r) {
      const int64_t id = At(sorted_experts, d * r_size + r);
      if (id < 0 || id >= num_experts)
        Fail("{}: device {} row {} has rolled id {}, outside [0, {})", tree, d, r, id, num_experts);
      auto& [first, last] = span[static_cast<size_t>(id)];
      if (first < 0) first = r;
      last = r;
    }
    const auto rows_of = [&](int64_t id, const std::string& lead, const std::string& cont) {
      const auto [first, last] = span[static_cast<size_t>(id)];
      const std::string head = fmt::format("rolled {} = expert {}: ", id, expert_of(id));
      if (first < 0) return AddLine(out, lead, cont, head + "no rows");
      std::vector<std::string> origins;
      for (int64_t r = first; r <= last; ++r) {
        const int64_t flat = At(sorted_selected_experts, d * r_size + r);
        const int64_t g = flat / top_k;
        origins.push_back(fmt::format("D{}.T{} k={}", At(token_sources, (d * t_size + g) * 2),
                                      At(token_sources, (d * t_size + g) * 2 + 1), flat % top_k));
      }
      AddLine(
          out, lead, cont,
          fmt::format("{}{} ← {}", head, RowSpan("row", first, last), fmt::join(origins, ", ")));
    };
    std::vector<int64_t> masked;
    for (int64_t id = l_size; id < num_experts; ++id)
      if (span[static_cast<size_t>(id)].first >= 0) masked.push_back(id);
    const bool any_masked = local < r_size;
    AddLine(out, Branch(!any_masked), Under(!any_masked),
            local == 0 ? std::string("no rows computed here")
                       : fmt::format("{}: computed here (sum(group_sizes) = {})",
                                     RowSpan("row", 0, local - 1), local));
    const std::string under_local = Under(!any_masked);
    for (int64_t id = 0; id < l_size; ++id) {
      const bool last = id + 1 == l_size;
      rows_of(id, under_local + Branch(last), under_local + Under(last));
    }
    if (!any_masked) continue;
    AddLine(
        out, Branch(true), Under(true),
        fmt::format("{}: masked to 0 (other devices' experts)", RowSpan("row", local, r_size - 1)));
    for (size_t i = 0; i < masked.size(); ++i) {
      const bool last = i + 1 == masked.size();
      rows_of(masked[i], std::string(Under(true)) + Branch(last),
              std::string(Under(true)) + Under(last));
    }
  }
  return out;
}

std::string LocalPermuteTree(const Array& sorted_indices, const Array& sorted_experts_ids,
                             const Array& local_group_size, const Array& expert_shard_id,
                             const Array& row_sources, const Array& sorted_selected_experts,
                             const Array& sorted_experts, int64_t top_k) {
  const char* tree = "local_permute tree";
  RequireTopK(tree, top_k);
  if (sorted_indices.rank() != 2 || local_group_size.rank() != 2 || row_sources.rank() != 2 ||
      sorted_experts.rank() != 2)
    Fail(
        "{}: expected [D,U'] sorted_indices, [D,L] local_group_size, [D,U] row_sources and "
        "[D,R] sorted_experts, got {}, {}, {} and {}",
        tree, ShapeToString(sorted_indices.shape), ShapeToString(local_group_size.shape),
        ShapeToString(row_sources.shape), ShapeToString(sorted_experts.shape));
  const int64_t d_size = sorted_indices.shape[0], kept_rows = sorted_indices.shape[1];
  const int64_t l_size = local_group_size.shape[1], u_size = row_sources.shape[1];
  const int64_t r_size = sorted_experts.shape[1];
  RequireNumeric(tree, "sorted_indices", sorted_indices, {d_size, kept_rows});
  RequireNumeric(tree, "sorted_experts_ids", sorted_experts_ids, {d_size, kept_rows});
  RequireNumeric(tree, "local_group_size", local_group_size, {d_size, l_size});
  RequireNumeric(tree, "expert_shard_id", expert_shard_id, {d_size});
  RequireNumeric(tree, "row_sources", row_sources, {d_size, u_size});
  RequireNumeric(tree, "sorted_selected_experts", sorted_selected_experts, {d_size, r_size});
  RequireNumeric(tree, "sorted_experts", sorted_experts, {d_size, r_size});
  if (kept_rows > u_size)
    Fail("{}: local_permute sorted {} rows, more than the {}-row buffer", tree, kept_rows, u_size);

  std::string out;
  AddLine(out, "", "",
          "sorted_inputs after local_permute per device as Device → local expert → sorted rows ← "
          "buffer rows");
  AddLine(out, "", "",
          fmt::format("(of [D={}] x [U={},M]; L={}; Dd.Tt = device d's token t):", d_size, u_size,
                      l_size));
  for (int64_t d = 0; d < d_size; ++d) {
    const int64_t shard = At(expert_shard_id, d);
    int64_t received = 0;
    for (int64_t u = 0; u < u_size; ++u) received += At(row_sources, d * u_size + u) >= 0;
    out += "\n";
    AddLine(out, "", "",
            fmt::format("Device {} (expert shard {}: experts {}-{}; buffer of {} rows, {} "
                        "received):",
                        d, shard, shard * l_size, shard * l_size + l_size - 1, u_size, received));
    // Per local expert, runs of received rows from one sender; then the empty rows, the
    // rows past the captured order (the buffer's untouched tail) in place.
    std::vector<std::vector<Run>> by_expert(static_cast<size_t>(l_size));
    std::vector<Run> empty;
    for (int64_t i = 0; i < kept_rows; ++i) {
      const int64_t u = At(sorted_indices, d * kept_rows + i);
      if (u < 0 || u >= u_size) Fail("{}: device {} local row {} is buffer row {}", tree, d, i, u);
      const int64_t src = At(row_sources, d * u_size + u);
      const int64_t id = At(sorted_experts_ids, d * kept_rows + i);
      if (src < 0) {
        Extend(empty, i, u, -1);
      } else if (id < 0 || id >= l_size) {
        Fail("{}: device {} received buffer row {} has local id {}, outside [0, {})", tree, d, u,
             id, l_size);
      } else {
        Extend(by_expert[static_cast<size_t>(id)], i, u, src / r_size);
      }
    }
    for (int64_t i = kept_rows; i < u_size; ++i) Extend(empty, i, i, -1);
    for (int64_t j = 0; j < l_size; ++j) {
      const bool last = j + 1 == l_size && empty.empty();
      const std::vector<Run>& runs = by_expert[static_cast<size_t>(j)];
      const std::string head =
          fmt::format("local expert {} = expert {} (group size {})", j, shard * l_size + j,
                      At(local_group_size, d * l_size + j));
      AddLine(out, Branch(last), Under(last), runs.empty() ? head + ": no rows" : head);
      for (size_t k = 0; k < runs.size(); ++k) {
        const Run& run = runs[k];
        std::vector<std::string> origins;
        for (int64_t u = run.source_first; u <= run.source_first + run.last - run.first; ++u) {
          const int64_t src = At(row_sources, d * u_size + u);
          origins.push_back(Origin(sorted_selected_experts, src / r_size, src % r_size, top_k,
                                   fmt::format("D{}.", src / r_size)));
        }
        const bool last_run = k + 1 == runs.size();
        AddLine(
            out, std::string(Under(last)) + Branch(last_run),
            std::string(Under(last)) + Under(last_run),
            fmt::format("{} ← buffer {} (device {}): {}", RowSpan("row", run.first, run.last),
                        RowSpan("row", run.source_first, run.source_first + run.last - run.first),
                        run.tag, fmt::join(origins, ", ")));
      }
    }
    for (size_t k = 0; k < empty.size(); ++k) {
      const Run& run = empty[k];
      const bool last = k + 1 == empty.size();
      AddLine(
          out, Branch(last), Under(last),
          fmt::format("{} ← buffer {}: empty, in no group", RowSpan("row", run.first, run.last),
                      RowSpan("row", run.source_first, run.source_first + run.last - run.first)));
    }
  }
  return out;
}

std::string LocalSelectionTree(const Array& sorted_indices, const Array& sorted_experts_ids,
                               const Array& local_group_size, const Array& expert_shard_id,
                               const Array& sorted_selected_experts, const Array& sorted_experts,
                               int64_t top_k) {
  const char* tree = "local selection tree";
  RequireTopK(tree, top_k);
  if (sorted_experts.rank() != 2 || local_group_size.rank() != 2)
    Fail("{}: expected [D,R] sorted_experts and [D,L] local_group_size, got {} and {}", tree,
         ShapeToString(sorted_experts.shape), ShapeToString(local_group_size.shape));
  const int64_t d_size = sorted_experts.shape[0], r_size = sorted_experts.shape[1];
  const int64_t l_size = local_group_size.shape[1];
  RequireNumeric(tree, "sorted_indices", sorted_indices, {d_size, r_size});
  RequireNumeric(tree, "sorted_experts_ids", sorted_experts_ids, {d_size, r_size});
  RequireNumeric(tree, "local_group_size", local_group_size, {d_size, l_size});
  RequireNumeric(tree, "expert_shard_id", expert_shard_id, {d_size});
  RequireNumeric(tree, "sorted_selected_experts", sorted_selected_experts, {d_size, r_size});
  RequireNumeric(tree, "sorted_experts", sorted_experts, {d_size, r_size});

  std::string out;
  AddLine(out, "", "",
          "sorted_inputs after local_permute(is_offset=True) per device as Device → local expert → "
          "rows ← sorted rows");
  AddLine(out, "", "",
          fmt::format("(of [D={}] x [R={},M]; K={}, L={}; T = the token b*S+s, the same rows on "
                      "every device):",
                      d_size, r_size, top_k, l_size));
  for (int64_t d = 0; d < d_size; ++d) {
    const int64_t shard = At(expert_shard_id, d);
    std::vector<std::vector<Run>> by_id(static_cast<size_t>(l_size + 1));
    for (int64_t i = 0; i < r_size; ++i) {
      const int64_t u = At(sorted_indices, d * r_size + i);
      const int64_t id = At(sorted_experts_ids, d * r_size + i);
      if (u < 0 || u >= r_size || id < 0 || id > l_size)
        Fail("{}: device {} local row {} is sorted row {} with id {} (expected [0, {}] ids)", tree,
             d, i, u, id, l_size);
      Extend(by_id[static_cast<size_t>(id)], i, u, -1);
    }
    int64_t kept = 0;
    for (int64_t j = 0; j < l_size; ++j)
      for (const Run& run : by_id[static_cast<size_t>(j)]) kept += run.last - run.first + 1;
    out += "\n";
    AddLine(out, "", "",
            fmt::format("Device {} (expert shard {}: experts {}-{}; keeps {} of {} rows):", d,
                        shard, shard * l_size, shard * l_size + l_size - 1, kept, r_size));
    const auto origins = [&](const Run& run) {
      std::vector<std::string> items;
      for (int64_t u = run.source_first; u <= run.source_first + run.last - run.first; ++u)
        items.push_back(Origin(sorted_selected_experts, d, u, top_k, ""));
      return fmt::format("{}", fmt::join(items, ", "));
    };
    const auto span = [](const Run& run) {
      return fmt::format("{} ← sorted {}", RowSpan("row", run.first, run.last),
                         RowSpan("row", run.source_first, run.source_first + run.last - run.first));
    };
    const bool any_masked = !by_id[static_cast<size_t>(l_size)].empty();
    for (int64_t j = 0; j < l_size; ++j) {
      const bool last = j + 1 == l_size && !any_masked;
      const std::vector<Run>& runs = by_id[static_cast<size_t>(j)];
      const std::string head = fmt::format("local expert {} = expert {}", j, shard * l_size + j);
      if (runs.size() <= 1) {
        AddLine(out, Branch(last), Under(last),
                runs.empty() ? head + ": no rows"
                             : fmt::format("{}: {}: {}", head, span(runs[0]), origins(runs[0])));
        continue;
      }
      AddLine(out, Branch(last), Under(last), head);
      for (size_t k = 0; k < runs.size(); ++k)
        AddLine(out, std::string(Under(last)) + Branch(k + 1 == runs.size()),
                std::string(Under(last)) + Under(k + 1 == runs.size()),
                fmt::format("{}: {}", span(runs[k]), origins(runs[k])));
    }
    if (!any_masked) continue;
    // The other shards' rows, by their (global) expert.
    const std::vector<Run>& masked = by_id[static_cast<size_t>(l_size)];
    AddLine(out, Branch(true), Under(true),
            fmt::format("id {} (other shards' experts, masked out): {}", l_size,
                        fmt::join(
                            [&] {
                              std::vector<std::string> spans;
                              for (const Run& run : masked) spans.push_back(span(run));
                              return spans;
                            }(),
                            "; ")));
    std::vector<std::pair<int64_t, std::vector<std::string>>> experts;
    for (const Run& run : masked)
      for (int64_t u = run.source_first; u <= run.source_first + run.last - run.first; ++u) {
        const int64_t e = At(sorted_experts, d * r_size + u);
        if (experts.empty() || experts.back().first != e) experts.push_back({e, {}});
        experts.back().second.push_back(Origin(sorted_selected_experts, d, u, top_k, ""));
      }
    for (size_t k = 0; k < experts.size(); ++k) {
      const bool last = k + 1 == experts.size();
      AddLine(out, std::string(Under(true)) + Branch(last), std::string(Under(true)) + Under(last),
              fmt::format("expert {}: {}", experts[k].first, fmt::join(experts[k].second, ", ")));
    }
  }
  return out;
}

std::string ReturnRowsTree(const Array& row_sources, int64_t sender_rows,
                           const std::string& sender_row_name, const Array& sorted_selected_experts,
                           const Array& sorted_experts, int64_t top_k) {
  const char* tree = "return rows tree";
  RequireTopK(tree, top_k);
  if (sorted_experts.rank() != 2)
    Fail("{}: expected [D,R] sorted_experts, got {}", tree, ShapeToString(sorted_experts.shape));
  const int64_t d_size = sorted_experts.shape[0], r_size = sorted_experts.shape[1];
  RequireNumeric(tree, "row_sources", row_sources, {d_size, r_size});
  RequireNumeric(tree, "sorted_selected_experts", sorted_selected_experts, {d_size, r_size});
  RequireNumeric(tree, "sorted_experts", sorted_experts, {d_size, r_size});
  if (sender_rows <= 0) Fail("{}: senders have {} rows", tree, sender_rows);

  std::string out;
  AddLine(out, "", "",
          "intermediate_output per device after the return ragged_all_to_all as Device → its "
          "sorted rows ← sender → expert");
  AddLine(out, "", "",
          fmt::format("(of [D={}] x [R={},M]; rows in the device's own permute order, T = its "
                      "token b*S+s):",
                      d_size, r_size));
  for (int64_t d = 0; d < d_size; ++d) {
    std::vector<Run> runs;
    int64_t returned = 0;
    for (int64_t r = 0; r < r_size; ++r) {
      const int64_t src = At(row_sources, d * r_size + r);
      returned += src >= 0;
      Extend(runs, r, src < 0 ? -1 : src % sender_rows, src < 0 ? -1 : src / sender_rows);
    }
    out += "\n";
    AddLine(out, "", "", fmt::format("Device {} ({} rows, {} returned):", d, r_size, returned));
    for (size_t i = 0; i < runs.size(); ++i) {
      const Run& run = runs[i];
      const bool last = i + 1 == runs.size();
      if (run.tag < 0) {
        AddLine(out, Branch(last), Under(last),
                fmt::format("{}: nothing returned", RowSpan("row", run.first, run.last)));
        continue;
      }
      AddLine(out, Branch(last), Under(last),
              fmt::format("{} ← device {}, its {}", RowSpan("row", run.first, run.last), run.tag,
                          RowSpan(sender_row_name, run.source_first,
                                  run.source_first + run.last - run.first)));
      std::vector<std::pair<int64_t, std::vector<std::string>>> by_expert;
      for (int64_t r = run.first; r <= run.last; ++r) {
        const int64_t e = At(sorted_experts, d * r_size + r);
        if (by_expert.empty() || by_expert.back().first != e) by_expert.push_back({e, {}});
        by_expert.back().second.push_back(Origin(sorted_selected_experts, d, r, top_k, ""));
      }
      for (size_t j = 0; j < by_expert.size(); ++j) {
        const bool last_e = j + 1 == by_expert.size();
        AddLine(
            out, std::string(Under(last)) + Branch(last_e),
            std::string(Under(last)) + Under(last_e),
            fmt::format("expert {}: {}", by_expert[j].first, fmt::join(by_expert[j].second, ", ")));
      }
    }
  }
  return out;
}

}  // namespace shardtrace
