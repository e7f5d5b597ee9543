// The XLA SPMD analysis (src/spmd/): resharding of each collective kind, einsum partitioning
// (FSDP gathers, partial contractions), propagation on hand-built traces whose answer can be
// worked out by hand, every MoE path on a 2-axis mesh, and per-device memory.
#include <fmt/format.h>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "paths/moe_block.h"
#include "run/run.h"
#include "spmd/spmd_analysis.h"
#include "spmd/spmd_einsum_sharding.h"
#include "spmd/spmd_reshard.h"
#include "test_support.h"

namespace shardtrace {
namespace {

// mesh['fsdp'=4, 'expert'=2] plus a size-1 axis that must never count.
Mesh TwoAxisMesh() { return Mesh({{"fsdp", 4, 4, 1}, {"tensor", 1, 1, 1}, {"expert", 2, 2, 1}}); }

PartitionSpec P(std::vector<PartitionSpec::Entry> entries) { return PartitionSpec(entries); }
const PartitionSpec::Entry kNone{};

// Builds a Trace by hand: tensors and ops in program order.
struct TraceBuilder {
  Trace trace;

  int Tensor(const std::string& name, Shape shape, DType dtype = DType::kFloat32,
             std::optional<PartitionSpec> spec = std::nullopt,
             Constraint constraint = Constraint::kNone, TensorKind kind = TensorKind::kAct) {
    TensorRecord t;
    t.id = static_cast<int>(trace.tensors.size());
    t.name = name;
    t.kind = kind;
    t.dtype = dtype;
    t.dims = std::string(shape.size(), '-');
    t.shape = shape;
    t.partition_spec = spec;
    t.constraint = constraint;
    trace.tensors.push_back(t);
    return t.id;
  }
  int Param(const std::string& name, Shape shape, const PartitionSpec& spec) {
    const int id =
        Tensor(name, shape, DType::kFloat32, spec, Constraint::kKernelAxes, TensorKind::kWeight);
    Op(OpKind::kParam, {}, {id});
    return id;
  }
  OpRecord& Op(OpKind kind, std::vector<int> inputs, std::vector<int> outputs,
               const std::string& equation = "") {
    OpRecord op;
    op.id = static_cast<int>(trace.ops.size());
    op.kind = kind;
    op.equation = equation;
    op.inputs = std::move(inputs);
    op.outputs = std::move(outputs);
    trace.ops.push_back(op);
    return trace.ops.back();
  }
  // `x` constrained to `spec`: a new explicit record and the constraint op.
  int Constrain(int x, const PartitionSpec& spec) {
    const TensorRecord in = trace.tensors[x];  // a copy: Tensor() grows the vector
    const int id =
        Tensor(in.name, in.shape, in.dtype, spec, Constraint::kShardWithLogical, in.kind);
    Op(OpKind::kShardingConstraint, {x}, {id});
    return id;
  }
};

std::string Describe(const ImpliedCollective& c) {
  return fmt::format("{} {} n={} {}B {}->{}", HloName(c.kind), fmt::join(c.axes, ","),
                     c.participants, c.bytes_per_device, c.from.ToString(), c.to.ToString());
}

}  // namespace

TEST_CASE("Resharding yields each collective kind with its bytes per device", "[spmd]") {
  const Mesh mesh = TwoAxisMesh();
  const Shape shape = {8, 16};  // float32: 512 bytes whole
  auto plan = [&](const ShardState& from, const PartitionSpec& to) {
    std::vector<std::string> out;
    for (const ImpliedCollective& c : PlanReshard(shape, DType::kFloat32, from, to, mesh))
      out.push_back(Describe(c));
    return out;
  };
  // fsdp leaves dim 0: each of 4 devices holds [2,16] (128 B) and receives 3 blocks.
  CHECK(plan({P({{"fsdp"}, kNone}), {}}, P({kNone, kNone})) ==
        std::vector<std::string>{"all-gather fsdp n=4 384B P('fsdp', None)->P(None, None)"});
  // Partial sums over expert, target shards dim 0 on expert: (n-1)/n of 512 B.
  CHECK(
      plan({P({kNone, kNone}), {"expert"}}, P({{"expert"}, kNone})) ==
      std::vector<std::string>{"reduce-scatter expert n=2 256B P(None, None)->P('expert', None)"});
  // Partial sums over expert, target replicated: 2(n-1)/n of 512 B.
  CHECK(plan({P({kNone, kNone}), {"expert"}}, P({kNone, kNone})) ==
        std::vector<std::string>{"all-reduce expert n=2 512B P(None, None)->P(None, None)"});
  // expert moves from dim 0 to dim 1: (n-1)/n of the [4,16] block (256 B).
  CHECK(
      plan({P({{"expert"}, kNone}), {}}, P({kNone, {"expert"}})) ==
      std::vector<std::string>{"all-to-all expert n=2 128B P('expert', None)->P(None, 'expert')"});
  // fsdp enters a dim held whole: every device keeps its sub-block, nothing moves.
  CHECK(plan({P({kNone, kNone}), {}}, P({kNone, {"fsdp"}})) ==
        std::vector<std::string>{"slice fsdp n=4 0B P(None, None)->P(None, 'fsdp')"});
  // No change, or a change on a size-1 axis only: nothing.
  CHECK(plan({P({{"fsdp"}, kNone}), {}}, P({{"fsdp"}, kNone})).empty());
  CHECK(plan({P({{"fsdp"}, kNone}), {}}, P({{"fsdp"}, {"tensor"}})).empty());
  // fsdp -> expert on dim 0: expert would land major of fsdp, which the target drops anyway,
  // so fsdp is gathered first (3 * the 128 B block) and expert sliced from the whole dim for
  // free, as XLA does with the gate kernel of the fsdp=4 x tensor=2 MaxText case.
  CHECK(plan({P({{"fsdp"}, kNone}), {}}, P({{"expert"}, kNone})) ==
        std::vector<std::string>{"all-gather fsdp n=4 384B P('fsdp', None)->P(None, None)",
                                 "slice expert n=2 0B P(None, None)->P('expert', None)"});
  // The other way round, expert minor of fsdp, is a free slice.
  CHECK(
      plan({P({{"fsdp"}, kNone}), {}}, P({{"fsdp", "expert"}, kNone})) ==
      std::vector<std::string>{"slice expert n=2 0B P('fsdp', None)->P(('fsdp', 'expert'), None)"});
}

TEST_CASE("Einsums gather FSDP weights and leave partial sums on sharded contractions", "[spmd]") {
  const Mesh mesh = TwoAxisMesh();
  auto plan = [&](const std::string& eq, const std::vector<Shape>& shapes,
                  const std::vector<PartitionSpec>& specs) {
    return PlanEinsum(ParseEinsum(eq), shapes, {DType::kBfloat16, DType::kBfloat16}, specs,
                      DType::kBfloat16, mesh);
  };
  // FSDP: the activation's batch uses fsdp, so the weight's fsdp-sharded M is gathered.
  const EinsumPlan fsdp =
      plan("BM,MF->BF", {{64, 16}, {16, 32}}, {P({{"fsdp"}, kNone}), P({{"fsdp"}, kNone})});
  CHECK(fsdp.operands[0] == P({{"fsdp"}, kNone}));
  CHECK(fsdp.operands[1] == P({kNone, kNone}));
  CHECK(fsdp.output == P({{"fsdp"}, kNone}));
  CHECK(fsdp.partial.empty());
  // The contracted dim sharded the same way on both sides: partial sums over fsdp.
  const EinsumPlan both =
      plan("BM,MF->BF", {{64, 16}, {16, 32}}, {P({kNone, {"fsdp"}}), P({{"fsdp"}, kNone})});
  CHECK(both.output == P({kNone, kNone}));
  CHECK(both.partial == std::vector<std::string>{"fsdp"});
  // The dense combine: E sharded on expert in the expert outputs only; the weights are
  // sliced (free) and the output holds partial sums over expert.
  const EinsumPlan combine =
      plan("BSEM,BSE->BSM", {{8, 4, 8, 16}, {8, 4, 8}},
           {P({{"fsdp"}, kNone, {"expert"}, kNone}), P({kNone, kNone, kNone})});
  CHECK(combine.operands[1] == P({{"fsdp"}, kNone, {"expert"}}));
  CHECK(combine.output == P({{"fsdp"}, kNone, kNone}));
  CHECK(combine.partial == std::vector<std::string>{"expert"});
  // A mesh axis on two output dims: the smaller operand gives it up.
  const EinsumPlan clash = plan("BM,EMH->BEH", {{64, 16}, {4, 16, 8}},
                                {P({{"expert"}, kNone}), P({{"expert"}, kNone, kNone})});
  CHECK(clash.operands[1] == P({kNone, kNone, kNone}));
  CHECK(clash.output == P({{"expert"}, kNone, kNone}));
}

TEST_CASE("A kernel cast and constrained to a spec without fsdp is all-gathered over fsdp",
          "[spmd]") {
  const Mesh mesh = TwoAxisMesh();
  TraceBuilder b;
  // wi_0 [E=4, M=8, H=16] float32 kernel_axes P('expert', 'fsdp', None).
  const int w = b.Param("wi_0", {4, 8, 16}, P({{"expert"}, {"fsdp"}, kNone}));
  const int cast = b.Tensor("w0_kernel", {4, 8, 16}, DType::kBfloat16, std::nullopt,
                            Constraint::kNone, TensorKind::kWeight);
  b.Op(OpKind::kAstype, {w}, {cast});
  const int gathered = b.Constrain(cast, P({{"expert"}, kNone, kNone}));
  const SpmdResult r = AnalyzeSpmd(mesh, b.trace);
  const TensorSpmd& c = r.tensor(cast);
  CHECK(c.placement == Placement::kPropagated);
  CHECK(c.propagated_spec == P({{"expert"}, {"fsdp"}, kNone}));
  CHECK(c.local_shape == Shape{2, 2, 16});
  CHECK(c.bytes_per_device == 2 * 2 * 16 * 2);
  const std::vector<ImpliedCollective>& implied = r.implied_at(2);
  REQUIRE(implied.size() == 1);
  // The convert runs on the sharded parameter and the bfloat16 copy is gathered (TPU): each
  // device holds [2,2,16] bf16 = 128 B and receives 3 more blocks: 384 B, listed under the
  // parameter's name. XLA:CPU widens it to float32 first (the bf16 MaxText cases' HLO
  // gathers f32): 768 B there.
  CHECK(Describe(implied[0]) ==
        "all-gather fsdp n=4 384B P('expert', 'fsdp', None)->P('expert', None, None)");
  CHECK(implied[0].dtype == DType::kBfloat16);
  CHECK(implied[0].xla_cpu_bytes_per_device == 768);
  CHECK(implied[0].tensor == w);
  CHECK(implied[0].groups == 2);
  CHECK(r.tensor(gathered).placement == Placement::kExplicit);
  // Memory: the parameter (float32, 2*2*16*4 = 256 B) is an argument; the cast (128 B) and
  // the gathered copy (2*8*16*2 = 512 B) are temporaries live together at the constraint.
  CHECK(r.memory.parameter_bytes == 256);
  CHECK(r.memory.peak_temporary_bytes == 128 + 512);
  CHECK(r.memory.peak_op == 2);
  CHECK(r.memory.gathered_weight_bytes == 128 + 512);
}

TEST_CASE("Activations propagate between constraints and reshard where the spec changes",
          "[spmd]") {
  const Mesh mesh = TwoAxisMesh();
  TraceBuilder b;
  // x [8,16] float32 arrives unconstrained; its first use constrains it to P('fsdp', None).
  const int x = b.Tensor("x", {8, 16});
  b.Op(OpKind::kInput, {}, {x});
  const int c1 = b.Constrain(x, P({{"fsdp"}, kNone}));
  const int y = b.Tensor("y", {8, 16});
  b.Op(OpKind::kActivation, {c1}, {y}).function = "silu";
  const int z = b.Tensor("z", {8, 16});
  b.Op(OpKind::kMul, {y, c1}, {z});
  const int c2 = b.Constrain(z, P({kNone, {"fsdp"}}));
  const SpmdResult r = AnalyzeSpmd(mesh, b.trace);
  // Backward from the constraint: the input is already P('fsdp', None), nothing moves there.
  CHECK(r.tensor(x).placement == Placement::kPropagated);
  CHECK(r.tensor(x).propagated_spec == P({{"fsdp"}, kNone}));
  CHECK(r.implied_at(1).empty());
  // Forward through the elementwise ops.
  CHECK(r.tensor(y).propagated_spec == P({{"fsdp"}, kNone}));
  CHECK(r.tensor(z).propagated_spec == P({{"fsdp"}, kNone}));
  CHECK(r.tensor(z).local_shape == Shape{2, 16});
  // fsdp moves from dim 0 to dim 1 at the second constraint: (4-1)/4 of 128 B.
  REQUIRE(r.implied_at(4).size() == 1);
  CHECK(Describe(r.implied_at(4)[0]) == "all-to-all fsdp n=4 96B P('fsdp', None)->P(None, 'fsdp')");
  CHECK(r.tensor(c2).placement == Placement::kExplicit);
  // Memory: x ([2,16] per device, 128 B) is an argument and c1 aliases it; y fuses into
  // the mul; z (128 B) and the constrained copy c2 ([8,4], 128 B) are live at the last op.
  CHECK(r.memory.input_bytes == 128);
  CHECK(r.memory.peak_temporary_bytes == 256);
}

TEST_CASE("Partial sums become a reduce-scatter under a sharded constraint, else an all-reduce",
          "[spmd]") {
  const Mesh mesh = TwoAxisMesh();
  for (const bool constrained : {true, false}) {
    INFO(constrained);
    TraceBuilder b;
    // h [B=8, H=32] sharded on H by fsdp; wo [H=32, M=16] sharded on H by fsdp: partial sums.
    const int h = b.Tensor("h", {8, 32}, DType::kFloat32, P({kNone, {"fsdp"}}),
                           Constraint::kShardWithLogical);
    b.Op(OpKind::kInput, {}, {h});
    const int wo = b.Param("wo", {32, 16}, P({{"fsdp"}, kNone}));
    const int out = b.Tensor("out", {8, 16});
    b.Op(OpKind::kEinsum, {h, wo}, {out}, "BH,HM->BM");
    if (constrained) {
      b.Constrain(out, P({{"fsdp"}, kNone}));
    } else {
      const int act = b.Tensor("act", {8, 16});
      b.Op(OpKind::kActivation, {out}, {act}).function = "silu";
    }
    const SpmdResult r = AnalyzeSpmd(mesh, b.trace);
    const std::vector<ImpliedCollective>& einsum = r.implied_at(2);
    if (constrained) {
      CHECK(einsum.empty());
      REQUIRE(r.implied_at(3).size() == 1);
      // [8,16] float32 = 512 B of partial sums; (4-1)/4 of it moves.
      CHECK(Describe(r.implied_at(3)[0]) ==
            "reduce-scatter fsdp n=4 384B P(None, None)->P('fsdp', None)");
    } else {
      REQUIRE(einsum.size() == 1);
      CHECK(Describe(einsum[0]) == "all-reduce fsdp n=4 768B P(None, None)->P(None, None)");
      CHECK(einsum[0].reason == "partial sums over contracted 'H'");
    }
  }
}

}  // namespace shardtrace

