#include "emit/trace_invariants.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <numeric>
#include <optional>
#include <set>

#include "emit/fact_text.h"

namespace shardtrace {
namespace {

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

Invariant Checked(std::string statement, std::string reason, bool holds, std::string detail) {
  return Invariant{std::move(statement), std::move(reason),
                   (holds ? "holds: " : "VIOLATED: ") + detail, !holds};
}

Invariant Unchecked(std::string statement, std::string reason, std::string why_not) {
  return Invariant{std::move(statement), std::move(reason), "not evaluated: " + why_not, false};
}

// Every block maps its [B,S,M] input to an output of the same shape.
void ShapeInvariant(const Trace& trace, std::vector<Invariant>& out) {
  const TensorRecord* in = trace.At(trace.input);
  const TensorRecord* result = trace.At(trace.output);
  if (!in || !result) return;
  out.push_back(Checked(
      "output.shape == inputs.shape",
      "the block is a residual-branch layer: [B,S,M] in, [B,S,M] out", in->shape == result->shape,
      fmt::format("{} == {}", ShapeToString(result->shape), ShapeToString(in->shape))));
}

// A placed tensor's bytes per device are its local block's elements times the dtype size.
void BytesInvariant(const Trace& trace, std::vector<Invariant>& out) {
  int placed = 0;
  std::vector<std::string> bad;
  for (const TensorRecord& t : trace.tensors) {
    if (t.constraint == Constraint::kNone) continue;
    ++placed;
    if (t.bytes_per_device != NumElements(t.local_shape) * ByteSize(t.dtype))
      bad.push_back(fmt::format("{} ({} in {})", t.name, t.bytes_per_device, t.scope));
  }
  if (placed == 0) return;
  out.push_back(Checked(
      "bytes_per_device == prod(local_shape) * sizeof(dtype) for every placed tensor",
      "a constraint or shard_map spec fixes the per-device block; its bytes follow", bad.empty(),
      bad.empty() ? fmt::format("{} placed tensors", placed)
                  : fmt::format("{}", fmt::join(bad, ", "))));
}

// Top-k routes every token to exactly K experts.
void RoutingInvariant(const Trace& trace, std::vector<Invariant>& out) {
  const TensorRecord* in = trace.At(trace.input);
  const TensorRecord* indices = trace.At(trace.top_k_indices);
  if (!in || !indices) return;
  const std::string statement = "sum(tokens per expert) == B*S*K";
  const std::string reason = "top_k picks exactly K distinct experts for each of the B*S tokens";
  const Fact* per_expert = trace.FindFact(FactKind::kTokensPerExpert);
  const auto b = DimSize(*in, 'B'), s = DimSize(*in, 'S'), k = DimSize(*indices, 'K');
  if (!per_expert || !b || !s || !k) {
    out.push_back(Unchecked(statement, reason, "symbolic trace (no routing counts)"));
    return;
  }
  const double total = Sum(per_expert->values);
  out.push_back(
      Checked(statement, reason, total == static_cast<double>(*b * *s * *k),
              fmt::format("sum({}) = {}, B*S*K = {}*{}*{} = {}", Vector(per_expert->values),
                          FactValueText(total), *b, *s, *k, *b * *s * *k)));
}

// dense_matmul with capacity: the masks and the drop counts agree.
void CapacityInvariants(const Trace& trace, const std::map<std::string, Array>* captures,
                        std::vector<Invariant>& out) {
  const TensorRecord* dispatch = trace.At(trace.dispatch_mask);
  const TensorRecord* combine = trace.At(trace.combine_mask);
  if (!dispatch || !combine) return;
  {
    const std::string statement = "dispatch_mask == (combine_mask != 0)";
    const std::string reason =
        "dispatch_mask is combine_mask cast to bool: a slot is dispatched iff it has a weight";
    if (dispatch->summary && combine->summary) {
      out.push_back(Checked(
          statement + ", so nnz(dispatch_mask) == nnz(combine_mask)", reason,
          dispatch->summary->nonzeros == combine->summary->nonzeros,
          fmt::format("{} == {}", dispatch->summary->nonzeros, combine->summary->nonzeros)));
    } else {
      out.push_back(Unchecked(statement, reason, "symbolic trace"));
    }
  }
  const Fact* capacity = trace.FindFact(FactKind::kExpertCapacity);
  const auto c = DimSize(*dispatch, 'C');
  if (capacity && c && !capacity->values.empty())
    out.push_back(Checked("C (the masks' last dim) == expert_capacity_per_batch",
                          "one mask slot per unit of capacity", *c == capacity->values[0],
                          fmt::format("{} == {}", *c, FactValueText(capacity->values[0]))));
  const Fact* routed = trace.FindFact(FactKind::kTokensPerExpert);
  const Fact* dropped = trace.FindFact(FactKind::kTokensDroppedPerExpert);
  if (routed && dropped && dispatch->summary) {
    const double kept = Sum(routed->values) - Sum(dropped->values);
    out.push_back(Checked(
        "nnz(dispatch_mask) == sum(tokens per expert) - sum(tokens dropped)",
        "a routed choice either gets a slot or is dropped by capacity",
        static_cast<double>(dispatch->summary->nonzeros) == kept,
        fmt::format("{} == {} - {}", dispatch->summary->nonzeros,
                    FactValueText(Sum(routed->values)), FactValueText(Sum(dropped->values)))));
  }
  const std::string one_per_slot = "each (batch, expert, slot) holds at most one token";
  const std::string fcfs =
      "slots fill first come, first served: within an expert, a later token never gets an "
      "earlier slot";
  const Array* mask = nullptr;
  if (captures) {
    const auto found = captures->find("dispatch_mask");
    if (found != captures->end() && found->second.numeric() && found->second.rank() == 4)
      mask = &found->second;
  }
  if (!mask) {
    out.push_back(Unchecked(one_per_slot, "the slot index is the token's arrival count",
                            "no mask values (symbolic trace)"));
    return;
  }
  const Array& m = *mask;
  const int64_t nb = m.shape[0], ns = m.shape[1], ne = m.shape[2], nc = m.shape[3];
  const auto at = [&](int64_t b, int64_t s, int64_t e, int64_t c) {
    return m.values()[((b * ns + s) * ne + e) * nc + c] != 0.0f;
  };
  int64_t crowded = 0, out_of_order = 0;
  for (int64_t b = 0; b < nb; ++b)
    for (int64_t e = 0; e < ne; ++e) {
      int64_t last_token = -1;
      for (int64_t c = 0; c < nc; ++c) {
        int64_t holders = 0;
        for (int64_t s = 0; s < ns; ++s) {
          if (!at(b, s, e, c)) continue;
          ++holders;
          if (s <= last_token) ++out_of_order;
          last_token = s;
        }
        crowded += holders > 1;
      }
    }
  out.push_back(Checked(
      one_per_slot, "the slot index is the token's arrival count at the expert", crowded == 0,
      fmt::format("{} of {} slots hold more than one token", crowded, nb * ne * nc)));
  out.push_back(Checked(fcfs, "positions come from a cumulative sum over tokens in order",
                        out_of_order == 0,
                        fmt::format("{} out-of-order assignments in {} batch rows x {} experts",
                                    out_of_order, nb, ne)));
}

// ragged_all_to_all: every row one device sends is received once, and comes back. The
// send matrices are [device, peer]; with several expert-parallel groups (fsdp x expert)
// peer p of device d is a different device per group, so the per-device receive checks
// that need that mapping run only when the whole mesh is one group (a square matrix).
void AllToAllInvariants(const Trace& trace, std::vector<Invariant>& out) {
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
    out.push_back(Checked("every embedding chunk's rows_sent matrix is the same",
                          "chunks split M, not tokens: each chunk routes the same rows", same,
                          fmt::format("{} chunks", forward.size())));
  }
  const Fact* fill = trace.FindFact(FactKind::kRaggedBufferFill);
  if (fill && fill->values.size() == devices)
    out.push_back(
        Checked("sum(rows_sent) == sum(ragged buffer fill)",
                "ragged_all_to_all writes every row a peer sends into the receiver's "
                "buffer, once",
                Sum(fill->values) == total,
                fmt::format("{} == {}", FactValueText(total), FactValueText(Sum(fill->values)))));
  if (fill && fill->values.size() == devices && devices == peers) {
    std::vector<double> received(devices, 0.0);
    for (size_t d = 0; d < devices; ++d)
      for (size_t p = 0; p < peers; ++p) received[p] += x[d][p];
    out.push_back(Checked("ragged buffer fill[d] == sum over peers p of rows_sent[p, d]",
                          "one expert-parallel group: peer p is device p", fill->values == received,
                          fmt::format("{} == {}", Vector(fill->values), Vector(received))));
  }
  const Fact* rows = trace.FindFact(FactKind::kRaggedBufferRows);
  if (fill && rows && !rows->values.empty()) {
    const double most = *std::max_element(fill->values.begin(), fill->values.end());
    out.push_back(Checked(
        "rows received by any device <= ragged buffer rows",
        "rows beyond the buffer would be lost (get_ragged_buffer_size)", most <= rows->values[0],
        fmt::format("max {} <= {}", FactValueText(most), FactValueText(rows->values[0]))));
  }
  const Fact* groups = trace.FindFact(FactKind::kGroupSizesPerDevice);
  if (fill && groups && groups->shape.size() == 2 &&
      static_cast<size_t>(groups->shape[0]) == fill->values.size()) {
    std::vector<double> per_device;
    for (const auto& row : Matrix(*groups)) per_device.push_back(Sum(row));
    out.push_back(Checked("sum over local experts of group_sizes[d, :] == ragged buffer fill[d]",
                          "every received row belongs to exactly one local expert's gmm group",
                          per_device == fill->values,
                          fmt::format("{} == {}", Vector(per_device), Vector(fill->values))));
  }
  const Fact* back = trace.FindFact(FactKind::kRowsSent, "intermediate_output");
  if (!back) return;
  out.push_back(Checked(
      "sum(rows_sent_back) == sum(rows_sent)",
      "the return all-to-all sends every expert output row home", Sum(back->values) == total,
      fmt::format("{} == {}", FactValueText(Sum(back->values)), FactValueText(total))));
  const auto y = Matrix(*back);
  if (fill && y.size() == devices) {
    std::vector<double> returned;
    for (const auto& row : y) returned.push_back(Sum(row));
    out.push_back(Checked("sum over peers of rows_sent_back[d, :] == ragged buffer fill[d]",
                          "a device returns exactly the rows it received", returned == fill->values,
                          fmt::format("{} == {}", Vector(returned), Vector(fill->values))));
  }
  if (devices == peers && y.size() == devices) {
    bool transposed = true;
    for (size_t d = 0; d < devices; ++d)
      for (size_t p = 0; p < peers; ++p) transposed &= y[d].size() == peers && y[d][p] == x[p][d];
    out.push_back(Checked("rows_sent_back[d, p] == rows_sent[p, d]",
                          "each row goes back to the device its token came from", transposed,
                          fmt::format("{} x {} send matrices", devices, peers)));
  }
}

}  // namespace

