#include "emit/expert_rows_tree.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <functional>
#include <vector>

#include "emit/tree_text.h"
#include "util/error.h"

namespace shardtrace {

namespace {

// A local expert fed by more senders than this shows its rows as one wrapped leaf; a device
// that gets its rows back from more than twice as many runs shows each run on one line.
constexpr int64_t kMaxRunNodes = 4;

int64_t At(const Array& a, int64_t flat) { return static_cast<int64_t>(a.values()[flat]); }

std::string Span(int64_t first, int64_t last) {
  return first == last ? fmt::format("{}", first) : fmt::format("{}-{}", first, last);
}

// "row 3" / "rows 3-5" (what: "row", "buffer row", "expert", ...).
std::string RowSpan(const std::string& what, int64_t first, int64_t last) {
  return fmt::format("{}{} {}", what, first == last ? "" : "s", Span(first, last));
}

// A node of a tree and the nodes under it, drawn with the shared tree rules.
struct Node {
  std::string text;
  std::vector<Node> children;
};

void Draw(std::string& out, const std::vector<Node>& nodes, const std::string& rule,
          const DeviceTreeView& view) {
  for (size_t i = 0; i < nodes.size(); ++i) {
    const std::string under = rule + UnderBranch(i, nodes.size());
    out += TreeLine(rule + Branch(i, nodes.size()), under, nodes[i].text, view.width);
    Draw(out, nodes[i].children, under, view);
  }
}

// "local experts 0-1 = experts 4-5: no rows": a run of a shard's local experts with no rows.
std::string IdleLocal(int64_t from, int64_t to, int64_t shard, int64_t local_experts) {
  const int64_t base = shard * local_experts;
  return from == to ? fmt::format("local expert {} = expert {}: no rows", from, base + from)
                    : fmt::format("local experts {}-{} = experts {}-{}: no rows", from, to,
                                  base + from, base + to);
}

// One device of a per-device tree: a blank line, its header (wrapped), its nodes.
void DrawDevice(std::string& out, const std::string& header, const std::vector<Node>& nodes,
                const DeviceTreeView& view) {
  // Appended in two steps: "\n" + std::string is a g++ 12 -Wrestrict false positive once inlined.
  out += '\n';
  out += TreeLine("", "", header, view.width);
  Draw(out, nodes, "", view);
}

// The tree's title lines (each wrapped within the view's width, no tree rules).
std::string Title(const std::vector<std::string>& lines, const DeviceTreeView& view) {
  std::string out;
  for (const std::string& line : lines) out += TreeLine("", "", line, view.width);
  return out;
}

// Nodes for ids first..last in order, one per id with rows (`node(id)`, nullopt-like empty
// text for none) and one per run of ids without rows (`idle(from, to)`).
std::vector<Node> FoldIdle(int64_t first, int64_t last, const std::function<Node(int64_t)>& node,
                           const std::function<std::string(int64_t, int64_t)>& idle) {
  std::vector<Node> out;
  int64_t idle_from = -1;
  for (int64_t id = first; id <= last + 1; ++id) {
    Node n = id <= last ? node(id) : Node{};
    if (id <= last && n.text.empty()) {
      if (idle_from < 0) idle_from = id;
      continue;
    }
    if (idle_from >= 0) out.push_back({idle(idle_from, id - 1), {}});
    idle_from = -1;
    if (id <= last) out.push_back(std::move(n));
  }
  return out;
}

void RequireNumeric(const char* tree, const char* name, const Array& a, const Shape& shape) {
  if (!a.numeric() || a.shape != shape)
    Fail("{}: expected numeric {} {}, got {}{}", tree, name, ShapeToString(shape),
         ShapeToString(a.shape), a.numeric() ? "" : " (symbolic)");
}

void RequireRank2(const char* tree, const char* name, const Array& a) {
  if (a.rank() != 2)
    Fail("{}: expected a [D,...] {} of rank 2, got {}", tree, name, ShapeToString(a.shape));
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
  int64_t source_last() const { return source_first + last - first; }
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
                         const Array& token_sources, int64_t num_experts, int64_t top_k,
                         const DeviceTreeView& view) {
  const char* tree = "ring rows tree";
  RequireTopK(tree, top_k);
  RequireRank2(tree, "sorted_selected_experts", sorted_selected_experts);
  RequireRank2(tree, "group_sizes", group_sizes);
  const int64_t d_size = sorted_selected_experts.shape[0];
  const int64_t r_size = sorted_selected_experts.shape[1];
  const int64_t l_size = group_sizes.shape[1];
  RequireNumeric(tree, "sorted_selected_experts", sorted_selected_experts, {d_size, r_size});
  RequireNumeric(tree, "sorted_experts", sorted_experts, {d_size, r_size});
  RequireNumeric(tree, "roll_to_expert_id", roll_to_expert_id, {d_size});
  RequireNumeric(tree, "group_sizes", group_sizes, {d_size, l_size});
  if (r_size % top_k != 0)
    Fail("{}: {} sorted rows are not a whole number of tokens at K={}", tree, r_size, top_k);
  const int64_t t_size = r_size / top_k;
  RequireNumeric(tree, "token_sources", token_sources, {d_size, t_size, 2});
  if (l_size < 1 || num_experts < l_size)
    Fail("{}: {} experts, {} of them local", tree, num_experts, l_size);

  std::string out =
      Title({"sorted_inputs per device under the ring of experts as Device → local/masked rows → "
             "rolled id → rows",
             fmt::format("(of [D={}] x [R={},M] all-gathered rows; K={}, E={}, L={}; rolled id = "
                         "(expert - roll_to_expert_id) mod E;",
                         d_size, r_size, top_k, num_experts, l_size),
             "Dd.Tt = device d's token t):"},
            view);
  const int64_t shown = ShownDevices(d_size, view);
  for (int64_t d = 0; d < shown; ++d) {
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
    const auto rows_of = [&](int64_t id) {
      const auto [first, last] = span[static_cast<size_t>(id)];
      if (first < 0) return Node{};
      std::vector<std::string> origins;
      for (int64_t r = first; r <= last; ++r) {
        const int64_t flat = At(sorted_selected_experts, d * r_size + r);
        const int64_t g = flat / top_k;
        origins.push_back(fmt::format("D{}.T{} k={}", At(token_sources, (d * t_size + g) * 2),
                                      At(token_sources, (d * t_size + g) * 2 + 1), flat % top_k));
      }
      return Node{fmt::format("rolled {} = expert {}: {} ← {}", id, expert_of(id),
                              RowSpan("row", first, last), fmt::join(origins, ", ")),
                  {}};
    };
    // (the local experts are roll .. roll+L-1: rolled ids below L never wrap)
    const auto idle = [&](int64_t from, int64_t to) {
      return from == to ? fmt::format("rolled {} = expert {}: no rows", from, expert_of(from))
                        : fmt::format("rolled {}-{} = experts {}-{}: no rows", from, to,
                                      expert_of(from), expert_of(to));
    };
    std::vector<Node> nodes;
    nodes.push_back({local == 0 ? std::string("no rows computed here")
                                : fmt::format("{}: computed here (sum(group_sizes) = {})",
                                              RowSpan("row", 0, local - 1), local),
                     FoldIdle(0, l_size - 1, rows_of, idle)});
    if (local < r_size) {
      // Other devices' experts: only the rolled ids with rows.
      std::vector<Node> masked;
      for (int64_t id = l_size; id < num_experts; ++id)
        if (Node n = rows_of(id); !n.text.empty()) masked.push_back(std::move(n));
      nodes.push_back({fmt::format("{}: masked to 0 (other devices' experts)",
                                   RowSpan("row", local, r_size - 1)),
                       std::move(masked)});
    }
    DrawDevice(out,
               fmt::format("Device {} (roll_to_expert_id {}: {} local; tokens of "
                           "devices {}; {} rows, {} local):",
                           d, roll, RowSpan("expert", expert_of(0), expert_of(l_size - 1)),
                           fmt::join(gathered_from, ", "), r_size, local),
               nodes, view);
  }
  return out + DevicesLeftOut(shown, d_size);
}

std::string LocalPermuteTree(const Array& sorted_indices, const Array& sorted_experts_ids,
                             const Array& local_group_size, const Array& expert_shard_id,
                             const Array& row_sources, const Array& sorted_selected_experts,
                             const Array& sorted_experts, int64_t top_k,
                             const DeviceTreeView& view) {
  const char* tree = "local_permute tree";
  RequireTopK(tree, top_k);
  RequireRank2(tree, "sorted_indices", sorted_indices);
  RequireRank2(tree, "local_group_size", local_group_size);
  RequireRank2(tree, "row_sources", row_sources);
  RequireRank2(tree, "sorted_experts", sorted_experts);
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

  std::string out = Title(
      {"sorted_inputs after local_permute per device as Device → local expert → sorted rows ← "
       "buffer rows",
       fmt::format("(of [D={}] x [U={},M]; L={}; Dd.Tt = device d's token t):", d_size, u_size,
                   l_size)},
      view);
  const int64_t shown = ShownDevices(d_size, view);
  for (int64_t d = 0; d < shown; ++d) {
    const int64_t shard = At(expert_shard_id, d);
    int64_t received = 0;
    for (int64_t u = 0; u < u_size; ++u) received += At(row_sources, d * u_size + u) >= 0;
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
    const auto expert_node = [&](int64_t j) {
      const std::vector<Run>& runs = by_expert[static_cast<size_t>(j)];
      if (runs.empty()) return Node{};
      Node n{fmt::format("local expert {} = expert {} (group size {})", j, shard * l_size + j,
                         At(local_group_size, d * l_size + j)),
             {}};
      const auto origins = [&](const Run& run) {
        std::vector<std::string> items;
        for (int64_t u = run.source_first; u <= run.source_last(); ++u) {
          const int64_t src = At(row_sources, d * u_size + u);
          items.push_back(Origin(sorted_selected_experts, src / r_size, src % r_size, top_k,
                                 fmt::format("D{}.", src / r_size)));
        }
        return fmt::format("{}", fmt::join(items, ", "));
      };
      if (static_cast<int64_t>(runs.size()) > kMaxRunNodes) {
        // Many senders (a big mesh): one leaf, the Dd. prefixes name each row's sender.
        std::vector<std::pair<int64_t, int64_t>> buffer;  // (senders' adjacent runs merged)
        std::vector<std::string> spans, items;
        for (const Run& run : runs) {
          if (!buffer.empty() && buffer.back().second + 1 == run.source_first)
            buffer.back().second = run.source_last();
          else
            buffer.push_back({run.source_first, run.source_last()});
          items.push_back(origins(run));
        }
        for (const auto& [first, last] : buffer) spans.push_back(Span(first, last));
        n.children.push_back(
            {fmt::format("{} ← buffer rows {} ({} senders): {}",
                         RowSpan("row", runs.front().first, runs.back().last),
                         fmt::join(spans, ", "), runs.size(), fmt::join(items, ", ")),
             {}});
        return n;
      }
      for (const Run& run : runs)
        n.children.push_back(
            {fmt::format("{} ← buffer {} (device {}): {}", RowSpan("row", run.first, run.last),
                         RowSpan("row", run.source_first, run.source_last()), run.tag,
                         origins(run)),
             {}});
      return n;
    };
    const auto idle = [&](int64_t from, int64_t to) { return IdleLocal(from, to, shard, l_size); };
    std::vector<Node> nodes = FoldIdle(0, l_size - 1, expert_node, idle);
    for (const Run& run : empty)
      nodes.push_back(
          {fmt::format("{} ← buffer {}: empty, in no group", RowSpan("row", run.first, run.last),
                       RowSpan("row", run.source_first, run.source_last())),
           {}});
    DrawDevice(out,
               fmt::format("Device {} (expert shard {}: {}; buffer of {} rows, {} "
                           "received):",
                           d, shard, RowSpan("expert", shard * l_size, shard * l_size + l_size - 1),
                           u_size, received),
               nodes, view);
  }
  return out + DevicesLeftOut(shown, d_size);
}

std::string LocalSelectionTree(const Array& sorted_indices, const Array& sorted_experts_ids,
                               const Array& local_group_size, const Array& expert_shard_id,
                               const Array& sorted_selected_experts, const Array& sorted_experts,
                               int64_t top_k, const DeviceTreeView& view) {
  const char* tree = "local selection tree";
  RequireTopK(tree, top_k);
  RequireRank2(tree, "sorted_experts", sorted_experts);
  RequireRank2(tree, "local_group_size", local_group_size);
  const int64_t d_size = sorted_experts.shape[0], r_size = sorted_experts.shape[1];
  const int64_t l_size = local_group_size.shape[1];
  RequireNumeric(tree, "sorted_indices", sorted_indices, {d_size, r_size});
  RequireNumeric(tree, "sorted_experts_ids", sorted_experts_ids, {d_size, r_size});
  RequireNumeric(tree, "local_group_size", local_group_size, {d_size, l_size});
  RequireNumeric(tree, "expert_shard_id", expert_shard_id, {d_size});
  RequireNumeric(tree, "sorted_selected_experts", sorted_selected_experts, {d_size, r_size});
  RequireNumeric(tree, "sorted_experts", sorted_experts, {d_size, r_size});

  std::string out = Title(
      {"sorted_inputs after local_permute(is_offset=True) per device as Device → local expert → "
       "rows ← sorted rows",
       fmt::format("(of [D={}] x [R={},M]; K={}, L={}; T = the token b*S+s, the same rows on "
                   "every device):",
                   d_size, r_size, top_k, l_size)},
      view);
  const int64_t shown = ShownDevices(d_size, view);
  for (int64_t d = 0; d < shown; ++d) {
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
    const auto origins = [&](const Run& run) {
      std::vector<std::string> items;
      for (int64_t u = run.source_first; u <= run.source_last(); ++u)
        items.push_back(Origin(sorted_selected_experts, d, u, top_k, ""));
      return fmt::format("{}", fmt::join(items, ", "));
    };
    const auto span = [](const Run& run) {
      return fmt::format("{} ← sorted {}", RowSpan("row", run.first, run.last),
                         RowSpan("row", run.source_first, run.source_last()));
    };
    const auto expert_node = [&](int64_t j) {
      const std::vector<Run>& runs = by_id[static_cast<size_t>(j)];
      const std::string head = fmt::format("local expert {} = expert {}", j, shard * l_size + j);
      if (runs.empty()) return Node{};
      if (runs.size() == 1)
        return Node{fmt::format("{}: {}: {}", head, span(runs[0]), origins(runs[0])), {}};
      Node n{head, {}};
      for (const Run& run : runs)
        n.children.push_back({fmt::format("{}: {}", span(run), origins(run)), {}});
      return n;
    };
    const auto idle = [&](int64_t from, int64_t to) { return IdleLocal(from, to, shard, l_size); };
    std::vector<Node> nodes = FoldIdle(0, l_size - 1, expert_node, idle);
    // The other shards' rows, by their (global) expert.
    const std::vector<Run>& masked = by_id[static_cast<size_t>(l_size)];
    if (!masked.empty()) {
      std::vector<std::string> spans;
      for (const Run& run : masked) spans.push_back(span(run));
      Node n{fmt::format("id {} (other shards' experts, masked out): {}", l_size,
                         fmt::join(spans, "; ")),
             {}};
      std::vector<std::pair<int64_t, std::vector<std::string>>> experts;
      for (const Run& run : masked)
        for (int64_t u = run.source_first; u <= run.source_last(); ++u) {
          const int64_t e = At(sorted_experts, d * r_size + u);
          if (experts.empty() || experts.back().first != e) experts.push_back({e, {}});
          experts.back().second.push_back(Origin(sorted_selected_experts, d, u, top_k, ""));
        }
      for (const auto& [e, items] : experts)
        n.children.push_back({fmt::format("expert {}: {}", e, fmt::join(items, ", ")), {}});
      nodes.push_back(std::move(n));
    }
    DrawDevice(
        out,
        fmt::format("Device {} (expert shard {}: {}; keeps {} of {} rows):", d, shard,
                    RowSpan("expert", shard * l_size, shard * l_size + l_size - 1), kept, r_size),
        nodes, view);
  }
  return out + DevicesLeftOut(shown, d_size);
}

std::string ReturnRowsTree(const Array& row_sources, int64_t sender_rows,
                           const std::string& sender_row_name, const Array& sorted_selected_experts,
                           const Array& sorted_experts, int64_t top_k, const DeviceTreeView& view) {
  const char* tree = "return rows tree";
  RequireTopK(tree, top_k);
  RequireRank2(tree, "sorted_experts", sorted_experts);
  const int64_t d_size = sorted_experts.shape[0], r_size = sorted_experts.shape[1];
  RequireNumeric(tree, "row_sources", row_sources, {d_size, r_size});
  RequireNumeric(tree, "sorted_selected_experts", sorted_selected_experts, {d_size, r_size});
  RequireNumeric(tree, "sorted_experts", sorted_experts, {d_size, r_size});
  if (sender_rows <= 0) Fail("{}: senders have {} rows", tree, sender_rows);

  std::string out =
      Title({"intermediate_output per device after the return ragged_all_to_all as Device → its "
             "sorted rows ← sender → expert",
             fmt::format("(of [D={}] x [R={},M]; rows in the device's own permute order, T = its "
                         "token b*S+s):",
                         d_size, r_size)},
            view);
  const int64_t shown = ShownDevices(d_size, view);
  for (int64_t d = 0; d < shown; ++d) {
    std::vector<Run> runs;
    int64_t returned = 0;
    for (int64_t r = 0; r < r_size; ++r) {
      const int64_t src = At(row_sources, d * r_size + r);
      returned += src >= 0;
      Extend(runs, r, src < 0 ? -1 : src % sender_rows, src < 0 ? -1 : src / sender_rows);
    }
    std::vector<Node> nodes;
    for (const Run& run : runs) {
      if (run.tag < 0) {
        nodes.push_back(
            {fmt::format("{}: nothing returned", RowSpan("row", run.first, run.last)), {}});
        continue;
      }
      Node n{fmt::format("{} ← device {}, its {}", RowSpan("row", run.first, run.last), run.tag,
                         RowSpan(sender_row_name, run.source_first, run.source_last())),
             {}};
      std::vector<std::pair<int64_t, std::vector<std::string>>> by_expert;
      for (int64_t r = run.first; r <= run.last; ++r) {
        const int64_t e = At(sorted_experts, d * r_size + r);
        if (by_expert.empty() || by_expert.back().first != e) by_expert.push_back({e, {}});
        by_expert.back().second.push_back(Origin(sorted_selected_experts, d, r, top_k, ""));
      }
      std::vector<std::string> groups;
      for (const auto& [e, items] : by_expert)
        groups.push_back(fmt::format("expert {}: {}", e, fmt::join(items, ", ")));
      if (static_cast<int64_t>(runs.size()) > 2 * kMaxRunNodes) {
        // Many senders (a big mesh): each run on one line.
        n.text += fmt::format(": {}", fmt::join(groups, "; "));
      } else {
        for (std::string& g : groups) n.children.push_back({std::move(g), {}});
      }
      nodes.push_back(std::move(n));
    }
    DrawDevice(out, fmt::format("Device {} ({} rows, {} returned):", d, r_size, returned), nodes,
               view);
  }
  return out + DevicesLeftOut(shown, d_size);
}

}  // namespace shardtrace
