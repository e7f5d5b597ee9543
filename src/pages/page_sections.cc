#include "pages/page_sections.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <optional>

#include "config/moe_lines.h"
#include "emit/expert_rows_tree.h"
#include "emit/mask_tree.h"
#include "emit/text_table.h"
#include "ir/fact_text.h"
#include "util/error.h"

namespace shardtrace {
namespace {

using S = MoeStatement;

bool Wants(const std::vector<std::string>& trees, const char* name) {
  return std::find(trees.begin(), trees.end(), name) != trees.end();
}

const Array& Captured(const Captures& captures, Capture id) {
  const Array* found = captures.Find(id);
  if (!found)
    Fail("visualization: the page draws a tree of {}, but its run captured none", CaptureName(id));
  return *found;
}

MarkdownExample RoutingSection(const Captures& captures, bool as_weights, RevisionId rev) {
  const Array& indices = Captured(captures, Capture::kTopKIndices);
  const Array& weights = Captured(captures, Capture::kTopKWeights);
  if (as_weights)
    return {"Tree: top_k_indices, top_k_weights = the weights [B,S,E]",
            "Batch row 0 of this run as a tree Token → choice → expert, each weight read from "
            "the `weights` [B,S,E] that `reshape_and_update_weights` scatters the top-k "
            "weights into: each token's K weights at its chosen experts, 0 elsewhere, the "
            "factors the expert outputs are summed with.",
            RoutingTree(indices, weights, 0,
                        {.dense_weights = &Captured(captures, Capture::kWeights)})};
  const std::string heading = "Tree: top_k_indices, top_k_weights";
  const std::string lead =
      "Batch row 0 of this run as a tree Token → choice → expert, the top-k indices and "
      "weights read together. ";
  // What reads these choices differs by path; the captures say which path ran.
  if (const Array* scores = captures.Find(Capture::kRouterScores))
    return {heading,
            lead +
                "Llama 4 keeps the raw top-1 logit as the \"weight\": each token's input is "
                "multiplied by its router score `sigmoid(logit)` before the experts run " +
                fmt::format("({} sparse, {} dense)", MoeRef(rev, {S::kLlama4InputScaleSparse}),
                            MoeLines(rev, S::kLlama4InputScaleDense)) +
                ", and the expert outputs are combined with weight 1.",
            RoutingTree(indices, weights, 0, {.router_scores = scores})};
  std::string use;
  if (captures.Has(Capture::kSortedExpertsPerDevice))
    use =
        "`permute` sorts the (token, choice) rows by these experts; `unpermute` sums the "
        "expert outputs with these weights.";
  else if (captures.Has(Capture::kDispatchMaskSubgroups))
    use = fmt::format(
        "In inference the masks do not use these weights: `generate_masks_subgroup` "
        "takes the softmax over all experts ({}), so the combine_mask weights below "
        "are those probabilities, not these top-k weights; only the experts chosen "
        "here come from top-k.",
        MoeRef(rev, {S::kInferenceSubgroupMasks}));
  else if (captures.Has(Capture::kDispatchMask))
    use = fmt::format(
        "`reshape_and_update_weights` scatters them into `weights` [B,S,E], which "
        "`generate_masks` takes as its `softmax_probs` ({}): each choice gets a slot "
        "of its expert in token order, and its weight becomes that slot's "
        "combine_mask entry.",
        MoeRef(rev, {S::kGenerateMasksCall}));
  else
    use =
        "`reshape_and_update_weights` scatters them into `weights` [B,S,E] for the "
        "weighted sum of the expert outputs.";
  if (captures.Has(Capture::kPreBiasLogits))
    use += fmt::format(
        " With a routing bias (DeepSeek) the experts are chosen by the biased "
        "scores, but each weight is the unbiased score at its expert ({}), "
        "normalized when `routed_score_func` is sigmoid and scaled by "
        "`routed_scaling_factor` ({}): the weights need not decrease with k.",
        MoeRef(rev, {S::kUnbiasedWeights}), MoeLines(rev, S::kDeepseekScaleWeights));
  return {heading, lead + use, RoutingTree(indices, weights, 0)};
}

MarkdownExample GroupSection(const Captures& captures) {
  return {
      "Tree: group_scores, group_mask",
      "DeepSeek's group-limited routing on batch row 0: `expert_group_mask` scores each "
      "routing group by the sum of its two best (biased) expert scores and keeps the "
      "best `topk_routing_group`; experts outside kept groups are masked to -inf before "
      "top-k, so every chosen expert lies in a kept group.",
      GroupTree(Captured(captures, Capture::kGroupScores), Captured(captures, Capture::kGroupMask),
                Captured(captures, Capture::kTopKIndices),
                Captured(captures, Capture::kGateLogits).shape[2], 0)};
}

std::vector<MarkdownExample> MaskSections(const Trace& trace, const Captures& captures) {
  const RevisionId rev = trace.revision;
  std::string facts;
  for (const FactKind kind : {FactKind::kExpertCapacity, FactKind::kTokensDroppedPerExpert})
    if (const Fact* f = trace.FindFact(kind)) {
      const std::string note = FactNote(*f);
      facts += fmt::format(" `{} = {}`{}.", FactName(*f), FactValuesText(*f),
                           note.empty() ? "" : " (" + note + ")");
    }
  const Array& indices = Captured(captures, Capture::kTopKIndices);
  // Inference holds the masks per context subgroup, [B,N,S,E,C] (generate_masks_subgroup).
  const bool grouped = captures.Has(Capture::kDispatchMaskSubgroups);
  if (grouped)
    return {
        {"Tree: dispatch_mask",
         "Batch row 0 of this run, as a tree subgroup → Expert → slot → tokens: " +
             fmt::format("`generate_masks_subgroup` splits each sequence into N context subgroups "
                         "and gives every expert `C` slots in each ({}); the dispatch einsum "
                         "`BNSM,BNSEC->EBNCM` ({}) contracts the tokens `S` of a subgroup, so "
                         "they are the leaves. A choice that finds its expert's slots in its "
                         "subgroup full is dropped.",
                         MoeRef(rev, {S::kGenerateMasksSubgroup}),
                         MoeRef(rev, {S::kDispatchEinsumSubgroup})) +
             facts,
         MaskTree("dispatch_mask", Captured(captures, Capture::kDispatchMaskSubgroups), 0,
                  &indices)},
        {"Tree: combine_mask",
         fmt::format("The same slots with the weights the combine einsum "
                     "`EBNCM,BNSEC->BNSM` ({}) applies: in inference they are the softmax "
                     "probabilities over all experts ({}), not the top-k weights of the "
                     "routing tree, so a token's weights need not sum to 1.",
                     MoeRef(rev, {S::kCombineScope}), MoeRef(rev, {S::kInferenceSubgroupMasks})),
         MaskTree("combine_mask", Captured(captures, Capture::kCombineMaskSubgroups), 0,
                  &indices)}};
  return {{"Tree: dispatch_mask",
           "Batch row 0 of this run, as a tree Expert → slot → tokens: the dispatch einsum "
           "`BSM,BSEC->EBCM` contracts the tokens `S`, so they are the leaves; a slot holds at "
           "most one token, and a choice that finds its expert's `C` slots full is dropped (it "
           "appears in no slot)." +
               facts,
           MaskTree("dispatch_mask", Captured(captures, Capture::kDispatchMask), 0, &indices)},
          {"Tree: combine_mask",
           "The same slots with the routing weights the combine einsum `EBCM,BSEC->BSM` "
           "applies when it scatters expert outputs back to their tokens; a token whose choice "
           "was dropped gets fewer than K weighted outputs.",
           MaskTree("combine_mask", Captured(captures, Capture::kCombineMask), 0, &indices)}};
}

// sparse_matmul's sorted rows on every device (under the ring of experts, the rolled sort of
// the gathered tokens) and, with expert parallelism, the receive buffer of the forward
// ragged_all_to_all and local_permute's order: the per-device values the run captured.
std::vector<MarkdownExample> SortedRowSections(const Captures& captures, bool sorted_inputs,
                                               bool ragged_buffer, const DeviceTreeView& view) {
  const int64_t k = Captured(captures, Capture::kTopKIndices).shape[2];
  std::vector<MarkdownExample> out;
  if (captures.Has(Capture::kRingSortedExpertsPerDevice)) {
    out.push_back(
        {"Tree: sorted_inputs (ring of experts, per device)",
         "What `permute` did on each device under the ring of experts: it routed every token "
         "all-gathered over its expert-parallel group, and subtracted `roll_to_expert_id = "
         "num_experts_per_shard * expert_shard_id` from each expert id (mod E) before the sort, "
         "so the device's own experts come first as rolled ids 0..L-1. `group_sizes[:L]` counts "
         "those rows; the rows past their sum (other devices' experts) are set to 0 before and "
         "after the gmms, so each (token, choice) is computed on exactly one device of the group "
         "and `psum_scatter` adds the partial outputs.",
         RingRowsTree(Captured(captures, Capture::kRingSortedSelectedExpertsPerDevice),
                      Captured(captures, Capture::kRingSortedExpertsPerDevice),
                      Captured(captures, Capture::kRingRollToExpertIdPerDevice),
                      Captured(captures, Capture::kRingGroupSizesPerDevice),
                      Captured(captures, Capture::kRingTokenSourcesPerDevice),
                      Captured(captures, Capture::kGateLogits).shape[2], k, view)});
    return out;
  }
  const Array& selected = Captured(captures, Capture::kSortedSelectedExpertsPerDevice);
  const Array& experts = Captured(captures, Capture::kSortedExpertsPerDevice);
  out.push_back(
      {"Tree: sorted_inputs (per device)",
       "What `permute` did on each device of this run: its (token, choice) rows repeated K "
       "times and stable-sorted by expert, so each expert's rows are contiguous and the "
       "`group_size` of an expert is the length of its run. `unpermute` undoes this order.",
       SortedRowsTree(selected, experts, k, view)});
  if (ragged_buffer)
    out.push_back(
        {"Tree: x (the ragged_all_to_all receive buffer, per device)",
         "Where those sorted rows went: each device's receive buffer after the forward "
         "`ragged_all_to_all`, as runs of rows from one sender (the rows the sender's "
         "`input_offsets`/`send_sizes` picked, placed at its `output_offsets`), split by "
         "expert, and the empty rest of the buffer. `local_permute` then sorts the filled rows "
         "by local expert.",
         RaggedBufferTree(Captured(captures, Capture::kXRowSourcesPerDevice), selected, experts, k,
                          view)});
  if (!sorted_inputs || !captures.Has(Capture::kLocalPermuteSortedIndicesPerDevice)) return out;
  const Array& order = Captured(captures, Capture::kLocalPermuteSortedIndicesPerDevice);
  const Array& ids = Captured(captures, Capture::kLocalPermuteSortedExpertsIdsPerDevice);
  const Array& sizes = Captured(captures, Capture::kLocalGroupSizePerDevice);
  const Array& shard = Captured(captures, Capture::kExpertShardIdPerDevice);
  if (captures.Has(Capture::kXRowSourcesPerDevice))
    out.push_back(
        {"Tree: sorted_inputs after local_permute (per device)",
         "How `local_permute` orders each device's receive buffer for its gmms: "
         "`expert_indices` repeats each (sender, local expert) id by its count in the "
         "all-gathered group sizes, and a stable argsort groups the received rows by local "
         "expert, each expert's rows in sender order; `local_group_size` gives the gmm groups. "
         "The empty buffer rows sort last, past every group.",
         LocalPermuteTree(order, ids, sizes, shard,
                          Captured(captures, Capture::kXRowSourcesPerDevice), selected, experts, k,
                          view)});
  else
    out.push_back(
        {"Tree: sorted_inputs after local_permute(is_offset=True) (per device)",
         "The batch is not sharded by the expert axes, so every device routed and sorted the "
         "same rows (the tree above). `local_permute(is_offset=True)` gives each sorted row of "
         "this shard's experts its local id (`global_sorted_experts // L == shard_index`: id "
         "`expert % L`) and every other row the out-of-range id L, so a stable argsort puts the "
         "shard's rows first, in order; `local_group_size` (the gmm groups) covers exactly "
         "them, and the rows with id L are computed by other shards.",
         LocalSelectionTree(order, ids, sizes, shard, selected, experts, k, view)});
  return out;
}

// Where the expert outputs land after the return ragged_all_to_all.
MarkdownExample ReturnSection(const Captures& captures, const DeviceTreeView& view) {
  const int64_t k = Captured(captures, Capture::kTopKIndices).shape[2];
  const Array& sources = Captured(captures, Capture::kIntermediateOutputRowSourcesPerDevice);
  const Array& selected = Captured(captures, Capture::kSortedSelectedExpertsPerDevice);
  const Array& experts = Captured(captures, Capture::kSortedExpertsPerDevice);
  const int64_t sender_rows =
      Captured(captures, Capture::kLocalPermuteSortedIndicesPerDevice).shape[1];
  if (captures.Has(Capture::kXRowSourcesPerDevice))
    return {"Tree: intermediate_output (the return ragged_all_to_all, per device)",
            "Where the expert outputs go: each device unsorts its outputs back to its buffer "
            "order (`argsort(local_sorted_indices)`), and the second `ragged_all_to_all`, with "
            "the parameters of the transposed `all_shards_group_sizes`, sends every run back to "
            "the device that routed it, into the rows of that device's own `permute` order: "
            "the inverse of the receive buffer tree. `unpermute` then restores token order and "
            "sums the K choices with their weights.",
            ReturnRowsTree(sources, sender_rows, "buffer row", selected, experts, k, view)};
  return {"Tree: intermediate_output (the return ragged_all_to_all, per device)",
          "How the outputs come back in decode: each shard sends its first `local_group_size` "
          "rows (its experts' outputs, in sorted order) to every device, at the offset where its "
          "experts' rows start in the global sort, so every device rebuilds all sorted rows, each "
          "from the shard holding its expert, before `unpermute`.",
          ReturnRowsTree(sources, sender_rows, "local row", selected, experts, k, view)};
}

}  // namespace

const std::vector<std::string>& TreeNames() {
  static const std::vector<std::string> names = {
      "top_k_indices",      "top_k_weights", "weights",
      "group_scores",       "group_mask",    "dispatch_mask",
      "combine_mask",       "sorted_inputs", "x",
      "intermediate_output"};
  return names;
}

std::vector<std::string> DrawableTrees(const Captures& captures) {
  // The capture each tree needs beyond the top-k choices every MoE run has.
  const std::vector<std::pair<std::string, Capture>> needs = {
      {"top_k_indices", Capture::kTopKIndices},
      {"top_k_weights", Capture::kTopKWeights},
      {"weights", Capture::kWeights},
      {"group_scores", Capture::kGroupScores},
      {"group_mask", Capture::kGroupMask},
      {"dispatch_mask", Capture::kDispatchMask},
      {"combine_mask", Capture::kCombineMask},
      {"sorted_inputs", Capture::kSortedExpertsPerDevice},
      {"sorted_inputs", Capture::kRingSortedExpertsPerDevice},
      {"x", Capture::kXRowSourcesPerDevice},
      {"intermediate_output", Capture::kIntermediateOutputRowSourcesPerDevice}};
  std::vector<std::string> out;
  if (!captures.Has(Capture::kTopKIndices) || !captures.Has(Capture::kTopKWeights)) return out;
  for (const auto& [tree, capture] : needs)
    if (captures.Has(capture) && std::find(out.begin(), out.end(), tree) == out.end())
      out.push_back(tree);
  return out;
}

std::vector<MarkdownExample> TreeSections(const Trace& trace, const Captures& captures,
                                          const std::vector<std::string>& trees,
                                          const DeviceTreeView& view) {
  for (const std::string& name : trees)
    if (!Wants(TreeNames(), name.c_str()))
      Fail("visualization: no tree view of '{}' (known: {})", name,
           fmt::format("{}", fmt::join(TreeNames(), ", ")));
  std::vector<MarkdownExample> out;
  if (Wants(trees, "top_k_indices") || Wants(trees, "top_k_weights") || Wants(trees, "weights"))
    out.push_back(RoutingSection(captures, Wants(trees, "weights"), trace.revision));
  if (Wants(trees, "group_scores") || Wants(trees, "group_mask"))
    out.push_back(GroupSection(captures));
  if (Wants(trees, "dispatch_mask") || Wants(trees, "combine_mask"))
    for (MarkdownExample& e : MaskSections(trace, captures)) out.push_back(std::move(e));
  if (Wants(trees, "sorted_inputs") || Wants(trees, "x"))
    for (MarkdownExample& e :
         SortedRowSections(captures, Wants(trees, "sorted_inputs"), Wants(trees, "x"), view))
      out.push_back(std::move(e));
  if (Wants(trees, "intermediate_output")) out.push_back(ReturnSection(captures, view));
  return out;
}

namespace {

// "[0, 3, 5, 7]" for device d's row of a [D, P] capture, the first `peers` entries.
std::string PeerList(const Array& a, int64_t d, int64_t peers) {
  std::vector<std::string> items;
  for (int64_t p = 0; p < std::min(peers, a.shape[1]); ++p)
    items.push_back(FactValueText(a.values()[d * a.shape[1] + p]));
  return fmt::format("[{}{}]", fmt::join(items, ", "), peers < a.shape[1] ? ", ..." : "");
}

// Each exchange's input_offsets / send_sizes / output_offsets / recv_sizes per device.
std::optional<MarkdownExample> ParamSection(const Captures& captures, const DeviceTreeView& view,
                                            RevisionId rev) {
  static const char* const kParams[] = {"input_offsets", "send_sizes", "output_offsets",
                                        "recv_sizes"};
  std::string text;
  for (const Exchange exchange : {Exchange::kDispatch, Exchange::kReturn}) {
    const std::string_view output = ExchangeOperand(exchange);
    std::vector<const Array*> arrays;
    for (const Capture id : AllToAllParamCaptures(exchange)) {
      const Array* found = captures.Find(id);
      if (found && found->rank() == 2) arrays.push_back(found);
    }
    if (arrays.size() != 4) continue;
    const int64_t devices = arrays[0]->shape[0];
    const int64_t shown = ShownDevices(devices, view);
    // As many peers per list as keep the table within the view's width.
    std::string rendered;
    for (int64_t peers = std::min(arrays[0]->shape[1], view.max_devices); peers >= 1; --peers) {
      TextTable table({"device", kParams[0], kParams[1], kParams[2], kParams[3]});
      for (int64_t d = 0; d < shown; ++d)
        table.AddRow({std::to_string(d), PeerList(*arrays[0], d, peers),
                      PeerList(*arrays[1], d, peers), PeerList(*arrays[2], d, peers),
                      PeerList(*arrays[3], d, peers)});
      rendered = table.Render("  ");
      size_t widest = 0;
      for (size_t start = 0; start < rendered.size();) {
        const size_t end = std::min(rendered.find('\n', start), rendered.size());
        widest = std::max(widest, DisplayWidth(rendered.substr(start, end - start)));
        start = end + 1;
      }
      if (widest <= view.width) break;
    }
    text += fmt::format("{}{}: ragged_all_to_all parameters [device] x [peer]\n{}",
                        text.empty() ? "" : "\n", output, rendered);
    if (shown < devices) text += fmt::format("  (devices {}-{} not shown)\n", shown, devices - 1);
  }
  if (text.empty()) return std::nullopt;
  return MarkdownExample{
      "Ragged all-to-all parameters",
      "What `get_all_to_all_params` computed on each device for each exchange, one entry per "
      "expert-parallel peer (" +
          MoeRef(rev, {S::kGetAllToAllParams}) +
          "): device d sends rows "
          "`input_offsets[p] : input_offsets[p] + send_sizes[p]` of its operand to peer p, which "
          "writes them at its buffer row `output_offsets[p]`; `recv_sizes[p]` is how many rows d "
          "receives from p. Each device's `output_offsets[p]` is where its rows land in peer p's "
          "buffer, so peer p's receive buffer tree above shows the same runs.",
      text};
}

}  // namespace

std::vector<MarkdownExample> SendMatrixSections(const Trace& trace, const Captures& captures,
                                                const DeviceTreeView& view) {
  std::string text;
  for (const Fact& f : trace.facts) {
    if (f.kind != FactKind::kRowsSent || f.shape.size() != 2) continue;
    const int64_t senders = f.shape[0], peers = f.shape[1];
    const int64_t shown_peers = std::min(peers, view.max_devices),
                  shown_senders = std::min(senders, view.max_devices);
    std::vector<std::string> header = {"device"};
    for (int64_t p = 0; p < shown_peers; ++p) header.push_back(fmt::format("to {}", p));
    if (shown_peers < peers) header.push_back(fmt::format("to {}-{}", shown_peers, peers - 1));
    header.push_back("total");
    TextTable table(header);
    for (int64_t d = 0; d < shown_senders; ++d) {
      std::vector<std::string> row = {std::to_string(d)};
      double total = 0, rest = 0;
      for (int64_t p = 0; p < peers; ++p) {
        const double v = f.values[d * peers + p];
        total += v;
        if (p < shown_peers)
          row.push_back(FactValueText(v));
        else
          rest += v;
      }
      if (shown_peers < peers) row.push_back(FactValueText(rest));
      row.push_back(FactValueText(total));
      table.AddRow(row);
    }
    text += fmt::format("{}{}\n{}", text.empty() ? "" : "\n", FactName(f), table.Render("  "));
    if (shown_senders < senders)
      text += fmt::format("  (devices {}-{} not shown)\n", shown_senders, senders - 1);
  }
  if (text.empty()) return {};
  std::vector<MarkdownExample> out;
  // With the batch replicated over `expert` (decode) no rows go ahead of the experts: the
  // only exchange is the return one.
  if (!trace.FindFact(FactKind::kRowsSent, "x"))
    out.push_back(
        {"Ragged all-to-all send sizes",
         "Rows each device sends to each expert-parallel peer in the one `ragged_all_to_all` "
         "of this path, after its local experts ran (`intermediate_output`). With the batch "
         "not sharded by expert every device holds every token, so `get_all_to_all_params` "
         "repeats a device's own row count for every peer (" +
             MoeRef(trace.revision, {S::kSendSizeStrategy}) +
             "): each row of the "
             "matrix is constant, a broadcast of that device's expert outputs, which every peer "
             "places at the device's offset.",
         text});
  else
    out.push_back({"Ragged all-to-all send sizes",
                   "Rows each device sends to each expert-parallel peer in the forward "
                   "all-to-all (`x`, the routed token rows) and back (`intermediate_output`, the "
                   "expert outputs): the second matrix is the transpose of the first.",
                   text});
  if (std::optional<MarkdownExample> params = ParamSection(captures, view, trace.revision))
    out.push_back(std::move(*params));
  return out;
}

}  // namespace shardtrace