// The routing itself, read from the run's top-k arrays: each token's K choices are
// distinct experts with non-negative weights, and under DeepSeek's group-limited routing
// every choice lies in one of the token's kept groups.
void ChoiceInvariants(const Trace& trace, const std::map<std::string, Array>* captures,
                      std::vector<Invariant>& out) {
  if (!captures) return;
  const auto indices = captures->find("top_k_indices");
  const auto weights = captures->find("top_k_weights");
  if (indices == captures->end() || indices->second.rank() != 3) return;
  const Array& idx = indices->second;
  const int64_t k = idx.shape[2], tokens = idx.shape[0] * idx.shape[1];
  int64_t repeated = 0;
  for (int64_t t = 0; t < tokens; ++t) {
    std::set<float> seen;
    for (int64_t j = 0; j < k; ++j) seen.insert(idx.values()[t * k + j]);
    repeated += static_cast<int64_t>(seen.size()) != k;
  }
  out.push_back(Checked("every token's K choices are K distinct experts",
                        "top_k picks K different indices of the expert axis", repeated == 0,
                        fmt::format("{} of {} tokens repeat an expert", repeated, tokens)));
  // Llama 4 keeps the raw top logit as its weight (the sigmoid comes in permute): any sign.
  const bool raw_logits =
      std::any_of(trace.tensors.begin(), trace.tensors.end(),
                  [](const TensorRecord& t) { return t.name == "router_scores"; });
  if (!raw_logits && weights != captures->end() && weights->second.shape == idx.shape) {
    const std::vector<float>& w = weights->second.values();
    const float lowest = w.empty() ? 0.0f : *std::min_element(w.begin(), w.end());
    out.push_back(Checked("top_k_weights >= 0",
                          "the weights are softmax or sigmoid scores (normalized or scaled by "
                          "positive factors)",
                          lowest >= 0.0f, fmt::format("min {:.4g}", lowest)));
  }
  const auto mask = captures->find("group_mask");
  const auto logits = captures->find("gate_logits");
  if (mask == captures->end() || logits == captures->end() || mask->second.rank() != 3) return;
  const int64_t groups = mask->second.shape[2], experts = logits->second.shape[2];
  if (groups == 0 || experts % groups != 0) return;
  int64_t outside = 0;
  for (int64_t t = 0; t < tokens; ++t)
    for (int64_t j = 0; j < k; ++j) {
      const auto e = static_cast<int64_t>(idx.values()[t * k + j]);
      outside += mask->second.values()[t * groups + e / (experts / groups)] == 0.0f;
    }
  out.push_back(Checked("group_mask[token, expert / (E/G)] == 1 for every chosen expert",
                        "expert_group_mask sets the scores outside the kept groups to -inf "
                        "before top-k",
                        outside == 0,
                        fmt::format("{} of {} choices outside kept groups", outside, tokens * k)));
}

std::vector<Invariant> TraceInvariants(const Trace& trace,
                                       const std::map<std::string, Array>* captures) {
  std::vector<Invariant> out;
  ShapeInvariant(trace, out);
  BytesInvariant(trace, out);
  RoutingInvariant(trace, out);
  ChoiceInvariants(trace, captures, out);
  CapacityInvariants(trace, captures, out);
  AllToAllInvariants(trace, out);
  return out;
}

}  // namespace shardtrace
