// Each path-specific invariant on a real numeric run of its page's config: it holds there,
// and a deliberately broken capture or trace record (one value changed) makes it report a
// violation instead of passing silently.
#include "check/trace_invariants.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <functional>
#include <string>
#include <vector>

#include "paths/moe_block.h"
#include "paths/moe_params.h"
#include "paths/moe_setup.h"
#include "run/run.h"
#include "test_support.h"

namespace shardtrace {
namespace {

RunResult NumericRun(const std::vector<std::string>& args, int64_t devices,
                     Block block = Block::kMoe, bool masked_loop = false) {
  return testing::SeededRun(args, devices, block, masked_loop);
}

std::vector<std::string> Small(std::initializer_list<std::string> more) {
  std::vector<std::string> args = testing::SmallMoeDims();
  args.insert(args.end(), more);
  return args;
}

// The invariant of `kind` (exactly one) evaluated on `run`.
Invariant Evaluate(const RunResult& run, InvariantKind kind,
                   const ReferenceRun* reference = nullptr) {
  std::vector<Invariant> found;
  for (const Invariant& inv : TraceInvariants(run.trace, run.spmd, &run.captures, reference))
    if (inv.kind == kind) found.push_back(inv);
  INFO(ToString(kind));
  REQUIRE(found.size() == 1);
  return found.front();
}

// `kind` holds on `run` and is violated once `brake` has changed one value of a copy.
void HoldsThenBreaks(const RunResult& run, InvariantKind kind,
                     const std::function<void(RunResult&)>& brake) {
  const Invariant good = Evaluate(run, kind);
  INFO(ToString(kind) << ": " << good.statement << " -> " << good.result);
  CHECK(good.result.rfind("holds: ", 0) == 0);
  CHECK_FALSE(good.violated);
  CHECK_FALSE(good.source.empty());
  RunResult broken = run;
  brake(broken);
  const Invariant bad = Evaluate(broken, kind);
  INFO("broken: " << bad.result);
  CHECK(bad.violated);
  CHECK(bad.result.rfind("VIOLATED: ", 0) == 0);
}

// Corrupts a capture the way a broken path would: the test edits its own copy of the run.
std::vector<float>& Values(RunResult& run, Capture id) {
  INFO("capture " << CaptureName(id));
  REQUIRE(run.captures.Has(id));
  return run.captures.Mutable(id).mutable_values();
}

TensorRecord& Tensor(RunResult& run, const std::string& name, const std::string& dims) {
  for (TensorRecord& t : run.trace.tensors)
    if (t.name == name && t.dims == dims) return t;
  FAIL("no tensor " << name << " " << dims);
  throw;
}

OpRecord& EinsumOp(RunResult& run, const std::string& equation) {
  for (OpRecord& op : run.trace.ops)
    if (op.kind == OpKind::kEinsum && op.equation == equation) return op;
  FAIL("no einsum " << equation);
  throw;
}

Fact& FactOf(RunResult& run, FactKind kind, const std::string& subject = "") {
  for (Fact& f : run.trace.facts)
    if (f.kind == kind && (subject.empty() || f.subject == subject)) return f;
  FAIL("no fact " << ToString(kind));
  throw;
}

}  // namespace

TEST_CASE("MlpBlock: the hidden constraint and the all-reduce of the F-sharded wo",
          "[invariants]") {
  const RunResult run =
      NumericRun({"base_emb_dim=16", "base_mlp_dim=32", "base_moe_mlp_dim=32",
                  "max_target_length=4", "per_device_batch_size=1", "ici_tensor_parallelism=2"},
                 4, Block::kMlp);
  CHECK(Evaluate(run, InvariantKind::kMlpContractionAllReduce).result ==
        "holds: F over 'tensor' in x and wo; all-reduce over 'tensor', 256 B per device");
  HoldsThenBreaks(run, InvariantKind::kMlpHiddenConstrained, [](RunResult& r) {
    r.trace.tensors[EinsumOp(r, "BSF,FM->BSM").inputs[0]].constraint = Constraint::kNone;
  });
  // Without the all-reduce the partial sums would be the output.
  HoldsThenBreaks(run, InvariantKind::kMlpContractionAllReduce,
                  [](RunResult& r) { r.spmd.implied[EinsumOp(r, "BSF,FM->BSM").id].clear(); });
}

TEST_CASE("dense dropless: the [B,S,E] weights and every expert on every token", "[invariants]") {
  const RunResult run =
      NumericRun(Small({"num_experts=4", "sparse_matmul=false", "ici_expert_parallelism=2"}), 4);
  HoldsThenBreaks(run, InvariantKind::kDroplessEveryExpert,
                  [](RunResult& r) { Tensor(r, "layer_w0", "BSEH").shape[2] = 3; });
  // A weight on an expert the token did not choose: both the sums and the zeros break.
  const auto stray = [](RunResult& r) {
    const float chosen = r.captures.At(Capture::kTopKIndices).values()[0];
    std::vector<float>& w = Values(r, Capture::kWeights);
    w[chosen == 0.0f ? 1 : 0] += 0.25f;
  };
  HoldsThenBreaks(run, InvariantKind::kDroplessWeightSum, stray);
  HoldsThenBreaks(run, InvariantKind::kDroplessUnchosenZero, stray);
}

TEST_CASE("dense dropping in training: the combine mask holds the kept top-k weights",
          "[invariants]") {
  const RunResult run = NumericRun(Small({"num_experts=4", "sparse_matmul=false",
                                          "capacity_factor=1", "ici_expert_parallelism=2"}),
                                   4);
  HoldsThenBreaks(run, InvariantKind::kCombineHoldsTopKWeights, [](RunResult& r) {
    std::vector<float>& combine = Values(r, Capture::kCombineMask);
    for (float& v : combine)
      if (v != 0.0f) {
        v *= 0.5f;
        return;
      }
  });
}

TEST_CASE("dense dropping in inference: subgroup slots, softmax combine, output reshape",
          "[invariants]") {
  const RunResult run =
      NumericRun(Small({"num_experts=4", "sparse_matmul=false", "capacity_factor=1",
                        "model_call_mode=inference", "ici_expert_parallelism=2"}),
                 4);
  HoldsThenBreaks(run, InvariantKind::kSubgroupOutputReshape,
                  [](RunResult& r) { r.trace.tensors[r.trace.output].shape[1] = 5; });
  // A token moved from slot 0 to slot 1 of its expert: slot 0 is left empty.
  HoldsThenBreaks(run, InvariantKind::kSubgroupPositions, [](RunResult& r) {
    std::vector<float>& mask = Values(r, Capture::kDispatchMask);  // [B,S,E,C=2]
    for (size_t i = 0; i < mask.size(); i += 2)
      if (mask[i] != 0.0f && mask[i + 1] == 0.0f) {
        std::swap(mask[i], mask[i + 1]);
        return;
      }
    FAIL("no token in slot 0 with slot 1 free");
  });
  HoldsThenBreaks(run, InvariantKind::kSubgroupCombineSoftmax, [](RunResult& r) {
    for (float& p : Values(r, Capture::kSoftmaxProbs)) p *= 1.5f;
  });
}

TEST_CASE("dense dropping in inference with two context groups: slots restart per group",
          "[invariants]") {
  const RunResult run =
      NumericRun(Small({"num_experts=4", "sparse_matmul=false", "capacity_factor=1",
                        "model_call_mode=inference", "ici_context_autoregressive_parallelism=2"}),
                 2);
  REQUIRE(run.trace.At(run.trace.dispatch_mask)->shape == Shape({2, 2, 2, 4, 1}));
  // Read per (b, n) group, two tokens in slot 0 of one batch row are not a collision.
  for (const Invariant& inv : TraceInvariants(run.trace, run.spmd, &run.captures)) {
    INFO(ToString(inv.kind) << ": " << inv.result);
    CHECK(inv.result.rfind("holds: ", 0) == 0);
  }
  HoldsThenBreaks(run, InvariantKind::kSubgroupPositions, [](RunResult& r) {
    for (float& slot : Values(r, Capture::kDispatchMask)) slot = 0.0f;  // every choice dropped
  });
}

TEST_CASE("sparse megablox at EP=1: the per-device sort, its inverse, local rows", "[invariants]") {
  const RunResult run = NumericRun(Small({"num_experts=4"}), 4);
  HoldsThenBreaks(run, InvariantKind::kSortedExpertsNonDecreasing, [](RunResult& r) {
    std::vector<float>& experts = Values(r, Capture::kSortedExpertsPerDevice);
    std::reverse(experts.begin(), experts.begin() + 8);  // device 0's 8 rows, descending
  });
  HoldsThenBreaks(run, InvariantKind::kUnsortInvertsSort, [](RunResult& r) {
    std::vector<float>& order = Values(r, Capture::kSortedSelectedExpertsPerDevice);
    order[1] = order[0];  // no longer a permutation
  });
  HoldsThenBreaks(run, InvariantKind::kGroupSizesCoverRows,
                  [](RunResult& r) { FactOf(r, FactKind::kGroupSizesPerDevice).values[0] += 1; });
  HoldsThenBreaks(run, InvariantKind::kNoRowsLeaveDevice, [](RunResult& r) {
    for (OpRecord& op : r.trace.ops)
      if (!op.inputs.empty() && r.trace.tensors[op.inputs[0]].name == "sorted_inputs") {
        op.collective = CollectiveRecord{};  // an all-gather of the routed rows
        return;
      }
    FAIL("no op reads sorted_inputs");
  });
}

TEST_CASE("sparse decode: every device receives every row, broadcast sends, one output",
          "[invariants]") {
  const RunResult run =
      NumericRun(Small({"num_experts=8", "ici_expert_parallelism=4", "per_device_batch_size=0.25",
                        "max_target_length=1", "model_call_mode=inference"}),
                 4);
  CHECK(Evaluate(run, InvariantKind::kDecodeReceivesAllRows).result ==
        "holds: received [2, 2, 2, 2] == R = 1*1*2 = 2");
  const auto uneven = [](RunResult& r) {
    FactOf(r, FactKind::kRowsSent, "intermediate_output").values[0] += 1;
  };
  HoldsThenBreaks(run, InvariantKind::kDecodeReceivesAllRows, uneven);
  HoldsThenBreaks(run, InvariantKind::kDecodeSendSizesBroadcast, uneven);
  HoldsThenBreaks(run, InvariantKind::kDecodeOutputReplicated,
                  [](RunResult& r) { Values(r, Capture::kOutputPerDevice).back() += 1.0f; });
}

TEST_CASE("sparse tensor parallelism: [R, M/TP] after psum_scatter, out_specs agree",
          "[invariants]") {
  const RunResult run = NumericRun(Small({"num_experts=4", "ici_tensor_parallelism=2"}), 4);
  const auto scattered = [](RunResult& r) {
    for (const OpRecord& op : r.trace.ops)
      if (op.collective && op.collective->kind == CollectiveKind::kPsumScatter) {
        r.trace.tensors[op.outputs[0]].shape[1] = 16;  // the scatter left M whole
        return;
      }
    FAIL("no psum_scatter");
  };
  HoldsThenBreaks(run, InvariantKind::kTensorScatteredOutput, scattered);
  HoldsThenBreaks(run, InvariantKind::kTensorOutSpecMatches, scattered);
  const RunResult transpose =
      NumericRun(Small({"num_experts=4", "ici_tensor_transpose_parallelism=2"}), 4);
  HoldsThenBreaks(transpose, InvariantKind::kTensorTransposePsum, [](RunResult& r) {
    for (OpRecord& op : r.trace.ops)
      if (op.collective && op.collective->kind == CollectiveKind::kPsum) {
        op.collective.reset();  // layer_w0 left as a partial sum
        return;
      }
  });
}

TEST_CASE("ring of experts: the row mask keeps the local experts, groups cover their tokens",
          "[invariants]") {
  const RunResult run = NumericRun(
      Small({"num_experts=4", "use_ring_of_experts=true", "ici_expert_parallelism=2"}), 4);
  const auto one_more = [](RunResult& r) { Values(r, Capture::kRingGroupSizesPerDevice)[0] += 1; };
  HoldsThenBreaks(run, InvariantKind::kRingMaskKeepsLocalExperts, one_more);
  HoldsThenBreaks(run, InvariantKind::kRingGroupSizesCoverGroup, one_more);
  // A row past the device's experts left unmasked (device 0 keeps its first rows only).
  HoldsThenBreaks(run, InvariantKind::kRingMaskKeepsLocalExperts, [](RunResult& r) {
    Values(r, Capture::kRingIntermediateOutputRowMaxPerDevice)[15] = 0.5f;
  });
  HoldsThenBreaks(run, InvariantKind::kSortedExpertsNonDecreasing, [](RunResult& r) {
    std::vector<float>& rolled = Values(r, Capture::kRingSortedExpertsPerDevice);
    std::reverse(rolled.begin(), rolled.begin() + 16);
  });
}

TEST_CASE("the ring equals the all-to-all path within the rounding of its bf16 partial sums",
          "[invariants]") {
  const std::vector<std::string> args =
      Small({"num_experts=4", "use_ring_of_experts=true", "ici_expert_parallelism=2"});
  const RunResult ring = NumericRun(args, 4);
  RunResult all_to_all = NumericRun(WithOverrides(args, {"use_ring_of_experts=false"}), 4);
  const ReferenceRun reference{"all-to-all", &all_to_all.captures};
  const Invariant close = Evaluate(ring, InvariantKind::kRingMatchesAllToAll, &reference);
  INFO(close.result);
  CHECK_FALSE(close.violated);
  // The psum_scatter adds bf16-rounded partial outputs: one ulp apart, not bit-identical.
  CHECK(close.result.find("max |difference| 0.01562 over 256 elements") != std::string::npos);
  Values(all_to_all, Capture::kOutput)[5] += 0.25f;
  CHECK(Evaluate(ring, InvariantKind::kRingMatchesAllToAll, &reference).violated);
}

TEST_CASE("DeepSeek routing: scaled weights, biased selection, routed plus shared",
          "[invariants]") {
  const RunResult run =
      NumericRun({"model_name=deepseek3-tiny", "max_target_length=4", "per_device_batch_size=1",
                  "n_routing_groups=4", "topk_routing_group=2", "sparse_matmul=false"},
                 2);
  HoldsThenBreaks(run, InvariantKind::kScaledWeightSum,
                  [](RunResult& r) { Values(r, Capture::kTopKWeights)[0] += 0.5f; });
  // A dropped group's expert now scores highest: that group should have been kept.
  HoldsThenBreaks(run, InvariantKind::kBiasedSelection, [](RunResult& r) {
    const Array& mask = r.captures.At(Capture::kGroupMask);
    std::vector<float>& logits = Values(r, Capture::kGateLogits);
    const int64_t e = 16, g = mask.shape[2];
    for (int64_t group = 0; group < g; ++group)
      if (mask.values()[group] == 0.0f) {
        logits[group * (e / g)] = 100.0f;
        return;
      }
    FAIL("token 0 kept every group");
  });
  HoldsThenBreaks(run, InvariantKind::kRoutedPlusShared,
                  [](RunResult& r) { Values(r, Capture::kSharedExpertsOutput)[0] += 1.0f; });
}

TEST_CASE("DeepSeek routing without groups on the sparse path: the bias picks, pre-bias weighs",
          "[invariants]") {
  const RunResult run = NumericRun({"model_name=deepseek3-tiny", "max_target_length=4",
                                    "per_device_batch_size=1", "ici_expert_parallelism=2"},
                                   4);
  // Token 0's best unchosen expert now outranks its chosen ones.
  HoldsThenBreaks(run, InvariantKind::kBiasedSelection, [](RunResult& r) {
    const Array& idx = r.captures.At(Capture::kTopKIndices);
    std::vector<float>& logits = Values(r, Capture::kGateLogits);
    for (int64_t c = 0; c < 16; ++c)
      if (std::find(idx.values().begin(), idx.values().begin() + idx.shape[2],
                    static_cast<float>(c)) == idx.values().begin() + idx.shape[2]) {
        logits[c] = 100.0f;
        return;
      }
  });
  HoldsThenBreaks(run, InvariantKind::kRoutedPlusShared,
                  [](RunResult& r) { Values(r, Capture::kRoutedExpertsOutput)[3] -= 1.0f; });
}

TEST_CASE("Llama 4 and norm_topk_prob: unit combine weights, normalized weights, scoped runs",
          "[invariants]") {
  const RunResult llama4 =
      NumericRun(Small({"decoder_block=llama4", "num_experts=4", "num_experts_per_tok=1"}), 2);
  HoldsThenBreaks(llama4, InvariantKind::kUnitCombineWeights,
                  [](RunResult& r) { Values(r, Capture::kWeightSumWeightsPerDevice)[0] = 0.5f; });
  // The raw logits Llama 4 keeps as top_k_weights may be negative: no non-negativity claim
  // on that run, and its section's invariants say which run they are.
  for (const Invariant& inv : SectionInvariants(llama4.trace, llama4.captures, "Llama 4", true)) {
    CHECK(inv.kind != InvariantKind::kNonNegativeWeights);
    CHECK(inv.run == "Llama 4");
  }
  // Dense dropless Llama 4: the ones scattered to [B,S,E] sum to K per token.
  const RunResult dense = NumericRun(Small({"decoder_block=llama4", "num_experts=4",
                                            "num_experts_per_tok=1", "sparse_matmul=false"}),
                                     2);
  const auto halved = [](RunResult& r) {
    for (float& w : Values(r, Capture::kWeights))
      if (w != 0.0f) {
        w = 0.5f;
        return;
      }
  };
  HoldsThenBreaks(dense, InvariantKind::kUnitCombineWeights, halved);
  HoldsThenBreaks(dense, InvariantKind::kDroplessWeightSum, halved);
  const RunResult qwen = NumericRun(Small({"num_experts=4", "norm_topk_prob=true"}), 2);
  HoldsThenBreaks(qwen, InvariantKind::kNormalizedWeights,
                  [](RunResult& r) { Values(r, Capture::kTopKWeights)[0] += 0.25f; });
}

TEST_CASE("the masked loop equals a dropless run of the same seed", "[invariants]") {
  const std::vector<std::string> args = Small({"num_experts=4", "ici_expert_parallelism=2"});
  const RunResult loop = NumericRun(args, 4, Block::kMoe, /*masked_loop=*/true);
  RunResult dropless =
      NumericRun(WithOverrides(args, {"sparse_matmul=false", "capacity_factor=-1"}), 4);
  // One expert skipped: the loop no longer runs every expert on every token.
  HoldsThenBreaks(loop, InvariantKind::kDroplessEveryExpert, [](RunResult& r) {
    for (TensorRecord& t : r.trace.tensors)
      if (t.name == "layer_w0" && t.scope.find("expert_3") != std::string::npos) t.dims = "BS-";
  });
  HoldsThenBreaks(loop, InvariantKind::kDroplessUnchosenZero,
                  [](RunResult& r) { Values(r, Capture::kWeights)[1] += 0.5f; });
  CHECK(Evaluate(loop, InvariantKind::kMaskedLoopMatchesDropless).result ==
        "not evaluated: no dense_matmul dropless run to compare with");
  const ReferenceRun reference{"dropless", &dropless.captures};
  const Invariant same = Evaluate(loop, InvariantKind::kMaskedLoopMatchesDropless, &reference);
  CHECK(same.result ==
        "holds: max |difference| 0 over 256 elements (tolerance 1e-05) against dropless");
  Values(dropless, Capture::kOutput)[7] += 0.01f;
  const Invariant off = Evaluate(loop, InvariantKind::kMaskedLoopMatchesDropless, &reference);
  CHECK(off.violated);
  CHECK(off.result ==
        "VIOLATED: max |difference| 0.01 over 256 elements (tolerance 1e-05) against dropless");
}

}  // namespace shardtrace