namespace shardtrace {
namespace {

RunResult SymbolicRun(const std::vector<std::string>& args, int64_t devices) {
  return Run(SymbolicRequest(args, devices, Block::kMoe));
}

// "kind tensor axes bytes" for every implied collective, in program order.
std::vector<std::string> ImpliedList(const RunResult& run) {
  const Trace& trace = run.trace;
  std::vector<std::string> out;
  for (const OpRecord& op : trace.ops)
    for (const ImpliedCollective& c : run.spmd.implied_at(op.id))
      out.push_back(fmt::format("{} {} {} {}", HloName(c.kind), trace.tensors[c.tensor].name,
                                fmt::join(c.axes, ","), c.bytes_per_device));
  return out;
}

}  // namespace

TEST_CASE("Every MoE path on fsdp=2 x expert=2 gets the collectives XLA inserts", "[spmd]") {
  // M=16, H=32, E=8, K=2, S=8, B=4 (1 per device). The float32 parameters are cast to
  // bfloat16 where they lie and the copies gathered (TPU; XLA:CPU widens them to f32 first):
  // a wi kernel [8,16,32] is [4,8,32] bf16 per device (2048 B) and gathers 1 more block over
  // fsdp; the gate kernel [16,8] is [4,8] (64 B) over fsdp x expert and gathers 3 more.
  const std::vector<std::string> small = {
      "base_emb_dim=16",         "base_mlp_dim=32",       "base_moe_mlp_dim=32",
      "num_experts=8",           "num_experts_per_tok=2", "max_target_length=8",
      "per_device_batch_size=1", "decoder_block=mixtral", "ici_expert_parallelism=2"};
  struct Case {
    std::string name;
    std::vector<std::string> extra;
    std::vector<std::string> expected;
  };
  const std::string gate = "all-gather gate.kernel fsdp,expert 192";
  // The block input arrives as the decoder layer hands it over, batch on fsdp x expert
  // ([1,8,16] f32 per device): the dense paths keep the batch on fsdp only, so it and the
  // gate's output are gathered over expert.
  const std::string input = "all-gather inputs expert 256";
  const std::string gate_out = "all-gather output expert 128";
  // The [B,S,E] weights' scatter is not partitioned along the batch (GSPMD): its index
  // tuples and its updates, the top-k weights, are gathered whole over fsdp; each device
  // sends its int32[2,8,2,3] block (384 B) and its bf16[2,8,2] block (64 B), as in every
  // sharded dense fixture's HLO ('concatenate' and 'div', the latter widened to f32).
  const std::string scatter_indices = "all-gather top_k_indices fsdp 384";
  const std::string scatter_weights = "all-gather top_k_weights fsdp 64";
  // top_k is XLA's TopK custom call, split only along a sharded sort dim: the batch-sharded
  // [4,8,8] bf16 logits are gathered whole over fsdp (each device sends its 256 B block), as
  // every sharded dense fixture's HLO shows before its TopK.
  const std::string topk_logits = "all-gather gate_logits fsdp 256";
  const std::vector<Case> cases = {
      // The dense dropless combine contracts E sharded on expert: partial sums, all-reduced
      // ([B=2,S=8,M=16] float32 per device = 1024 B, 2(n-1)/n of it).
      {"dense dropless",
       {"sparse_matmul=false"},
       {gate, gate_out, topk_logits, scatter_indices, scatter_weights, input,
        "all-gather wi_0 fsdp 2048",
        "all-gather wi_1 fsdp 2048", "all-gather wo fsdp 2048", "all-reduce output expert 1024"}},
      // Token dropping: the mask constraints slice, the kernels are gathered by the
      // constraint in maybe_all_gather_kernel_weight_in_expert_parallelism, the combine
      // contracts E (and C) sharded on expert.
      {"dense dropping",
       {"sparse_matmul=false", "capacity_factor=1.5"},
       {gate, gate_out, topk_logits, scatter_indices, scatter_weights,
        "slice expert_token_count expert 0", "all-gather within_capacity expert 128", input,
        "slice dispatch expert 0", "all-gather wi_0 fsdp 2048", "all-gather wi_1 fsdp 2048",
        "all-gather wo fsdp 2048", "all-reduce output expert 512"}},
      // sparse_matmul: kernel_axes P('expert', 'fsdp', None) vs in_spec P('expert', None, None).
      {"ragged all-to-all",
       {},
       {gate, "all-gather wi_0 fsdp 2048", "all-gather wi_1 fsdp 2048", "all-gather wo fsdp 2048"}},
      {"ring of experts",
       {"use_ring_of_experts=true"},
       {gate, "all-gather wi_0 fsdp 2048", "all-gather wi_1 fsdp 2048", "all-gather wo fsdp 2048"}},
      // The chunked pipeline keeps wi sharded along the embedding into shard_map (it gathers
      // the chunks itself); only wo is gathered by XLA.
      {"chunked pipeline", {"shardtrace_pr3981_emb_chunks=2"}, {gate, "all-gather wo fsdp 2048"}},
      // EP 1 with tensor parallelism: the kernels keep 'tensor' and lose 'fsdp'; the gate
      // kernel's M moves from fsdp to tensor (both of size 2) by a collective-permute of its
      // [8,8] bf16 block (128 B), as sparse_fsdp2_tp2's HLO does. The input
      // arrives with M on tensor: the gate contracts it against a sliced kernel and
      // all-reduces the partial sums, shard_map's in_specs gather it (as in the compiled
      // HLO of the MaxText case sparse_tp2).
      {"no EP, TP 2",
       {"ici_expert_parallelism=1", "ici_tensor_parallelism=2"},
       {"collective-permute gate.kernel fsdp,tensor 128", "all-gather inputs tensor 256",
        "all-reduce output tensor 256", "all-gather wi_0 fsdp 2048", "all-gather wi_1 fsdp 2048",
        "all-gather wo fsdp 2048"}},
  };
  for (const Case& c : cases) {
    INFO(c.name);
    std::vector<std::string> args = small;
    args.insert(args.end(), c.extra.begin(), c.extra.end());
    const RunResult run = SymbolicRun(args, 4);
    CHECK(ImpliedList(run) == c.expected);
    // Every tensor outside shard_map now has a per-device shape from a sharding.
    for (const TensorRecord& t : run.trace.tensors) {
      INFO(t.name << " in " << t.scope);
      const TensorSpmd& placed = run.spmd.tensor(t.id);
      CHECK(placed.placement != Placement::kUnresolved);
      if (placed.placement == Placement::kPropagated) CHECK(placed.propagated_spec.has_value());
    }
  }
}

TEST_CASE("DeepSeek-V3 on fsdp=256 holds XLA's argument bytes per device", "[spmd]") {
  // XLA's memory_analysis() of MaxText 0.2.5's own block (release base.yml, model file
  // deepseek3-671b, per_device_batch_size=1, max_target_length=4096) on 256 fake CPU devices:
  // 224.7 MiB of arguments, the float32 parameters plus the bfloat16 block input (56 MiB).
  const testing::CommandResult r = testing::RunShardtrace(
      {"trace", testing::SourcePath("testdata/maxtext-moe-models/configs/base.yml"),
       "model_name=deepseek3-671b", "per_device_batch_size=1", "max_target_length=4096",
       "ici_fsdp_parallelism=256", "--devices", "256", "--format", "json"});
  REQUIRE(r.status == 0);
  const nlohmann::json memory = nlohmann::json::parse(r.out).at("memory");
  const double mib = 1 << 20;
  CHECK(memory.at("input_bytes").get<int64_t>() == int64_t{4096} * 7168 * 2);
  const double arguments =
      (memory.at("parameter_bytes").get<double>() + memory.at("input_bytes").get<double>()) / mib;
  CHECK(arguments == Approx(224.7).epsilon(0.001));
}

TEST_CASE("DeepSeek-V3 on EP32 x FSDP8 has a per-device peak a reader can check by hand",
          "[spmd]") {
  const RunResult run =
      SymbolicRun({"model_name=deepseek3-671b", "ici_expert_parallelism=32"}, 256);
  const Trace& trace = run.trace;
  const MemoryEstimate& m = run.spmd.memory;
  const int64_t kMiB = 1 << 20;
  // Parameters (float32, per device): wi_0, wi_1, wo [256,7168,2048] over all 256 devices
  // (56 MiB each); the gate [7168,256] over fsdp=8; its bias [256] whole; the shared
  // expert's three [7168,2048] kernels over all 256 devices.
  CHECK(m.parameter_bytes ==
        3 * 56 * kMiB + 7168 * 256 * 4 / 8 + 256 * 4 + 3 * 7168 * 2048 * 4 / 256);
  // Inputs: [3072,2048,7168] in dtype bfloat16 (what the decoder layer hands the block) over
  // ('fsdp', 'expert'): 12 sequences per device.
  CHECK(m.input_bytes == int64_t{12} * 2048 * 7168 * 2);
  // The ragged buffer: 12*2048 tokens x 8 choices = 196608 rows per device, times the
  // worst case min(EP=32, E/K=256/8=32) = 6291456 rows of 7168 bfloat16 = 84 GiB. At the
  // unsort, gmm_wo's output and its sorted copy (both that size) are live together.
  const int64_t buffer = int64_t{196608} * 32 * 7168 * 2;
  CHECK(buffer == int64_t{84} << 30);
  REQUIRE(m.at_peak.size() >= 3);
  CHECK(trace.tensors[m.at_peak[0].tensor].name == "intermediate_output");
  CHECK(m.at_peak[0].bytes == buffer);
  CHECK(trace.tensors[m.at_peak[1].tensor].name == "local_output");
  CHECK(m.at_peak[1].bytes == buffer);
  // ...plus the second all-to-all's target, [196608,7168] bfloat16.
  CHECK(trace.tensors[m.at_peak[2].tensor].name == "output_shape");
  CHECK(m.at_peak[2].bytes == int64_t{196608} * 7168 * 2);
  int64_t sum = 0;
  for (const MemoryHolder& h : m.at_peak) sum += h.bytes;
  CHECK(m.peak_temporary_bytes == sum);
  // ...the unsort permutation over the buffer, 6291456 int32 ...
  REQUIRE(m.at_peak.size() >= 4);
  CHECK(trace.tensors[m.at_peak[3].tensor].name == "unsort_indices");
  CHECK(m.at_peak[3].bytes == int64_t{6291456} * 4);
  // ...and routing indices and weights, under 2 MiB together.
  CHECK(m.peak_temporary_bytes - 2 * buffer - m.at_peak[2].bytes - m.at_peak[3].bytes < 2 * kMiB);
  CHECK(m.peak_bytes() == m.parameter_bytes + m.input_bytes + m.peak_temporary_bytes);
}

}  // namespace shardtrace

