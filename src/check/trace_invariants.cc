#include "check/trace_invariants.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <numeric>
#include <optional>
#include <set>
#include <string_view>

#include "ir/fact_text.h"

namespace shardtrace {

std::string ToString(InvariantKind kind) {
  switch (kind) {
    case InvariantKind::kOutputShape:
      return "output_shape";
    case InvariantKind::kPlacedBytes:
      return "placed_bytes";
    case InvariantKind::kTokensRouted:
      return "tokens_routed";
    case InvariantKind::kDistinctChoices:
      return "distinct_choices";
    case InvariantKind::kNonNegativeWeights:
      return "non_negative_weights";
    case InvariantKind::kChoicesInKeptGroups:
      return "choices_in_kept_groups";
    case InvariantKind::kDispatchIsCombineNonzero:
      return "dispatch_is_combine_nonzero";
    case InvariantKind::kCapacityIsMaskDim:
      return "capacity_is_mask_dim";
    case InvariantKind::kKeptIsRoutedMinusDropped:
      return "kept_is_routed_minus_dropped";
    case InvariantKind::kOneTokenPerSlot:
      return "one_token_per_slot";
    case InvariantKind::kSlotsInArrivalOrder:
      return "slots_in_arrival_order";
    case InvariantKind::kCombineHoldsTopKWeights:
      return "combine_holds_top_k_weights";
    case InvariantKind::kChunksRouteAlike:
      return "chunks_route_alike";
    case InvariantKind::kSentEqualsBufferFill:
      return "sent_equals_buffer_fill";
    case InvariantKind::kBufferFillIsReceived:
      return "buffer_fill_is_received";
    case InvariantKind::kBufferFillWithinRows:
      return "buffer_fill_within_rows";
    case InvariantKind::kGroupSizesSumToFill:
      return "group_sizes_sum_to_fill";
    case InvariantKind::kSentBackEqualsSent:
      return "sent_back_equals_sent";
    case InvariantKind::kSentBackIsFill:
      return "sent_back_is_fill";
    case InvariantKind::kSentBackIsTranspose:
      return "sent_back_is_transpose";
    case InvariantKind::kMlpHiddenConstrained:
      return "mlp_hidden_constrained";
    case InvariantKind::kMlpContractionAllReduce:
      return "mlp_contraction_all_reduce";
    case InvariantKind::kDroplessWeightSum:
      return "dropless_weight_sum";
    case InvariantKind::kDroplessUnchosenZero:
      return "dropless_unchosen_zero";
    case InvariantKind::kDroplessEveryExpert:
      return "dropless_every_expert";
    case InvariantKind::kSubgroupPositions:
      return "subgroup_positions";
    case InvariantKind::kSubgroupCombineSoftmax:
      return "subgroup_combine_softmax";
    case InvariantKind::kSubgroupOutputReshape:
      return "subgroup_output_reshape";
    case InvariantKind::kSortedExpertsNonDecreasing:
      return "sorted_experts_non_decreasing";
    case InvariantKind::kGroupSizesCoverRows:
      return "group_sizes_cover_rows";
    case InvariantKind::kUnsortInvertsSort:
      return "unsort_inverts_sort";
    case InvariantKind::kNoRowsLeaveDevice:
      return "no_rows_leave_device";
    case InvariantKind::kDecodeReceivesAllRows:
      return "decode_receives_all_rows";
    case InvariantKind::kDecodeSendSizesBroadcast:
      return "decode_send_sizes_broadcast";
    case InvariantKind::kDecodeOutputReplicated:
      return "decode_output_replicated";
    case InvariantKind::kTensorScatteredOutput:
      return "tensor_scattered_output";
    case InvariantKind::kTensorOutSpecMatches:
      return "tensor_out_spec_matches";
    case InvariantKind::kTensorTransposePsum:
      return "tensor_transpose_psum";
    case InvariantKind::kRingMaskKeepsLocalExperts:
      return "ring_mask_keeps_local_experts";
    case InvariantKind::kRingGroupSizesCoverGroup:
      return "ring_group_sizes_cover_group";
    case InvariantKind::kRingMatchesAllToAll:
      return "ring_matches_all_to_all";
    case InvariantKind::kScaledWeightSum:
      return "scaled_weight_sum";
    case InvariantKind::kBiasedSelection:
      return "biased_selection";
    case InvariantKind::kUnitCombineWeights:
      return "unit_combine_weights";
    case InvariantKind::kNormalizedWeights:
      return "normalized_weights";
    case InvariantKind::kRoutedPlusShared:
      return "routed_plus_shared";
    case InvariantKind::kMaskedLoopMatchesDropless:
      return "masked_loop_matches_dropless";
  }
  return "unknown";
}

namespace {

using Captures = std::map<std::string, Array>;

// The size of dim `letter` of `t`, when its dims name it.
std::optional<int64_t> DimSize(const TensorRecord& t, char letter) {
  if (t.dims.size() != t.shape.size()) return std::nullopt;
  const size_t at = t.dims.find(letter);
  if (at == std::string::npos) return std::nullopt;
  return t.shape[at];
}

double Sum(const std::vector<double>& v) { return std::accumulate(v.begin(), v.end(), 0.0); }

// A [rows, cols] fact as a matrix; empty when the fact is not 2-D.
std::vector<std::vector<double>> Matrix(const Fact& f) {
  std::vector<std::vector<double>> m;
  if (f.shape.size() != 2) return m;
  for (int64_t r = 0; r < f.shape[0]; ++r)
    m.emplace_back(f.values.begin() + r * f.shape[1], f.values.begin() + (r + 1) * f.shape[1]);
  return m;
}

std::string Vector(const std::vector<double>& v) {
  std::vector<std::string> items;
  for (const double x : v) items.push_back(FactValueText(x));
  return fmt::format("[{}]", fmt::join(items, ", "));
}

std::string Number(double x) { return fmt::format("{:.4g}", x); }

// Builds the invariants of one trace: each check appends its record.
class Builder {
 public:
  explicit Builder(std::vector<Invariant>& out) : out_(out) {}
  void Checked(InvariantKind kind, std::string source, std::string statement, std::string reason,
               bool holds, std::string detail) {
    out_.push_back(Invariant{kind, std::move(statement), std::move(reason),
                             (holds ? "holds: " : "VIOLATED: ") + detail, !holds, std::move(source),
                             ""});
  }
  void Unchecked(InvariantKind kind, std::string source, std::string statement, std::string reason,
                 std::string why_not) {
    out_.push_back(Invariant{kind, std::move(statement), std::move(reason),
                             "not evaluated: " + why_not, false, std::move(source), ""});
  }

