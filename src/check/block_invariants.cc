// The invariants of blocks around the routed experts: MlpBlock, the shared experts, and the paths
// checked against a reference run (masked loop, ring).
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <numeric>
#include <optional>
#include <set>
#include <string_view>

#include "check/invariant_support.h"
#include "ir/fact_text.h"

namespace shardtrace::invariant_internal {

// ---------------------------------------------------------------------------------------
// MlpBlock (linears.py, also the shared experts): the hidden activation is pinned before wo,
// and wo's contraction over F is local only where F is whole.

void MlpInvariants(const Trace& trace, const SpmdResult& spmd, Builder& b) {
  for (const OpRecord& op : trace.ops) {
    if (op.kind != OpKind::kEinsum || op.inputs.size() != 2 || op.outputs.empty()) continue;
    const TensorRecord& x = trace.tensors[op.inputs[0]];
    const TensorRecord& wo = trace.tensors[op.inputs[1]];
    if (x.dims != "BSF" || wo.dims != "FM") continue;
    const std::string source =
        op.scope.find("shared_experts") != std::string::npos
            ? "linears.py MlpBlock, called at " + Ref(trace, {S::kSharedExpertsCall})
            : "linears.py MlpBlock";
    const PartitionSpec* xs = spmd.SpecOf(x);
    const PartitionSpec* ws = spmd.SpecOf(wo);
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
      for (const ImpliedCollective& c : spmd.implied_at(op.id))
        if (c.tensor == t.id && c.kind != CollectiveKind::kPsum &&
            c.kind != CollectiveKind::kPsumScatter)
          return EntryAt(&c.to, dim);
      return EntryAt(spmd.SpecOf(t), dim);
    };
    const PartitionSpec::Entry fx = read_f(x, 2), fw = read_f(wo, 0);
    std::set<std::string> both;
    for (const std::string& axis : fx)
      if (std::find(fw.begin(), fw.end(), axis) != fw.end()) both.insert(axis);
    std::set<std::string> reduced;
    int64_t reduce_bytes = 0;
    for (const ImpliedCollective& c : spmd.implied_at(op.id))
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
// RoutedAndSharedMoE: the block's output is the sum of its two parts.

void SharedInvariants(const Trace& trace, const Captures* captures, Builder& b) {
  if (trace.block != "moe" || !FindTensor(trace, "output", "shared_experts")) return;
  const std::string statement = "output == routed_experts + shared_experts, elementwise";
  const std::string reason =
      "RoutedAndSharedMoE runs the shared MlpBlock on every token beside the routed experts "
      "and adds the two outputs";
  const Array* out = Captured(captures, Capture::kOutput);
  const Array* routed = Captured(captures, Capture::kRoutedExpertsOutput);
  const Array* shared = Captured(captures, Capture::kSharedExpertsOutput);
  if (!out || !routed || !shared || routed->shape != out->shape || shared->shape != out->shape) {
    b.Unchecked(InvariantKind::kRoutedPlusShared, Ref(trace, {S::kSharedExpertsSum}), statement,
                reason, "no output values (symbolic trace)");
    return;
  }
  double worst = 0;
  for (int64_t i = 0; i < out->size(); ++i) {
    const float sum = RoundTo(out->dtype, routed->values()[i] + shared->values()[i]);
    worst = std::max(worst, static_cast<double>(std::abs(out->values()[i] - sum)));
  }
  b.Checked(InvariantKind::kRoutedPlusShared, Ref(trace, {S::kSharedExpertsSum}), statement, reason,
            worst == 0.0,
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
  const Array* out = Captured(captures, Capture::kOutput);
  const bool narrow = out && (out->dtype == DType::kBfloat16 || out->dtype == DType::kFloat16);
  const bool ulps = rounded_partials && narrow;
  const std::string bound =
      ulps ? fmt::format("2^-7 x max|output| ({} partial sums)", ToString(out->dtype))
           : std::string("1e-05");
  const std::string statement =
      fmt::format("max |output - {} output| <= {} on the same inputs and weights", other, bound);
  const Array* theirs = reference ? Captured(reference->captures, Capture::kOutput) : nullptr;
  if (!out || !theirs) {
    b.Unchecked(kind, source, statement, reason, fmt::format("no {} run to compare with", other));
    return;
  }
  // The same seed gives the same inputs and weights only for the same dims: the gate logits
  // agree exactly when they do.
  const Array* logits = Captured(captures, Capture::kGateLogits);
  const Array* their_logits = Captured(reference->captures, Capture::kGateLogits);
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
                   "sparse-moe-jax-port.md; " + Ref(trace, {S::kDroplessBody}),
                   "dense_matmul dropless",
                   "the loop weights every expert's output by its routing weight masked to the "
                   "chosen experts: the dropless weight-sum, one expert at a time",
                   /*rounded_partials=*/false, b);
}

void RingReferenceInvariant(const Trace& trace, const Captures* captures,
                            const ReferenceRun* reference, Builder& b) {
  if (!Captured(captures, Capture::kRingSortedExpertsPerDevice)) return;
  MatchesReference(captures, reference, InvariantKind::kRingMatchesAllToAll,
                   Ref(trace, {S::kRingRouteMasked, S::kRingPsumScatter}) + " against " +
                       MoeLines(trace.revision, S::kRaggedAllToAll) + ", " +
                       MoeLines(trace.revision, S::kReturnRaggedAllToAll),
                   "the all-to-all path's",
                   "both run every (token, choice) row through its expert once and weight-sum "
                   "it at its token; only where the rows travel differs (the ring's "
                   "psum_scatter adds each device's output after its cast to dtype)",
                   /*rounded_partials=*/true, b);
}

}  // namespace shardtrace::invariant_internal