namespace shardtrace {

TEST_CASE("A block input takes the sharding its first constraint asks for, not a guess", "[spmd]") {
  // DeepSeek-V3 EP64 x FSDP4: the input reaches the gate einsum before any constraint. It
  // must take ('fsdp', 'expert') on the batch from the gate_logits constraint downstream,
  // leaving only the FSDP weight all-gathers (no all-reduce of gate logits, no all-to-all).
  const RunResult run =
      SymbolicRun({"model_name=deepseek3-671b", "ici_expert_parallelism=64"}, 256);
  const Trace& trace = run.trace;
  const TensorRecord& input = trace.tensors.front();
  REQUIRE(input.name == "inputs");
  CHECK(run.spmd.tensor(input.id).propagated_spec == PartitionSpec({{"fsdp", "expert"}, {}, {}}));
  int gathers = 0;
  for (const OpRecord& op : trace.ops)
    for (const ImpliedCollective& c : run.spmd.implied_at(op.id)) {
      INFO(trace.tensors[c.tensor].name);
      CHECK(c.kind == CollectiveKind::kAllGather);
      ++gathers;
    }
  CHECK(gathers == 7);  // gate kernel, w0/w1/wo over fsdp, shared wi_0/wi_1/wo
}

}  // namespace shardtrace