 private:
  std::vector<Invariant>& out_;
};

// The numeric capture `name`, or nullptr.
const Array* Captured(const Captures* captures, const std::string& name) {
  if (!captures) return nullptr;
  const auto found = captures->find(name);
  if (found == captures->end() || !found->second.numeric()) return nullptr;
  return &found->second;
}

// True when `scope` is `tail` or ends with "/<tail>".
bool ScopeEndsWith(std::string_view scope, std::string_view tail) {
  if (scope == tail) return true;
  return scope.size() > tail.size() && scope.ends_with(tail) &&
         scope[scope.size() - tail.size() - 1] == '/';
}

// The first tensor named `name` in a scope ending with `tail` (any scope when empty).
const TensorRecord* FindTensor(const Trace& trace, std::string_view name,
                               std::string_view tail = {}) {
  for (const TensorRecord& t : trace.tensors)
    if (t.name == name && (tail.empty() || ScopeEndsWith(t.scope, tail))) return &t;
  return nullptr;
}

// The sharding a tensor has: its statement's, else what propagation gave it.
const PartitionSpec* SpecOf(const TensorRecord& t) {
  if (t.partition_spec) return &*t.partition_spec;
  if (t.propagated_spec) return &*t.propagated_spec;
  return nullptr;
}

PartitionSpec::Entry EntryAt(const PartitionSpec* spec, size_t dim) {
  if (!spec || dim >= spec->rank()) return {};
  return (*spec)[dim];
}

// Row `r` of a [rows, cols] capture (or of its first two dims flattened past the first).
std::vector<float> Row(const Array& a, int64_t r) {
  const int64_t cols = a.size() / a.shape[0];
  return {a.values().begin() + r * cols, a.values().begin() + (r + 1) * cols};
}

// ---------------------------------------------------------------------------------------
// Every trace.

void ShapeInvariant(const Trace& trace, Builder& b) {
  const TensorRecord* in = trace.At(trace.input);
  const TensorRecord* result = trace.At(trace.output);
  if (!in || !result) return;
  b.Checked(InvariantKind::kOutputShape, "", "output.shape == inputs.shape",
            "the block is a residual-branch layer: [B,S,M] in, [B,S,M] out",
            in->shape == result->shape,
            fmt::format("{} == {}", ShapeToString(result->shape), ShapeToString(in->shape)));
}

// A placed tensor's bytes per device are its local block's elements times the dtype size.
void BytesInvariant(const Trace& trace, Builder& b) {
  int placed = 0;
  std::vector<std::string> bad;
  for (const TensorRecord& t : trace.tensors) {
    if (t.constraint == Constraint::kNone) continue;
    ++placed;
    if (t.bytes_per_device != NumElements(t.local_shape) * ByteSize(t.dtype))
      bad.push_back(fmt::format("{} ({} in {})", t.name, t.bytes_per_device, t.scope));
  }
  if (placed == 0) return;
  b.Checked(InvariantKind::kPlacedBytes, "",
            "bytes_per_device == prod(local_shape) * sizeof(dtype) for every placed tensor",
            "a constraint or shard_map spec fixes the per-device block; its bytes follow",
            bad.empty(),
            bad.empty() ? fmt::format("{} placed tensors", placed)
                        : fmt::format("{}", fmt::join(bad, ", ")));
}

// Top-k routes every token to exactly K experts.
void RoutingInvariant(const Trace& trace, Builder& b) {
  const TensorRecord* in = trace.At(trace.input);
  const TensorRecord* indices = trace.At(trace.top_k_indices);
  if (!in || !indices) return;
  const std::string statement = "sum(tokens per expert) == B*S*K";
  const std::string reason = "top_k picks exactly K distinct experts for each of the B*S tokens";
  const Fact* per_expert = trace.FindFact(FactKind::kTokensPerExpert);
  const auto bs = DimSize(*in, 'B'), s = DimSize(*in, 'S'), k = DimSize(*indices, 'K');
  if (!per_expert || !bs || !s || !k) {
    b.Unchecked(InvariantKind::kTokensRouted, "moe.py:530", statement, reason,
                "symbolic trace (no routing counts)");
    return;
  }
  const double total = Sum(per_expert->values);
  b.Checked(InvariantKind::kTokensRouted, "moe.py:530", statement, reason,
            total == static_cast<double>(*bs * *s * *k),
            fmt::format("sum({}) = {}, B*S*K = {}*{}*{} = {}", Vector(per_expert->values),
                        FactValueText(total), *bs, *s, *k, *bs * *s * *k));
}

// The routing itself, read from the run's top-k arrays: each token's K choices are
// distinct experts with non-negative weights, and under DeepSeek's group-limited routing
// every choice lies in one of the token's kept groups.
void ChoiceInvariants(const Trace& trace, const Captures* captures, Builder& b) {
  const Array* idx = Captured(captures, "top_k_indices");
  const Array* weights = Captured(captures, "top_k_weights");
  if (!idx || idx->rank() != 3) return;
  const int64_t k = idx->shape[2], tokens = idx->shape[0] * idx->shape[1];
  int64_t repeated = 0;
  for (int64_t t = 0; t < tokens; ++t) {
    std::set<float> seen;
    for (int64_t j = 0; j < k; ++j) seen.insert(idx->values()[t * k + j]);
    repeated += static_cast<int64_t>(seen.size()) != k;
  }
  b.Checked(InvariantKind::kDistinctChoices, "moe.py:530",
            "every token's K choices are K distinct experts",
            "top_k picks K different indices of the expert axis", repeated == 0,
            fmt::format("{} of {} tokens repeat an expert", repeated, tokens));
  // Llama 4 keeps the raw top logit as its weight (the sigmoid comes in permute): any sign.
  const bool raw_logits = FindTensor(trace, "router_scores") != nullptr;
  if (!raw_logits && weights && weights->shape == idx->shape) {
    const std::vector<float>& w = weights->values();
    const float lowest = w.empty() ? 0.0f : *std::min_element(w.begin(), w.end());
    b.Checked(InvariantKind::kNonNegativeWeights, "moe.py:530", "top_k_weights >= 0",
              "the weights are softmax or sigmoid scores (normalized or scaled by positive "
              "factors)",
              lowest >= 0.0f, fmt::format("min {:.4g}", lowest));
  }
  const Array* mask = Captured(captures, "group_mask");
  const Array* logits = Captured(captures, "gate_logits");
  if (!mask || !logits || mask->rank() != 3) return;
  const int64_t groups = mask->shape[2], experts = logits->shape[2];
  if (groups == 0 || experts % groups != 0) return;
  int64_t outside = 0;
  for (int64_t t = 0; t < tokens; ++t)
    for (int64_t j = 0; j < k; ++j) {
      const auto e = static_cast<int64_t>(idx->values()[t * k + j]);
      outside += mask->values()[t * groups + e / (experts / groups)] == 0.0f;
    }
  b.Checked(InvariantKind::kChoicesInKeptGroups, "moe.py:566, 616-618",
            "group_mask[token, expert / (E/G)] == 1 for every chosen expert",
            "expert_group_mask sets the scores outside the kept groups to -inf before top-k",
            outside == 0, fmt::format("{} of {} choices outside kept groups", outside, tokens * k));
}

// ---------------------------------------------------------------------------------------
// dense_matmul with capacity: the masks and the drop counts agree.

void CapacityInvariants(const Trace& trace, const Captures* captures, Builder& b) {
  const TensorRecord* dispatch = trace.At(trace.dispatch_mask);
  const TensorRecord* combine = trace.At(trace.combine_mask);
  if (!dispatch || !combine) return;
  const bool subgroups = dispatch->shape.size() == 5;
  const std::string masks = subgroups ? "moe.py:1472" : "moe.py:1557";
  {
    const std::string statement = "dispatch_mask == (combine_mask != 0)";
    const std::string reason =
        "dispatch_mask is combine_mask cast to bool: a slot is dispatched iff it has a weight";
    if (dispatch->summary && combine->summary) {
      b.Checked(InvariantKind::kDispatchIsCombineNonzero, masks,
                statement + ", so nnz(dispatch_mask) == nnz(combine_mask)", reason,
                dispatch->summary->nonzeros == combine->summary->nonzeros,
                fmt::format("{} == {}", dispatch->summary->nonzeros, combine->summary->nonzeros));
    } else {
      b.Unchecked(InvariantKind::kDispatchIsCombineNonzero, masks, statement, reason,
                  "symbolic trace");
    }
  }
  const Fact* capacity = trace.FindFact(FactKind::kExpertCapacity);
  const auto c = DimSize(*dispatch, 'C');
  if (capacity && c && !capacity->values.empty())
    b.Checked(InvariantKind::kCapacityIsMaskDim, masks,
              "C (the masks' last dim) == expert_capacity_per_batch",
              "one mask slot per unit of capacity", *c == capacity->values[0],
              fmt::format("{} == {}", *c, FactValueText(capacity->values[0])));
  const Fact* routed = trace.FindFact(FactKind::kTokensPerExpert);
  const Fact* dropped = trace.FindFact(FactKind::kTokensDroppedPerExpert);
  if (routed && dropped && dispatch->summary) {
    const double kept = Sum(routed->values) - Sum(dropped->values);
    b.Checked(InvariantKind::kKeptIsRoutedMinusDropped, masks,
              "nnz(dispatch_mask) == sum(tokens per expert) - sum(tokens dropped)",
              "a routed choice either gets a slot or is dropped by capacity",
              static_cast<double>(dispatch->summary->nonzeros) == kept,
              fmt::format("{} == {} - {}", dispatch->summary->nonzeros,
                          FactValueText(Sum(routed->values)), FactValueText(Sum(dropped->values))));
  }
  const std::string one_per_slot = "each (batch, expert, slot) holds at most one token";
  const std::string fcfs =
      "slots fill first come, first served: within an expert, a later token never gets an "
      "earlier slot";
  const Array* mask = Captured(captures, "dispatch_mask");
  if (mask && mask->rank() != 4) mask = nullptr;
  if (!mask) {
    b.Unchecked(InvariantKind::kOneTokenPerSlot, masks, one_per_slot,
                "the slot index is the token's arrival count", "no mask values (symbolic trace)");
    return;
  }
  const Array& m = *mask;
  // The inference masks [B,N,S/N,E,C] are captured as [B,S,E,C]: the same data, read per
  // (b, n) group, where slots restart.
  const int64_t groups = subgroups ? dispatch->shape[1] : 1;
  const int64_t nb = m.shape[0] * groups, ns = m.shape[1] / groups, ne = m.shape[2],
                nc = m.shape[3];
  const auto at = [&](int64_t bi, int64_t s, int64_t e, int64_t ci) {
    return m.values()[((bi * ns + s) * ne + e) * nc + ci] != 0.0f;
  };
  int64_t crowded = 0, out_of_order = 0;
  for (int64_t bi = 0; bi < nb; ++bi)
    for (int64_t e = 0; e < ne; ++e) {
      int64_t last_token = -1;
      for (int64_t ci = 0; ci < nc; ++ci) {
        int64_t holders = 0;
        for (int64_t s = 0; s < ns; ++s) {
          if (!at(bi, s, e, ci)) continue;
          ++holders;
          if (s <= last_token) ++out_of_order;
          last_token = s;
        }
        crowded += holders > 1;
      }
    }
  b.Checked(InvariantKind::kOneTokenPerSlot, masks, one_per_slot,
            "the slot index is the token's arrival count at the expert", crowded == 0,
            fmt::format("{} of {} slots hold more than one token", crowded, nb * ne * nc));
  b.Checked(InvariantKind::kSlotsInArrivalOrder, masks, fcfs,
            "positions come from a cumulative sum over tokens in order", out_of_order == 0,
            fmt::format("{} out-of-order assignments in {} {} x {} experts", out_of_order, nb,
                        subgroups ? "(batch, group) rows" : "batch rows", ne));
}

// Training: generate_masks weights the slots with `weights` (the top-k weights scattered to
// [B,S,E], passed as its softmax_probs parameter), so a kept choice's slot holds exactly its
// top-k weight and a dropped choice none.
void TrainingCombineInvariant(const Trace& trace, const Captures* captures, Builder& b) {
  const TensorRecord* dispatch = trace.At(trace.dispatch_mask);
  if (!dispatch || dispatch->shape.size() != 4) return;
  const std::string statement =
      "sum over c of combine_mask[b,s,e,c] == top_k_weights[b,s,k] for every kept choice "
      "(e = top_k_indices[b,s,k]) and 0 for every dropped or unchosen expert";
  const std::string reason =
      "dense_matmul passes the scattered top-k `weights` as generate_masks' softmax_probs, "
      "which the capacity mask zeroes for dropped choices";
  const Array* mask = Captured(captures, "dispatch_mask");
  const Array* combine = Captured(captures, "combine_mask");
  const Array* idx = Captured(captures, "top_k_indices");
  const Array* tw = Captured(captures, "top_k_weights");
  if (!mask || !combine || !idx || !tw || mask->rank() != 4 || combine->shape != mask->shape ||
      idx->shape != tw->shape || idx->rank() != 3) {
    b.Unchecked(InvariantKind::kCombineHoldsTopKWeights, "moe.py:1603, 1725-1726", statement,
                reason, "no mask values (symbolic trace)");
    return;
  }
  const int64_t tokens = mask->shape[0] * mask->shape[1], ne = mask->shape[2], nc = mask->shape[3],
                k = idx->shape[2];
  double worst = 0;
  int64_t kept = 0;
  for (int64_t t = 0; t < tokens; ++t)
    for (int64_t e = 0; e < ne; ++e) {
      double sum = 0;
      bool dispatched = false;
      for (int64_t c = 0; c < nc; ++c) {
        sum += combine->values()[(t * ne + e) * nc + c];
        dispatched |= mask->values()[(t * ne + e) * nc + c] != 0.0f;
      }
      double want = 0;
      if (dispatched) {
        ++kept;
        for (int64_t j = 0; j < k; ++j)
          if (idx->values()[t * k + j] == static_cast<float>(e)) want = tw->values()[t * k + j];
      }
      worst = std::max(worst, std::abs(sum - want));
    }
  b.Checked(InvariantKind::kCombineHoldsTopKWeights, "moe.py:1603, 1725-1726", statement, reason,
            worst <= 1e-6,
            fmt::format("max |difference| {} over {} (token, expert) pairs, {} kept (tolerance "
                        "1e-6)",
                        Number(worst), tokens * ne, kept));
}

// ---------------------------------------------------------------------------------------
// ragged_all_to_all: every row one device sends is received once, and comes back. The
// send matrices are [device, peer]; with several expert-parallel groups (fsdp x expert)
// peer p of device d is a different device per group, so the per-device receive checks
// that need that mapping run only when the whole mesh is one group (a square matrix).

void AllToAllInvariants(const Trace& trace, Builder& b) {
  std::vector<const Fact*> forward;
  for (const Fact& f : trace.facts)
    if (f.kind == FactKind::kRowsSent && f.subject == "x" && f.shape.size() == 2)
      forward.push_back(&f);
  if (forward.empty()) return;
  const Fact& sent = *forward.front();
  const auto x = Matrix(sent);
  const size_t devices = x.size(), peers = x.front().size();
  const double total = Sum(sent.values);
  if (forward.size() > 1) {
    const bool same = std::all_of(forward.begin(), forward.end(),
                                  [&](const Fact* f) { return f->values == sent.values; });
    b.Checked(InvariantKind::kChunksRouteAlike, "",
              "every embedding chunk's rows_sent matrix is the same",
              "chunks split M, not tokens: each chunk routes the same rows", same,
              fmt::format("{} chunks", forward.size()));
  }
  const Fact* fill = trace.FindFact(FactKind::kRaggedBufferFill);
  if (fill && fill->values.size() == devices)
    b.Checked(InvariantKind::kSentEqualsBufferFill, "moe.py:1217",
              "sum(rows_sent) == sum(ragged buffer fill)",
              "ragged_all_to_all writes every row a peer sends into the receiver's buffer, once",
              Sum(fill->values) == total,
              fmt::format("{} == {}", FactValueText(total), FactValueText(Sum(fill->values))));
  if (fill && fill->values.size() == devices && devices == peers) {
    std::vector<double> received(devices, 0.0);
    for (size_t d = 0; d < devices; ++d)
      for (size_t p = 0; p < peers; ++p) received[p] += x[d][p];
    b.Checked(InvariantKind::kBufferFillIsReceived, "moe.py:1217",
              "ragged buffer fill[d] == sum over peers p of rows_sent[p, d]",
              "one expert-parallel group: peer p is device p", fill->values == received,
              fmt::format("{} == {}", Vector(fill->values), Vector(received)));
  }
  const Fact* rows = trace.FindFact(FactKind::kRaggedBufferRows);
  if (fill && rows && !rows->values.empty()) {
    const double most = *std::max_element(fill->values.begin(), fill->values.end());
    b.Checked(InvariantKind::kBufferFillWithinRows, "moe.py:888, 1209",
              "rows received by any device <= ragged buffer rows",
              "rows beyond the buffer would be lost (get_ragged_buffer_size)",
              most <= rows->values[0],
              fmt::format("max {} <= {}", FactValueText(most), FactValueText(rows->values[0])));
  }
  const Fact* groups = trace.FindFact(FactKind::kGroupSizesPerDevice);
  if (fill && groups && groups->shape.size() == 2 &&
      static_cast<size_t>(groups->shape[0]) == fill->values.size()) {
    std::vector<double> per_device;
    for (const auto& row : Matrix(*groups)) per_device.push_back(Sum(row));
    b.Checked(InvariantKind::kGroupSizesSumToFill, "moe.py:1227",
              "sum over local experts of group_sizes[d, :] == ragged buffer fill[d]",
              "every received row belongs to exactly one local expert's gmm group",
              per_device == fill->values,
              fmt::format("{} == {}", Vector(per_device), Vector(fill->values)));
  }
  const Fact* back = trace.FindFact(FactKind::kRowsSent, "intermediate_output");
  if (!back) return;
  b.Checked(InvariantKind::kSentBackEqualsSent, "moe.py:1364-1369",
            "sum(rows_sent_back) == sum(rows_sent)",
            "the return all-to-all sends every expert output row home", Sum(back->values) == total,
            fmt::format("{} == {}", FactValueText(Sum(back->values)), FactValueText(total)));
  const auto y = Matrix(*back);
  if (fill && y.size() == devices) {
    std::vector<double> returned;
    for (const auto& row : y) returned.push_back(Sum(row));
    b.Checked(InvariantKind::kSentBackIsFill, "moe.py:1364-1369",
              "sum over peers of rows_sent_back[d, :] == ragged buffer fill[d]",
              "a device returns exactly the rows it received", returned == fill->values,
              fmt::format("{} == {}", Vector(returned), Vector(fill->values)));
  }
  if (devices == peers && y.size() == devices) {
    bool transposed = true;
    for (size_t d = 0; d < devices; ++d)
      for (size_t p = 0; p < peers; ++p) transposed &= y[d].size() == peers && y[d][p] == x[p][d];
    b.Checked(InvariantKind::kSentBackIsTranspose, "moe.py:1364-1369",
              "rows_sent_back[d, p] == rows_sent[p, d]",
              "each row goes back to the device its token came from", transposed,
              fmt::format("{} x {} send matrices", devices, peers));
  }
}

// ---------------------------------------------------------------------------------------
// MlpBlock (linears.py, also the shared experts): the hidden activation is pinned before wo,
// and wo's contraction over F is local only where F is whole.

void MlpInvariants(const Trace& trace, Builder& b) {
  for (const OpRecord& op : trace.ops) {
    if (op.kind != OpKind::kEinsum || op.inputs.size() != 2 || op.outputs.empty()) continue;
    const TensorRecord& x = trace.tensors[op.inputs[0]];
    const TensorRecord& wo = trace.tensors[op.inputs[1]];
    if (x.dims != "BSF" || wo.dims != "FM") continue;
    const std::string source = op.scope.find("shared_experts") != std::string::npos
                                   ? "linears.py MlpBlock, called at moe.py:2180"
                                   : "linears.py MlpBlock";
    const PartitionSpec* xs = SpecOf(x);
    const PartitionSpec* ws = SpecOf(wo);
    const bool constrained =
        x.constraint == Constraint::kShardWithLogical &&
        x.logical_axes == LogicalNames({"activation_batch", "activation_length", "activation_mlp"});
    b.Checked(
        InvariantKind::kMlpHiddenConstrained, source,
        "x (the hidden activation) is constrained to (activation_batch, "
        "activation_length, activation_mlp) before wo",
        "the block pins the gated product, so wo's contraction over F starts from a "
        "known layout, whatever XLA propagated into wi_0/wi_1",
        constrained,
        fmt::format("in {}: x {} ({}), F over {}; wo {}, F over {}", op.scope,
                    xs ? xs->ToString() : "unplaced", ToString(x.constraint),
                    PartitionSpec::EntryToString(EntryAt(xs, 2)), ws ? ws->ToString() : "unplaced",
                    PartitionSpec::EntryToString(EntryAt(ws, 0))));
    // F as the einsum reads each operand: after XLA's reshard of it at this op, if any.
    const auto read_f = [&](const TensorRecord& t, size_t dim) {
      for (const ImpliedCollective& c : op.implied)
        if (c.tensor == t.id && c.kind != CollectiveKind::kPsum &&
            c.kind != CollectiveKind::kPsumScatter)
          return EntryAt(&c.to, dim);
      return EntryAt(SpecOf(t), dim);
    };
    const PartitionSpec::Entry fx = read_f(x, 2), fw = read_f(wo, 0);
    std::set<std::string> both;
    for (const std::string& axis : fx)
      if (std::find(fw.begin(), fw.end(), axis) != fw.end()) both.insert(axis);
    std::set<std::string> reduced;
    int64_t reduce_bytes = 0;
    for (const ImpliedCollective& c : op.implied)
      if (c.kind == CollectiveKind::kPsum || c.kind == CollectiveKind::kPsumScatter) {
        reduced.insert(c.axes.begin(), c.axes.end());
        reduce_bytes += c.bytes_per_device;
      }
    const std::string axes =
        both.empty() ? "no mesh axis" : fmt::format("'{}'", fmt::join(both, "', '"));
    b.Checked(InvariantKind::kMlpContractionAllReduce, source,
              "wo contracts F: when x and wo both shard F over mesh axes A, each device holds a "
              "partial sum and the output needs an all-reduce over exactly A",
              "a sharded contraction dim splits the sum, not the result", reduced == both,
              both.empty() ? fmt::format("no mesh axis shards F in both operands as the einsum "
                                         "reads them; {} all-reduce",
                                         reduced.empty() ? "no" : "an unexpected")
                           : fmt::format("F over {} in x and wo; all-reduce over '{}', {} B "
                                         "per device",
                                         axes, fmt::join(reduced, "', '"), reduce_bytes));
  }
}

// ---------------------------------------------------------------------------------------
// dense_matmul dropless: the top-k weights scattered into [B,S,E], every expert on every
// token.

void DroplessInvariants(const Trace& trace, const Captures* captures, Builder& b) {
  const TensorRecord* layer_w0 = nullptr;
  for (const TensorRecord& t : trace.tensors)
    if (t.name == "layer_w0" && t.dims == "BSEH") {
      layer_w0 = &t;
      break;
    }
  // The masked loop: one [B,S,H] layer_w0 per expert, each in its own scope.
  std::set<std::string> loop_experts;
  bool loop_shapes = true;
  const TensorRecord* in = trace.At(trace.input);
  for (const TensorRecord& t : trace.tensors)
    if (t.name == "layer_w0" && t.dims == "BSH" &&
        t.scope.find("masked_loop") != std::string::npos) {
      loop_experts.insert(t.scope);
      loop_shapes &= in && t.shape[0] == in->shape[0] && t.shape[1] == in->shape[1];
    }
  if (!layer_w0 && loop_experts.empty()) return;
  // The experts' count, from the gate's [M, E] kernel (or the constrained logits).
  const TensorRecord* logits = FindTensor(trace, "gate_logits");
  if (!logits) logits = FindTensor(trace, "gate.kernel");
  if (in && logits && !layer_w0) {
    const auto e = DimSize(*logits, 'E');
    b.Checked(InvariantKind::kDroplessEveryExpert, "sparse-moe-jax-port.md",
              "each of the E experts' layer_w0 is [B,S,H]: every expert computes on every token",
              "the loop runs every expert on all tokens and masks afterwards, as dense_matmul's "
              "dropless einsums do at once",
              loop_shapes && e && static_cast<int64_t>(loop_experts.size()) == *e,
              fmt::format("{} expert scopes with layer_w0 [B={},S={},H] of E={}",
                          loop_experts.size(), in->shape[0], in->shape[1], e ? *e : 0));
  }
  if (in && logits && layer_w0) {
    const auto e = DimSize(*logits, 'E');
    const bool every = e && layer_w0->shape[0] == in->shape[0] &&
                       layer_w0->shape[1] == in->shape[1] && layer_w0->shape[2] == *e;
    b.Checked(InvariantKind::kDroplessEveryExpert, "moe.py:1914-1925",
              "layer_w0 is [B,S,E,H]: every expert computes on every token",
              "BSM,EMH -> BSEH has no capacity dim: nothing is selected or dropped before the "
              "experts; the routing only weights their outputs",
              every,
              fmt::format("layer_w0 {} against inputs {} and E={}", ShapeToString(layer_w0->shape),
                          ShapeToString(in->shape), e ? *e : 0));
  }
  const std::string sum_statement =
      "sum over E of weights[b,s,:] == sum over K of top_k_weights[b,s,:]";
  const std::string sum_reason =
      "reshape_and_update_weights writes each token's K weights into K distinct columns of "
      "zeros (Llama 4: ones, so the sum is K)";
  const Array* w = Captured(captures, "weights");
  const Array* tw = Captured(captures, "top_k_weights");
  const Array* ti = Captured(captures, "top_k_indices");
  if (!w || !tw || !ti || w->rank() != 3 || ti->shape != tw->shape) {
    b.Unchecked(InvariantKind::kDroplessWeightSum, "moe.py:1447-1463", sum_statement, sum_reason,
                "no weight values (symbolic trace)");
    return;
  }
  const bool ones = FindTensor(trace, "router_scores") != nullptr;  // llama4
  const int64_t tokens = ti->shape[0] * ti->shape[1], k = ti->shape[2], e = w->shape[2];
  double worst = 0, lo = 1e30, hi = -1e30;
  int64_t stray = 0, misplaced = 0;
  for (int64_t t = 0; t < tokens; ++t) {
    double expected = 0, got = 0;
    std::vector<bool> chosen(static_cast<size_t>(e), false);
    for (int64_t j = 0; j < k; ++j) {
      const auto col = static_cast<int64_t>(ti->values()[t * k + j]);
      const float want = ones ? 1.0f : tw->values()[t * k + j];
      expected += want;
      if (col < 0 || col >= e) {
        ++misplaced;
        continue;
      }
      chosen[static_cast<size_t>(col)] = true;
      misplaced += w->values()[t * e + col] != want;
    }
    for (int64_t c = 0; c < e; ++c) {
      const float v = w->values()[t * e + c];
      got += v;
      stray += !chosen[static_cast<size_t>(c)] && v != 0.0f;
    }
    worst = std::max(worst, std::abs(got - expected));
    lo = std::min(lo, got);
    hi = std::max(hi, got);
  }
  b.Checked(InvariantKind::kDroplessWeightSum, "moe.py:1447-1463, 1701", sum_statement, sum_reason,
            worst <= 1e-6,
            fmt::format("max |difference| {} over {} tokens (per-token sums {}..{}, tolerance "
                        "1e-6)",
                        Number(worst), tokens, Number(lo), Number(hi)));
  b.Checked(InvariantKind::kDroplessUnchosenZero, "moe.py:1451, 1462",
            fmt::format("weights[b,s,e] == 0 for e not in top_k_indices[b,s], and == {} for the "
                        "K chosen",
                        ones ? "1" : "top_k_weights[b,s,k]"),
            "the scatter starts from zeros and sets only the chosen columns",
            stray == 0 && misplaced == 0,
            fmt::format("{} nonzero unchosen and {} wrong chosen entries of {}", stray, misplaced,
                        tokens * e));
}

// ---------------------------------------------------------------------------------------
// dense_matmul dropping in inference: generate_masks_subgroup's [B,N,S,E,C] masks.

void SubgroupInvariants(const Trace& trace, const Captures* captures, Builder& b) {
  const TensorRecord* dispatch = trace.At(trace.dispatch_mask);
  if (!dispatch || dispatch->shape.size() != 5) return;
  const int64_t nb = dispatch->shape[0], nn = dispatch->shape[1], ns = dispatch->shape[2],
                ne = dispatch->shape[3], nc = dispatch->shape[4];
  // The combine einsum's [B,N,S,M] output folded back to [B,N*S,M].
  for (const OpRecord& op : trace.ops) {
    if (op.kind != OpKind::kReshape || op.inputs.empty() || op.outputs.empty()) continue;
    const TensorRecord& from = trace.tensors[op.inputs[0]];
    const TensorRecord& to = trace.tensors[op.outputs[0]];
    if (from.name != "output" || from.dims != "BNSM") continue;
    const TensorRecord* in = trace.At(trace.input);
    const bool folded = from.shape.size() == 4 && to.shape.size() == 3 &&
                        to.shape[0] == from.shape[0] &&
                        to.shape[1] == from.shape[1] * from.shape[2] &&
                        to.shape[2] == from.shape[3] && in && to.shape == in->shape;
    b.Checked(InvariantKind::kSubgroupOutputReshape, "moe.py:1900-1908",
              "output [B,N,S/N,M] is reshaped to [B,N*(S/N),M] == inputs.shape",
              "the combine einsum keeps the context groups apart; the block must return [B,S,M]",
              folded,
              fmt::format("{} -> {} (inputs {})", ShapeToString(from.shape),
                          ShapeToString(to.shape), in ? ShapeToString(in->shape) : "?"));
    break;
  }
  const Array* mask = Captured(captures, "dispatch_mask");
  const Array* combine = Captured(captures, "combine_mask");
  const Array* idx = Captured(captures, "top_k_indices");
  const std::string pos_statement =
      "per (b, n) group and expert, slots 0..min(routed, C)-1 hold one token each and the "
      "rest none";
  const std::string pos_reason =
      "positions are a cumsum over the group's (token, choice) rows (axis 2 of [B,N,S*K,E]), "
      "restarting in every group, and capped at C";
  if (!mask || !combine || !idx || mask->size() != nb * nn * ns * ne * nc ||
      combine->size() != mask->size() || idx->size() % (nb * nn * ns) != 0) {
    b.Unchecked(InvariantKind::kSubgroupPositions, "moe.py:1511, 1520", pos_statement, pos_reason,
                "no mask values (symbolic trace)");
    return;
  }
  const int64_t k = idx->size() / (nb * nn * ns);
  const auto slot = [&](const Array& a, int64_t bi, int64_t n, int64_t s, int64_t e, int64_t c) {
    return a.values()[(((bi * nn + n) * ns + s) * ne + e) * nc + c];
  };
  int64_t bad_groups = 0, groups = 0, dropped = 0;
  for (int64_t bi = 0; bi < nb; ++bi)
    for (int64_t n = 0; n < nn; ++n)
      for (int64_t e = 0; e < ne; ++e) {
        int64_t routed = 0;
        for (int64_t s = 0; s < ns; ++s)
          for (int64_t j = 0; j < k; ++j)
            routed += idx->values()[((bi * nn + n) * ns + s) * k + j] == static_cast<float>(e);
        const int64_t kept = std::min(routed, nc);
        dropped += routed - kept;
        bool ok = true;
        for (int64_t c = 0; c < nc; ++c) {
          int64_t holders = 0;
          for (int64_t s = 0; s < ns; ++s) holders += slot(*mask, bi, n, s, e, c) != 0.0f;
          ok &= holders == (c < kept ? 1 : 0);
        }
        ++groups;
        bad_groups += !ok;
      }
  b.Checked(InvariantKind::kSubgroupPositions, "moe.py:1511, 1520", pos_statement, pos_reason,
            bad_groups == 0,
            fmt::format("{} of {} (b, n, expert) groups differ; {} choices dropped", bad_groups,
                        groups, dropped));
  const Array* probs = Captured(captures, "softmax_probs");
  const std::string soft_statement =
      "sum over c of combine_mask[b,n,s,e,c] == softmax_probs[b,s,e] for every kept expert e "
      "(0 otherwise), so sum over e,c of combine_mask[b,n,s] <= 1";
  const std::string soft_reason =
      "inference weights the kept choices with the softmax over all E experts, not the top-k "
      "weights: a token's combine weights sum to the probability mass it kept";
  if (!probs || probs->size() != nb * nn * ns * ne) {
    b.Unchecked(InvariantKind::kSubgroupCombineSoftmax, "moe.py:1527, 1748", soft_statement,
                soft_reason, "no softmax_probs values");
    return;
  }
  double worst = 0, lo = 1e30, hi = -1e30;
  for (int64_t bi = 0; bi < nb; ++bi)
    for (int64_t n = 0; n < nn; ++n)
      for (int64_t s = 0; s < ns; ++s) {
        double total = 0;
        for (int64_t e = 0; e < ne; ++e) {
          double sum = 0;
          bool kept = false;
          for (int64_t c = 0; c < nc; ++c) {
            sum += slot(*combine, bi, n, s, e, c);
            kept |= slot(*mask, bi, n, s, e, c) != 0.0f;
          }
          const double p = probs->values()[((bi * nn + n) * ns + s) * ne + e];
          worst = std::max(worst, std::abs(sum - (kept ? p : 0.0)));
          total += sum;
        }
        lo = std::min(lo, total);
        hi = std::max(hi, total);
      }
  // bf16 rounds each of the E probabilities by at most 2^-9 of itself.
  const double tolerance = std::ldexp(1.0, -8);
  b.Checked(InvariantKind::kSubgroupCombineSoftmax, "moe.py:1527, 1748", soft_statement,
            soft_reason, worst <= 1e-6 && hi <= 1.0 + tolerance,
            fmt::format("max |difference| {} (tolerance 1e-6); per-token combine sums {}..{} "
                        "(<= 1 + 2^-8)",
                        Number(worst), Number(lo), Number(hi)));
}

// ---------------------------------------------------------------------------------------
// sparse_matmul inside shard_map: each device's sort of its (token, choice) rows.

bool HasWrittenCollective(const Trace& trace, CollectiveKind kind) {
  return std::any_of(trace.ops.begin(), trace.ops.end(), [&](const OpRecord& op) {
    return op.collective && op.collective->kind == kind;
  });
}

void SparseSortInvariants(const Trace& trace, const Captures* captures, Builder& b) {
  const bool ring = Captured(captures, "ring sorted_experts per device") != nullptr;
  const std::string prefix = ring ? "ring " : "";
  const Array* sorted = Captured(captures, prefix + "sorted_experts per device");
  const Array* order = Captured(captures, prefix + "sorted_selected_experts per device");
  if (!sorted || !order || sorted->rank() != 2 || order->shape != sorted->shape) {
    // A symbolic sparse trace still says which checks its path has.
    if (!trace.numeric && FindTensor(trace, "sorted_selected_experts"))
      b.Unchecked(InvariantKind::kUnsortInvertsSort, "moe.py:662, 698",
                  "unsort(sort(rows)) == rows: argsort(sorted_selected_experts) inverts the sort "
                  "on every device",
                  "sorted_selected_experts is a permutation of the device's R rows",
                  "no per-device values (symbolic trace)");
    return;
  }
  const Array* choices = ring ? nullptr : Captured(captures, "top_k_indices per device");
  const int64_t devices = sorted->shape[0], rows = sorted->shape[1];
  int64_t unsorted = 0, mismatched = 0, not_inverted = 0;
  for (int64_t d = 0; d < devices; ++d) {
    const std::vector<float> experts = Row(*sorted, d), perm = Row(*order, d);
    unsorted += !std::is_sorted(experts.begin(), experts.end());
    // unsort(sort(rows)) with unsort = argsort(sorted_selected_experts).
    std::vector<int64_t> inverse(static_cast<size_t>(rows), -1);
    bool permutation = true;
    for (int64_t r = 0; r < rows; ++r) {
      const auto p = static_cast<int64_t>(perm[static_cast<size_t>(r)]);
      if (p < 0 || p >= rows || inverse[static_cast<size_t>(p)] >= 0) {
        permutation = false;
        break;
      }
      inverse[static_cast<size_t>(p)] = r;
    }
    bool identity = permutation;
    for (int64_t r = 0; identity && r < rows; ++r)
      identity =
          static_cast<int64_t>(perm[static_cast<size_t>(inverse[static_cast<size_t>(r)])]) == r;
    not_inverted += !identity;
    if (choices && choices->size() == devices * rows && permutation) {
      const std::vector<float> flat = Row(*choices, d);
      for (int64_t r = 0; r < rows; ++r)
        mismatched += flat[static_cast<size_t>(perm[static_cast<size_t>(r)])] !=
                      experts[static_cast<size_t>(r)];
    }
  }
  b.Checked(InvariantKind::kSortedExpertsNonDecreasing, "moe.py:659-675",
            ring ? "on every device, the rolled expert ids of the sorted rows are non-decreasing"
            : choices ? "on every device, sorted_experts is non-decreasing and sorted row r is a "
                        "choice of expert sorted_experts[r]"
                      : "on every device, sorted_experts is non-decreasing",
            "argsort of the (token, choice) rows by expert groups each expert's rows together, "
            "as the gmm's group_sizes expect",
            unsorted == 0 && mismatched == 0,
            choices ? fmt::format("{} of {} devices unsorted; {} of {} rows hold another "
                                  "expert's choice",
                                  unsorted, devices, mismatched, devices * rows)
                    : fmt::format("{} of {} devices unsorted", unsorted, devices));
  b.Checked(InvariantKind::kUnsortInvertsSort, "moe.py:662, 698",
            "unsort(sort(rows)) == rows: argsort(sorted_selected_experts) inverts the sort on "
            "every device",
            "sorted_selected_experts is a permutation of the device's R rows, so its argsort "
            "puts every expert output back at its (token, choice) row",
            not_inverted == 0,
            fmt::format("{} of {} devices (R = {} rows each) fail", not_inverted, devices, rows));
  if (ring || HasWrittenCollective(trace, CollectiveKind::kRaggedAllToAll)) return;
  // Expert parallelism 1: each device keeps its own rows.
  const Fact* groups = trace.FindFact(FactKind::kGroupSizesPerDevice);
  if (groups && groups->shape.size() == 2 && groups->shape[0] == devices) {
    const int64_t experts = groups->shape[1];
    int64_t bad = 0;
    for (int64_t d = 0; d < devices; ++d) {
      const std::vector<float> row = Row(*sorted, d);
      double total = 0;
      for (int64_t e = 0; e < experts; ++e) {
        const double size = groups->values[static_cast<size_t>(d * experts + e)];
        total += size;
        bad +=
            size != static_cast<double>(std::count(row.begin(), row.end(), static_cast<float>(e)));
      }
      bad += total != static_cast<double>(rows);
    }
    b.Checked(
        InvariantKind::kGroupSizesCoverRows, "moe.py:668",
        "sum over experts of group_sizes[d, :] == R (= T_local*K) and group_sizes[d, e] "
        "== the rows sorted to expert e, on every device",
        "bincount of the flattened choices counts each (token, choice) row once", bad == 0,
        fmt::format("{} devices x {} experts, R = {}; {} mismatches", devices, experts, rows, bad));
  }
  // Gathering a weight (the chunked pipeline's wi chunks) moves no token.
  const bool moved = std::any_of(trace.ops.begin(), trace.ops.end(), [&](const OpRecord& op) {
    return op.collective && op.collective->kind == CollectiveKind::kAllGather &&
           !op.inputs.empty() && trace.tensors[op.inputs[0]].kind == TensorKind::kAct;
  });
  const int64_t own = choices ? choices->size() / devices : rows;
  b.Checked(InvariantKind::kNoRowsLeaveDevice, "moe.py:1193-1196",
            "no token leaves its device: no all-to-all or all-gather of activations inside "
            "shard_map, and each device's R sorted rows are its own T_local*K choices",
            "with expert parallelism 1 every device holds every expert, so permute, gmm and "
            "unpermute run on local rows",
            !moved && own == rows,
            fmt::format("{} written all-to-all/all-gather; R = {}, T_local*K = {}",
                        moved ? "a" : "no", rows, own));
}

// ---------------------------------------------------------------------------------------
// sparse_matmul with the batch replicated over expert (decode): no forward all-to-all; the
// return all-to-all broadcasts every device's expert outputs.

void DecodeInvariants(const Trace& trace, const Captures* captures, Builder& b) {
  const Fact* back = trace.FindFact(FactKind::kRowsSent, "intermediate_output");
  if (!back || trace.FindFact(FactKind::kRowsSent, "x")) return;
  const TensorRecord* in = trace.At(trace.input);
  const TensorRecord* indices = trace.At(trace.top_k_indices);
  const auto m = Matrix(*back);
  if (!in || !indices || m.empty()) return;
  const auto bs = DimSize(*in, 'B'), s = DimSize(*in, 'S'), k = DimSize(*indices, 'K');
  if (!bs || !s || !k) return;
  const double rows = static_cast<double>(*bs * *s * *k);
  std::vector<double> received(m.front().size(), 0.0);
  bool broadcast = true;
  for (const auto& row : m) {
    for (size_t p = 0; p < row.size() && p < received.size(); ++p) received[p] += row[p];
    broadcast &= std::all_of(row.begin(), row.end(), [&](double v) { return v == row.front(); });
  }
  b.Checked(InvariantKind::kDecodeReceivesAllRows, "moe.py:856-858, 1389",
            "every device receives all R = B*S*K rows: sum over senders d of "
            "rows_sent[d, p] == R for every peer p",
            "recv_sizes is the whole group_sizes array when the batch is replicated: each device "
            "gets every expert's outputs back",
            std::all_of(received.begin(), received.end(), [&](double v) { return v == rows; }),
            fmt::format("received {} == R = {}*{}*{} = {}", Vector(received), *bs, *s, *k,
                        FactValueText(rows)));
  b.Checked(InvariantKind::kDecodeSendSizesBroadcast, "moe.py:845-848",
            "send_sizes[d, p] is the same for every peer p",
            "SEND_SIZE repeats the rows of the sender's own experts to every peer: a broadcast",
            broadcast, fmt::format("rows sent [device, peer] = {}", FactValuesText(*back)));
  const Array* outputs = Captured(captures, "output per device");
  if (!outputs || outputs->shape.empty()) return;
  const int64_t devices = outputs->shape[0];
  int64_t differ = 0;
  const std::vector<float> first = Row(*outputs, 0);
  for (int64_t d = 1; d < devices; ++d) differ += Row(*outputs, d) != first;
  b.Checked(InvariantKind::kDecodeOutputReplicated, "moe.py:1070, 1154-1155",
            "the output is bit-identical on every device",
            "every device routes the same replicated tokens and sums the same returned rows; "
            "out_specs declare the batch unsharded (decode_batch_moe)",
            differ == 0, fmt::format("{} of {} devices differ from device 0", differ, devices));
}

// ---------------------------------------------------------------------------------------
// sparse_matmul with tensor parallelism: gmm_wo's partial sums scattered over M.

void TensorParallelInvariants(const Trace& trace, Builder& b) {
  const TensorRecord* in = trace.At(trace.input);
  if (!in) return;
  const auto m = DimSize(*in, 'M');
  for (const OpRecord& op : trace.ops) {
    if (!op.collective || op.collective->kind != CollectiveKind::kPsumScatter ||
        op.inputs.empty() || op.outputs.empty())
      continue;
    const TensorRecord& from = trace.tensors[op.inputs[0]];
    const TensorRecord& to = trace.tensors[op.outputs[0]];
    if (to.name != "intermediate_output" || from.shape.size() != 2 || to.shape.size() != 2)
      continue;
    const int64_t tp = op.collective->participants;
    // The partial sums come from wo's H dim being split over the scatter's axes.
    const TensorRecord* wo = nullptr;
    for (const TensorRecord& t : trace.tensors)
      if (t.constraint == Constraint::kShardMapIn && t.name == "wo") wo = &t;
    const PartitionSpec::Entry h = wo ? EntryAt(SpecOf(*wo), 1) : PartitionSpec::Entry{};
    const bool h_split = std::all_of(
        op.collective->axes.begin(), op.collective->axes.end(),
        [&](const std::string& a) { return std::find(h.begin(), h.end(), a) != h.end(); });
    b.Checked(InvariantKind::kTensorScatteredOutput, "moe.py:1320-1323",
              "intermediate_output is [R, M/TP] after the psum_scatter over tensor",
              "wo's H dim is sharded over tensor, so gmm_wo gives partial sums of [R, M]; the "
              "reduce-scatter sums them and leaves each device one M/TP slice",
              h_split && m && from.shape[1] == *m && to.shape[0] == from.shape[0] &&
                  to.shape[1] * tp == *m,
              fmt::format("wo in_spec {} (H over {}); {} -> {} over '{}' ({} devices), M = {}",
                          wo && SpecOf(*wo) ? SpecOf(*wo)->ToString() : "?",
                          PartitionSpec::EntryToString(h), ShapeToString(from.shape),
                          ShapeToString(to.shape), fmt::join(op.collective->axes, "', '"), tp,
                          m ? *m : 0));
    const TensorRecord* out = nullptr;
    for (const TensorRecord& t : trace.tensors)
      if (t.constraint == Constraint::kShardMapOut && t.name == "output") out = &t;
    if (out && out->local_shape.size() == 3) {
      const PartitionSpec::Entry entry = EntryAt(SpecOf(*out), 2);
      const bool named = std::all_of(
          op.collective->axes.begin(), op.collective->axes.end(), [&](const std::string& a) {
            return std::find(entry.begin(), entry.end(), a) != entry.end();
          });
      b.Checked(InvariantKind::kTensorOutSpecMatches, "moe.py:1154-1155",
                "the out_specs' M entry shards over the scatter's axes, and the per-device "
                "output M == intermediate_output's M/TP",
                "shard_map reassembles the output from the slices the psum_scatter left",
                named && out->local_shape[2] == to.shape[1],
                fmt::format("output {} (per device {}) against [R, {}]",
                            SpecOf(*out) ? SpecOf(*out)->ToString() : "unplaced",
                            ShapeToString(out->local_shape), to.shape[1]));
    }
    return;
  }
}

// With tensor_transpose the kernels' M dim is sliced: each wi gmm contracts one slice of M
// and is psum'ed over tensor_transpose, right after it.
void TensorTransposeInvariants(const Trace& trace, Builder& b) {
  const TensorRecord* w0 = nullptr;
  for (const TensorRecord& t : trace.tensors)
    if (t.constraint == Constraint::kShardMapIn && t.name == "w0") w0 = &t;
  if (!w0) return;
  const PartitionSpec::Entry m = EntryAt(SpecOf(*w0), 1);
  if (std::find(m.begin(), m.end(), "tensor_transpose") == m.end()) return;
  std::vector<std::string> summed;
  bool same_shape = true;
  for (const OpRecord& op : trace.ops) {
    if (!op.collective || op.collective->kind != CollectiveKind::kPsum || op.inputs.empty() ||
        op.outputs.empty())
      continue;
    const std::vector<std::string>& axes = op.collective->axes;
    if (std::find(axes.begin(), axes.end(), "tensor_transpose") == axes.end()) continue;
    const TensorRecord& from = trace.tensors[op.inputs[0]];
    const TensorRecord& to = trace.tensors[op.outputs[0]];
    summed.push_back(to.name);
    same_shape &= from.shape == to.shape;
  }
  const bool both = std::count(summed.begin(), summed.end(), "layer_w0") == 1 &&
                    std::count(summed.begin(), summed.end(), "layer_w1") == 1;
  b.Checked(InvariantKind::kTensorTransposePsum, "moe.py:1297-1298, 1308-1309",
            "layer_w0 and layer_w1 are each psum'ed over tensor_transpose, keeping their shape",
            "the wi kernels' M dim is sharded over tensor_transpose, so each device's gmm "
            "contracts one slice of M: a partial sum of the whole",
            both && same_shape,
            fmt::format(
                "w0 in_spec {} (M over {}); psum'ed: {}",
                SpecOf(*w0) ? SpecOf(*w0)->ToString() : "?", PartitionSpec::EntryToString(m),
                summed.empty() ? std::string("none") : fmt::format("{}", fmt::join(summed, ", "))));
}

// ---------------------------------------------------------------------------------------
// Ring of experts: rolled ids, the row mask, each expert-parallel group's coverage.

void RingInvariants(const Trace& trace, const Captures* captures, Builder& b) {
  const Array* sorted = Captured(captures, "ring sorted_experts per device");
  const Array* sizes = Captured(captures, "ring group_sizes per device");
  if (!sorted || !sizes || sorted->rank() != 2 || sizes->rank() != 2) {
    if (!trace.numeric && FindTensor(trace, "roll_to_expert_id"))
      b.Unchecked(InvariantKind::kRingMaskKeepsLocalExperts, "moe.py:1189-1191, 1329-1330",
                  "on every device the rows kept by arange(R) < sum(group_sizes) are exactly the "
                  "rows whose rolled expert id < E_local; the rest are zeroed",
                  "rolling by E_local*shard puts the device's own experts first in the sort",
                  "no per-device values (symbolic trace)");
    return;
  }
  const int64_t devices = sorted->shape[0], rows = sorted->shape[1], local = sizes->shape[1];
  // Per-row max |value| of the masked gmm output, when the run kept it.
  const Array* magnitudes = Captured(captures, "ring intermediate_output row max|x| per device");
  if (magnitudes && magnitudes->shape != sorted->shape) magnitudes = nullptr;
  std::vector<std::string> per_device;
  int64_t bad = 0, unzeroed = 0;
  for (int64_t d = 0; d < devices; ++d) {
    const std::vector<float> ids = Row(*sorted, d), g = Row(*sizes, d);
    const auto kept = static_cast<int64_t>(std::accumulate(g.begin(), g.end(), 0.0));
    if (magnitudes)
      for (int64_t r = kept; r < rows; ++r)
        unzeroed += magnitudes->values()[static_cast<size_t>(d * rows + r)] != 0.0f;
    int64_t local_rows = 0;
    bool prefix = true;
    for (int64_t r = 0; r < rows; ++r) {
      const bool mine = ids[static_cast<size_t>(r)] < static_cast<float>(local);
      local_rows += mine;
      prefix &= mine == (r < kept);
    }
    bad += local_rows != kept || !prefix;
    per_device.push_back(fmt::format("{}/{}", kept, rows));
  }
  b.Checked(InvariantKind::kRingMaskKeepsLocalExperts, "moe.py:1189-1191, 1329-1330",
            "on every device the rows kept by arange(R) < sum(group_sizes) are exactly the rows "
            "whose rolled expert id < E_local; the rest are zeroed",
            "rolling by E_local*shard puts the device's own experts first in the sort, so the "
            "count of its rows is a prefix length",
            bad == 0 && unzeroed == 0,
            fmt::format("rows kept per device [{}] (E_local = {}); {} devices differ; {}",
                        fmt::join(per_device, ", "), local, bad,
                        magnitudes
                            ? fmt::format("{} masked rows of intermediate_output nonzero", unzeroed)
                            : std::string("row values not captured")));
  const Array* sources = Captured(captures, "ring token sources per device");
  const Array* roll = Captured(captures, "ring roll_to_expert_id per device");
  const TensorRecord* indices = trace.At(trace.top_k_indices);
  const auto k = indices ? DimSize(*indices, 'K') : std::nullopt;
  if (!sources || !roll || !k || sources->shape[0] != devices || roll->size() != devices) return;
  // Devices that gathered the same tokens form one expert-parallel group; devices of a group
  // with the same roll (tensor replicas) hold the same experts and count once.
  std::map<std::vector<float>, std::map<float, double>> groups;
  for (int64_t d = 0; d < devices; ++d) {
    const std::vector<float> g = Row(*sizes, d);
    groups[Row(*sources, d)].emplace(roll->values()[static_cast<size_t>(d)],
                                     std::accumulate(g.begin(), g.end(), 0.0));
  }
  std::vector<std::string> covered;
  int64_t short_groups = 0;
  for (const auto& [tokens, by_roll] : groups) {
    double total = 0;
    for (const auto& [r, n] : by_roll) total += n;
    const double want = static_cast<double>(tokens.size() / 2) * static_cast<double>(*k);
    short_groups += total != want;
    covered.push_back(fmt::format("{}/{}", FactValueText(total), FactValueText(want)));
  }
  b.Checked(InvariantKind::kRingGroupSizesCoverGroup, "moe.py:1173-1189",
            "per expert-parallel group, sum over its devices of sum(group_sizes) == the "
            "gathered tokens x K",
            "every device sees the whole group's tokens and keeps the choices of its own "
            "experts: together the group's devices take each (token, choice) once",
            short_groups == 0,
            fmt::format("{} groups, rows taken / (tokens x K) = [{}]", groups.size(),
                        fmt::join(covered, ", ")));
}

// ---------------------------------------------------------------------------------------
// Routing variants: DeepSeek's scaled weights and biased selection, Llama 4's unit combine
// weights, norm_topk_prob.

// True when some tensor named `name` in a scope ending with `tail` runs under `clause`.
bool HasConditioned(const Trace& trace, std::string_view name, std::string_view tail,
                    std::string_view clause) {
  return std::any_of(trace.tensors.begin(), trace.tensors.end(), [&](const TensorRecord& t) {
    return t.name == name && ScopeEndsWith(t.scope, tail) &&
           std::find(t.condition_clauses.begin(), t.condition_clauses.end(), clause) !=
               t.condition_clauses.end();
  });
}

// Per token, sum over k of top_k_weights: {tokens, K, min, max, max |sum - want|}.
struct WeightSums {
  int64_t tokens = 0, k = 0;
  double lo = 1e30, hi = -1e30, worst = 0;
};
std::optional<WeightSums> SumWeights(const Captures* captures, double want) {
  const Array* w = Captured(captures, "top_k_weights");
  if (!w || w->rank() != 3) return std::nullopt;
  WeightSums out;
  out.k = w->shape[2];
  out.tokens = w->shape[0] * w->shape[1];
  for (int64_t t = 0; t < out.tokens; ++t) {
    double sum = 0;
    for (int64_t j = 0; j < out.k; ++j) sum += w->values()[t * out.k + j];
    out.lo = std::min(out.lo, sum);
    out.hi = std::max(out.hi, sum);
    out.worst = std::max(out.worst, std::abs(sum - want));
  }
  return out;
}

void RoutingVariantInvariants(const Trace& trace, const Captures* captures, Builder& b) {
  const bool renormalized = HasConditioned(trace, "weights_sum", "get_topk", "norm_topk_prob");
  // bf16 rounds each of the K weights by at most 2^-9 of itself, twice.
  const double bf16 = std::ldexp(1.0, -7);
  const TensorRecord* factor = FindTensor(trace, "routed_scaling_factor", "deepseek_scale_weights");
  const bool normalized = FindTensor(trace, "weights_sum", "deepseek_scale_weights") != nullptr;
  if (factor && normalized && !renormalized) {
    const std::string statement =
        "sum over k of top_k_weights[b,s,:] == routed_scaling_factor for every token";
    const std::string reason =
        "deepseek_scale_weights divides the sigmoid scores by their sum, then scales them";
    const double f = factor->summary ? factor->summary->max : 0.0;
    const auto sums = factor->summary ? SumWeights(captures, f) : std::nullopt;
    if (!sums) {
      b.Unchecked(InvariantKind::kScaledWeightSum, "moe.py:558-564", statement, reason,
                  "no weight values (symbolic trace)");
    } else {
      b.Checked(InvariantKind::kScaledWeightSum, "moe.py:558-564", statement, reason,
                sums->worst <= f * bf16,
                fmt::format("routed_scaling_factor {}; per-token sums {}..{} over {} tokens, max "
                            "|difference| {} (tolerance {} = factor x 2^-7, bf16)",
                            Number(f), Number(sums->lo), Number(sums->hi), sums->tokens,
                            Number(sums->worst), Number(f * bf16)));
    }
  }
  if (FindTensor(trace, "top_k_values", "deepseek_routing")) {
    const std::string statement =
        "the K experts are the top K by biased score (gate_logits + bias; with routing "
        "groups, inside the groups kept by the same scores); their weights are the pre-bias "
        "scores, normalized";
    const std::string reason =
        "deepseek_routing runs top_k on the biased logits, then take_along_axis on "
        "pre_bias_logits: the bias steers the load, not the weighting";
    const Array* biased = Captured(captures, "gate_logits");
    const Array* pre = Captured(captures, "pre_bias_logits");
    const Array* idx = Captured(captures, "top_k_indices");
    const Array* w = Captured(captures, "top_k_weights");
    const Array* groups = Captured(captures, "group_mask");
    if (!biased || !pre || !idx || !w || biased->rank() != 3 || idx->shape != w->shape ||
        pre->shape != biased->shape) {
      b.Unchecked(InvariantKind::kBiasedSelection, "moe.py:616-620", statement, reason,
                  "no routing values (symbolic trace)");
    } else {
      const int64_t e = biased->shape[2], k = idx->shape[2];
      const int64_t tokens = idx->shape[0] * idx->shape[1];
      const int64_t g = groups && groups->rank() == 3 ? groups->shape[2] : 0;
      int64_t outranked = 0, differ_by_pre_bias = 0, groups_outranked = 0;
      double worst = 0;
      for (int64_t t = 0; t < tokens; ++t) {
        std::vector<bool> chosen(static_cast<size_t>(e), false);
        double lowest = 1e30, total_w = 0, total_p = 0;
        for (int64_t j = 0; j < k; ++j) {
          const auto c = static_cast<int64_t>(idx->values()[t * k + j]);
          chosen[static_cast<size_t>(c)] = true;
          lowest = std::min<double>(lowest, biased->values()[t * e + c]);
          total_w += w->values()[t * k + j];
          total_p += pre->values()[t * e + c];
        }
        for (int64_t c = 0; c < e; ++c) {
          const bool kept = g == 0 || groups->values()[t * g + c / (e / g)] != 0.0f;
          if (!chosen[static_cast<size_t>(c)] && kept && biased->values()[t * e + c] > lowest)
            ++outranked;
        }
        // The kept groups are the best by the sum of their two best biased scores.
        if (g > 0) {
          double worst_kept = 1e30, best_dropped = -1e30;
          for (int64_t group = 0; group < g; ++group) {
            std::vector<float> scores(biased->values().begin() + t * e + group * (e / g),
                                      biased->values().begin() + t * e + (group + 1) * (e / g));
            std::sort(scores.begin(), scores.end(), std::greater<>());
            const double top2 = scores.size() < 2 ? scores[0] : double{scores[0]} + scores[1];
            if (groups->values()[t * g + group] != 0.0f)
              worst_kept = std::min(worst_kept, top2);
            else
              best_dropped = std::max(best_dropped, top2);
          }
          groups_outranked += best_dropped > worst_kept + 1e-6;
        }
        for (int64_t j = 0; j < k; ++j) {
          const auto c = static_cast<int64_t>(idx->values()[t * k + j]);
          if (total_w != 0 && total_p != 0)
            worst = std::max(worst, std::abs(w->values()[t * k + j] / total_w -
                                             pre->values()[t * e + c] / total_p));
        }
        // Would the pre-bias scores have chosen differently? (Not an invariant: the bias's
        // effect on this run.)
        std::vector<int64_t> by_pre(static_cast<size_t>(e));
        std::iota(by_pre.begin(), by_pre.end(), 0);
        std::stable_sort(by_pre.begin(), by_pre.end(), [&](int64_t x, int64_t y) {
          return pre->values()[t * e + x] > pre->values()[t * e + y];
        });
        int64_t taken = 0;
        bool same = true;
        for (const int64_t c : by_pre) {
          const bool kept = g == 0 || groups->values()[t * g + c / (e / g)] != 0.0f;
          if (!kept) continue;
          if (taken++ == k) break;
          same &= chosen[static_cast<size_t>(c)];
        }
        differ_by_pre_bias += !same;
      }
      const std::string ranked_groups =
          g > 0 ? fmt::format(
                      "{} tokens keep a group whose two best biased scores sum lower "
                      "than a dropped group's; ",
                      groups_outranked)
                : "";
      b.Checked(InvariantKind::kBiasedSelection,
                g > 0 ? "moe.py:579-597, 616-620" : "moe.py:616-620", statement, reason,
                outranked == 0 && groups_outranked == 0 && worst <= bf16,
                fmt::format("{}{} unchosen kept experts outrank a chosen one; max |w/sum(w) - "
                            "p/sum(p)| {} (tolerance 2^-7); the pre-bias scores alone would "
                            "pick other experts for {} of {} tokens",
                            ranked_groups, outranked, Number(worst), differ_by_pre_bias, tokens));
    }
  }
  if (FindTensor(trace, "router_scores")) {
    const std::string statement =
        "Llama 4 combines each (token, choice) with weight 1: the weight-sum's weights are all "
        "ones";
    const std::string reason =
        "the routing score already scaled the inputs (sigmoid of the top logit); unpermute "
        "replaces the weights with ones_like";
    const Array* sparse = Captured(captures, "weight_sum weights per device");
    const Array* dense = Captured(captures, "weights");
    const Array* w = sparse ? sparse : dense;
    if (!w) {
      b.Unchecked(InvariantKind::kUnitCombineWeights, "moe.py:708-710, 1946-1947", statement,
                  reason, "no weight-sum values");
    } else {
      const auto ones = std::count(w->values().begin(), w->values().end(), 1.0f);
      const auto zeros = std::count(w->values().begin(), w->values().end(), 0.0f);
      // Sparse: [devices, T, K], every entry 1. Dense: the ones scattered into [B,S,E].
      const bool holds = sparse ? ones == w->size() : ones + zeros == w->size();
      b.Checked(InvariantKind::kUnitCombineWeights, sparse ? "moe.py:708-710" : "moe.py:1946-1947",
                statement, reason, holds,
                fmt::format("{} of {} {} weights are 1{}", ones, w->size(),
                            sparse ? "(token, choice)" : "[B,S,E]",
                            sparse ? "" : fmt::format(", {} are 0", zeros)));
    }
  }
  if (renormalized) {
    const std::string statement = "sum over k of top_k_weights[b,s,:] == 1 for every token";
    const std::string reason = "norm_topk_prob divides the K weights by their sum";
    const auto sums = SumWeights(captures, 1.0);
    if (!sums) {
      b.Unchecked(InvariantKind::kNormalizedWeights, "moe.py:554-555", statement, reason,
                  "no weight values (symbolic trace)");
    } else {
      b.Checked(InvariantKind::kNormalizedWeights, "moe.py:554-555", statement, reason,
                sums->worst <= bf16,
                fmt::format("per-token sums {}..{} over {} tokens, max |difference| {} "
                            "(tolerance 2^-7, bf16)",
                            Number(sums->lo), Number(sums->hi), sums->tokens, Number(sums->worst)));
    }
  }
}

// ---------------------------------------------------------------------------------------
// RoutedAndSharedMoE: the block's output is the sum of its two parts.

void SharedInvariants(const Trace& trace, const Captures* captures, Builder& b) {
  if (trace.block != "moe" || !FindTensor(trace, "output", "shared_experts")) return;
  const std::string statement = "output == routed_experts + shared_experts, elementwise";
  const std::string reason =
      "RoutedAndSharedMoE runs the shared MlpBlock on every token beside the routed experts "
      "and adds the two outputs";
  const Array* out = Captured(captures, "output");
  const Array* routed = Captured(captures, "routed_experts output");
  const Array* shared = Captured(captures, "shared_experts output");
  if (!out || !routed || !shared || routed->shape != out->shape || shared->shape != out->shape) {
    b.Unchecked(InvariantKind::kRoutedPlusShared, "moe.py:2180-2181", statement, reason,
                "no output values (symbolic trace)");
    return;
  }
  double worst = 0;
  for (int64_t i = 0; i < out->size(); ++i) {
    const float sum = RoundTo(out->dtype, routed->values()[i] + shared->values()[i]);
    worst = std::max(worst, static_cast<double>(std::abs(out->values()[i] - sum)));
  }
  b.Checked(InvariantKind::kRoutedPlusShared, "moe.py:2180-2181", statement, reason, worst == 0.0,
            fmt::format("max |output - {}(routed + shared)| = {} over {} elements (exact)",
                        ToString(out->dtype), Number(worst), out->size()));
}

// ---------------------------------------------------------------------------------------
// Paths that must give another path's output: the masked loop (dense dropless) and the ring
// (the all-to-all path), compared with a run of that path on the same seed.

// `rounded_partials`: the path sums per-device partial outputs already rounded to a 16-bit
// dtype (the ring's psum_scatter), so it may differ from a single rounding by an ulp or two.
void MatchesReference(const Captures* captures, const ReferenceRun* reference, InvariantKind kind,
                      const std::string& source, const std::string& other,
                      const std::string& reason, bool rounded_partials, Builder& b) {
  const Array* out = Captured(captures, "output");
  const bool narrow = out && (out->dtype == DType::kBfloat16 || out->dtype == DType::kFloat16);
  const bool ulps = rounded_partials && narrow;
  const std::string bound =
      ulps ? fmt::format("2^-7 x max|output| ({} partial sums)", ToString(out->dtype))
           : std::string("1e-05");
  const std::string statement =
      fmt::format("max |output - {} output| <= {} on the same inputs and weights", other, bound);
  const Array* theirs = reference ? Captured(reference->captures, "output") : nullptr;
  if (!out || !theirs) {
    b.Unchecked(kind, source, statement, reason, fmt::format("no {} run to compare with", other));
    return;
  }
  // The same seed gives the same inputs and weights only for the same dims: the gate logits
  // agree exactly when they do.
  const Array* logits = Captured(captures, "gate_logits");
  const Array* their_logits = Captured(reference->captures, "gate_logits");
  const bool same_inputs = logits && their_logits && logits->values() == their_logits->values();
  const bool comparable = out->shape == theirs->shape;
  double worst = 0, largest = 0;
  if (comparable)
    for (int64_t i = 0; i < out->size(); ++i) {
      worst =
          std::max(worst, static_cast<double>(std::abs(out->values()[i] - theirs->values()[i])));
      largest = std::max(largest, static_cast<double>(std::abs(theirs->values()[i])));
    }
  const double tolerance = ulps ? std::ldexp(largest, -7) : 1e-5;
  b.Checked(kind, source, statement, reason, same_inputs && comparable && worst <= tolerance,
            fmt::format("max |difference| {} over {} elements (tolerance {}) against {}{}",
                        Number(worst), out->size(), Number(tolerance), reference->label,
                        same_inputs ? "" : " (gate_logits differ: not the same inputs)"));
}

void MaskedLoopInvariants(const Trace& trace, const Captures* captures,
                          const ReferenceRun* reference, Builder& b) {
  const bool loop =
      std::any_of(trace.tensors.begin(), trace.tensors.end(), [](const TensorRecord& t) {
        return ScopeEndsWith(t.scope, "masked_loop") ||
               t.scope.find("/masked_loop/") != std::string::npos;
      });
  if (!loop) return;
  MatchesReference(captures, reference, InvariantKind::kMaskedLoopMatchesDropless,
                   "sparse-moe-jax-port.md; moe.py:1914-1948", "dense_matmul dropless",
                   "the loop weights every expert's output by its routing weight masked to the "
                   "chosen experts: the dropless weight-sum, one expert at a time",
                   /*rounded_partials=*/false, b);
}

void RingReferenceInvariant(const Captures* captures, const ReferenceRun* reference, Builder& b) {
  if (!Captured(captures, "ring sorted_experts per device")) return;
  MatchesReference(captures, reference, InvariantKind::kRingMatchesAllToAll,
                   "moe.py:1173-1191, 1341-1344 against 1217, 1369", "the all-to-all path's",
                   "both run every (token, choice) row through its expert once and weight-sum "
                   "it at its token; only where the rows travel differs (the ring's "
                   "psum_scatter adds each device's output after its cast to dtype)",
                   /*rounded_partials=*/true, b);
}

}  // namespace

std::vector<Invariant> TraceInvariants(const Trace& trace, const Captures* captures,
                                       const ReferenceRun* reference) {
  std::vector<Invariant> out;
  Builder b(out);
  ShapeInvariant(trace, b);
  BytesInvariant(trace, b);
  RoutingInvariant(trace, b);
  ChoiceInvariants(trace, captures, b);
  CapacityInvariants(trace, captures, b);
  TrainingCombineInvariant(trace, captures, b);
  AllToAllInvariants(trace, b);
  MlpInvariants(trace, b);
  DroplessInvariants(trace, captures, b);
  SubgroupInvariants(trace, captures, b);
  SparseSortInvariants(trace, captures, b);
  DecodeInvariants(trace, captures, b);
  TensorParallelInvariants(trace, b);
  TensorTransposeInvariants(trace, b);
  RingInvariants(trace, captures, b);
  RingReferenceInvariant(captures, reference, b);
  RoutingVariantInvariants(trace, captures, b);
  SharedInvariants(trace, captures, b);
  MaskedLoopInvariants(trace, captures, reference, b);
  return out;
}

std::vector<Invariant> SectionInvariants(const Trace& trace, const Captures& captures,
                                         const std::string& run, bool routing) {
  std::vector<Invariant> all;
  Builder b(all);
  if (routing) {
    RoutingInvariant(trace, b);
    ChoiceInvariants(trace, &captures, b);
    RoutingVariantInvariants(trace, &captures, b);
  }
  TensorTransposeInvariants(trace, b);
  for (Invariant& inv : all) inv.run = run;
  return all;
}

}  // namespace shardtrace