namespace shardtrace {
namespace {

TEST_CASE("The masked loop's w[e] of an expert-sharded kernel is gathered over expert once",
          "[spmd]") {
  // E=4 experts on expert=2 (fsdp=2): wi_0, wi_1 and wo as bfloat16 [2,8,32] blocks per device
  // (1 KiB); every device needs every expert's slice, so each kernel's expert dim is gathered
  // (1 more block: 1 KiB sent), once for all four x[e] (CSE), and no later iteration repeats it.
  const testing::CommandResult r = testing::RunShardtrace(
      {"trace", "base_emb_dim=16", "base_mlp_dim=32", "base_moe_mlp_dim=32", "num_experts=4",
       "num_experts_per_tok=2", "max_target_length=4", "per_device_batch_size=1",
       "ici_expert_parallelism=2", "--devices", "4", "--path", "masked_loop", "--format", "json"});
  REQUIRE(r.status == 0);
  const nlohmann::json trace = nlohmann::json::parse(r.out);
  std::vector<std::string> found;
  for (const nlohmann::json& op : trace.at("ops"))
    if (op.contains("implied_collectives"))
      for (const nlohmann::json& c : op.at("implied_collectives"))
        if (c.at("reason") == "x[e] along a sharded dim")
          found.push_back(fmt::format("{} {} {} {}->{}", c.at("kind").get<std::string>(),
                                      c.at("axes").dump(), c.at("bytes_per_device").get<int64_t>(),
                                      c.at("from").get<std::string>(),
                                      c.at("to").get<std::string>()));
  CHECK(found ==
        std::vector<std::string>{
            "all_gather [\"expert\"] 1024 P('expert', 'fsdp', None)->P(None, 'fsdp', None)",
            "all_gather [\"expert\"] 1024 P('expert', 'fsdp', None)->P(None, 'fsdp', None)",
            "all_gather [\"expert\"] 1024 P('expert', None, 'fsdp')->P(None, None, 'fsdp')"});
}

}  // namespace
}  // namespace shardtrace
