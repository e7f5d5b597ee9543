#include "spmd/tpu_collectives.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <utility>

#include "ir/collective_kind.h"
#include "numeric/dtype.h"
#include "shard/sharding.h"

namespace shardtrace {

std::string ToString(TpuRule rule) {
  switch (rule) {
    case TpuRule::kAsModelled:
      return "as modelled";
    case TpuRule::kUnfusedMinorDim:
      return "unfused minor dim";
    case TpuRule::kUnfusedWholeTorus:
      return "unfused over the whole torus";
    case TpuRule::kWindowedEinsum:
      return "windowed einsum";
    case TpuRule::kSmallAllGatherAsAllReduce:
      return "small all-gather as all-reduce";
    case TpuRule::kShardedTopK:
      return "sharded top_k";
    case TpuRule::kBfloat16MatmulOperand:
      return "bfloat16 matmul operand";
    case TpuRule::kNotRecomputed:
      return "not recomputed";
    case TpuRule::kBfloat16Propagation:
      return "bfloat16 propagation";
    case TpuRule::kScatterAddReduceScatter:
      return "scatter-add reduce-scatter";
    case TpuRule::kReassociated:
      return "reassociated";
    case TpuRule::kScatterTransposeAllReduce:
      return "scatter transpose all-reduce";
    case TpuRule::kCotangentGatheredOverBatch:
      return "cotangent gathered over the batch";
  }
  return "?";
}

namespace {

// The measured thresholds (libtpu 0.0.51; the fixtures below each rule).
//
// tpu-all-reduce-scatter-fusion turns an all-reduce whose only user dynamic-slices the device's
// share into a reduce-scatter. Read before that pass (XLA_FLAGS=--xla_dump_hlo_pass_re=.*), it
// fused every all-reduce sliced on a major dim, and on the layout's minor dim only where the
// share there is at least 512 bytes: bf16 shares of 256 elements (tpu_sparse_fsdp2_ep2's wo
// [4,1024,256], tpu_mlp_fsdp2_tp2's wo [512,256], the [4,512,256] input gradients under
// tensor=2) and f32 shares of 128 (tpu_sparse_fsdp4_f32's wo [8,1024,128] and router [128,8])
// fused; bf16 shares of 128 did not (wo on fsdp=4 in tpu_sparse_fsdp4, tpu_mlp_fsdp4,
// tpu_dense_*fsdp4*, tpu_sparse_fsdp4_tp2; the router kernel [512,E]{0,1} sliced on emb
// wherever emb is sharded 4 ways). One 128-lane row of 32-bit words.
constexpr int64_t kMinMinorShareBytes = 512;
// TPU's layout assignment keeps a dim under one lane row (128) out of the minor position when
// the dim before it fills one: the router kernel's gradient bf16[512,8] is laid out {0,1}
// (emb minor), the dense scatter-add's bf16[8,512,8] {1,2,0}.
constexpr int64_t kLaneWidth = 128;
// all_gather_decomposer (Phase 2, before layout assignment) rewrote moe.py's all_gathers of
// int32 group sizes (s32[16] 64 B, s32[64] 256 B: tpu_sparse_ep4, tpu_sparse_fsdp2_ep2,
// tpu_sparse_fsdp2_ep4) as all-reduces of zero-padded buffers; the smallest all-gather it kept
// is the router kernel's bf16[512,8] (8 KiB). The threshold lies between; 256 B is measured.
constexpr int64_t kSmallAllGatherBytes = 256;
// GSPMD's windowed einsum on v5p-16: an einsum operand all-gathered over a group of 8 and its
// gradient's reduce-scatter are loops of collective-permutes of one device's share, 5 of them
// (4 unrolled, one in the loop body), bidirectional around the ring (source-target pairs
// {i,i+1} and {i,i-1}): tpu_mlp_fsdp8 (15 for three weights, forward and backward),
// tpu_sparse_fsdp8 and tpu_sparse_fsdp2_ep4 (the router kernel), tpu_dense_fsdp2_ep4. Groups of
// 4 (v5p-8) and of 2 on v5p-16 keep their all-gathers. Larger groups were not measured.
constexpr int64_t kWindowedGroup = 8;
constexpr int kWindowedPermutes = 5;

std::string Hlo(CollectiveKind kind) { return HloName(kind); }

// Letters of `of` kept in the order of `in`.
std::string InOrder(const std::string& in, const std::string& of) {
  std::string out;
  for (const char c : in)
    if (of.find(c) != std::string::npos) out += c;
  return out;
}

// The dims of a weight gradient's block as TPU lays it out, major to minor. A shard_map psum
// (written) and every other cotangent keep the value's own order. An einsum operand's gradient
// is JAX's transposed dot_general(cotangent, other operand): [batch letters, the operand's
// letters that reach the output (in the output's order), its contracted letters (in the other
// operand's order)], then transposed to the operand's order; XLA folds that transpose into the
// dot (operands swapped) where it only swaps the two free blocks. So dense_matmul's wi_0
// (BSM,EMH->BSEH) is all-reduced as [E,H,M] (tpu_dense_fsdp4: bf16[8,1024,512]{2,1,0}), dense
// dropping's wi_0 (EBCM,EMH->EBCH, E batch) as [E,M,H] (tpu_dense_drop_fsdp4: fused), every wo
// as [E,H,M], the MLP's 2-D kernels in their own order (tpu_mlp_fsdp4).
std::vector<size_t> LayoutOrder(const Trace& trace, const StepCollective& c) {
  const size_t rank = c.local_before.size();
  std::vector<size_t> order(rank);
  for (size_t i = 0; i < rank; ++i) order[i] = i;
  if (c.written || c.forward_op < 0 || c.tensor < 0) return order;
  const OpRecord& op = trace.ops[static_cast<size_t>(c.forward_op)];
  if (op.kind != OpKind::kEinsum || !op.einsum || op.inputs.size() != 2) return order;
  const ParsedEinsum& e = *op.einsum;
  const Shape& shape = trace.tensors[static_cast<size_t>(c.tensor)].shape;
  int k = -1;
  for (int i = 0; i < 2; ++i)
    if (op.inputs[static_cast<size_t>(i)] == c.tensor ||
        (k < 0 &&
         trace.tensors[static_cast<size_t>(op.inputs[static_cast<size_t>(i)])].shape == shape))
      k = i;
  if (k < 0) return order;
  const std::string& x = e.operands[static_cast<size_t>(k)];
  const std::string& y = e.operands[static_cast<size_t>(1 - k)];
  if (x.size() != rank) return order;
  const std::string batch = InOrder(x, e.batch);
  std::string cot_free, act_free;
  for (const char l : e.output)
    if (x.find(l) != std::string::npos && batch.find(l) == std::string::npos) cot_free += l;
  for (const char l : y)
    if (x.find(l) != std::string::npos && e.output.find(l) == std::string::npos) act_free += l;
  const std::string dot = batch + cot_free + act_free;
  if (dot.size() != rank || x == batch + act_free + cot_free) return order;
  for (size_t i = 0; i < rank; ++i) order[i] = x.find(dot[i]);
  return order;
}

// The dim TPU's layout puts minor in the block `c` reduces.
size_t MinorDim(const Trace& trace, const StepCollective& c) {
  std::vector<size_t> order = LayoutOrder(trace, c);
  const size_t rank = order.size();
  if (rank >= 2 && c.local_before[order[rank - 1]] < kLaneWidth &&
      c.local_before[order[rank - 2]] >= kLaneWidth)
    std::swap(order[rank - 1], order[rank - 2]);
  return order[rank - 1];
}

// The bytes of the device's share on the layout's minor dim where the reduce-scatter slices
// that dim; 0 where it slices only major dims.
int64_t MinorShareBytes(const Trace& trace, const StepCollective& c) {
  const size_t rank = c.local_before.size();
  if (rank == 0 || c.local_after.size() != rank) return 0;
  const size_t minor = MinorDim(trace, c);
  if (c.local_before[minor] == c.local_after[minor]) return 0;
  return c.local_after[minor] * ByteSize(c.dtype);
}

// Whether TPU's all-reduce-scatter fusion refuses this reduce-scatter.
bool UnfusedMinorDim(const Trace& trace, const StepCollective& c) {
  const int64_t share = MinorShareBytes(trace, c);
  return share > 0 && share < kMinMinorShareBytes;
}

// Whether every reader of `tensor` (through reshapes, sharding constraints and checkpoint names,
// which only relabel it) casts it to a 16-bit float.
bool ReadOnlyAs16Bit(const Trace& trace, int tensor) {
  bool any = false;
  for (const OpRecord& op : trace.ops) {
    if (std::find(op.inputs.begin(), op.inputs.end(), tensor) == op.inputs.end()) continue;
    if (op.outputs.size() != 1) return false;
    const int out = op.outputs.front();
    if (op.kind == OpKind::kReshape || op.kind == OpKind::kShardingConstraint ||
        op.kind == OpKind::kCheckpointName) {
      if (!ReadOnlyAs16Bit(trace, out)) return false;
    } else if (op.kind != OpKind::kAstype ||
               ByteSize(trace.tensors[static_cast<size_t>(out)].dtype) != 2 ||
               !IsFloating(trace.tensors[static_cast<size_t>(out)].dtype)) {
      return false;
    }
    any = true;
  }
  return any;
}

void Windowed(std::vector<TpuCollective>& out, TpuCollective base, int64_t share_bytes,
              const std::string& why) {
  base.op = "collective-permute";
  base.group = 2;
  base.result_bytes = share_bytes;
  base.rule = TpuRule::kWindowedEinsum;
  base.reason = why;
  for (int i = 0; i < kWindowedPermutes; ++i) out.push_back(base);
}

class Lowering {
 public:
  Lowering(const Mesh& mesh, const Trace& trace, const SpmdResult& spmd,
           const TpuLoweringOptions& options)
      : mesh_(mesh), trace_(trace), spmd_(spmd), options_(options) {}

  // moe.py's collective of forward op `op`, as TPU writes it; false: TPU does not.
  bool Written(const OpRecord& op, TpuCollective base, std::vector<TpuCollective>& out,
               bool recompute) const {
    const CollectiveRecord& w = *op.collective;
    const int64_t n = mesh_.Size(w.axes);
    const int64_t bytes = spmd_.tensor(op.outputs.at(0)).bytes_per_device;
    TpuCollective t = base;
    t.op = Hlo(w.kind);
    t.group = n;
    t.result_bytes = bytes;
    if (w.kind == CollectiveKind::kAllGather && bytes <= kSmallAllGatherBytes) {
      if (recompute) return false;
      t.op = "all-reduce";
      t.rule = TpuRule::kSmallAllGatherAsAllReduce;
      t.reason = fmt::format(
          "all_gather of {} B: TPU's all-gather decomposer writes an all-reduce of the same "
          "bytes (a zero-padded buffer)",
          bytes);
    }
    out.push_back(std::move(t));
    return true;
  }

  // GSPMD's collective `f` at forward op `op`, as TPU writes it; false: TPU does not.
  bool Implied(const OpRecord& op, const ImpliedCollective& f, TpuCollective base,
               std::vector<TpuCollective>& out) const {
    int64_t bytes = TensorBytes(f.local_after, f.dtype);
    TpuCollective t = base;
    t.op = Hlo(f.kind);
    t.group = f.participants;
    t.result_bytes = bytes;
    if (f.kind == CollectiveKind::kPsum && f.dtype == DType::kFloat32 &&
        ReadOnlyAs16Bit(trace_, f.tensor)) {
      // BFloat16Propagation (multi_output_fusion_and_bf16_folding): an all-reduce whose result
      // is only cast to bfloat16 reduces in bfloat16. dense_matmul's float32 weight_sum partial
      // sums over expert, cast to the output dtype: bf16[8,512,512] in tpu_dense_ep4 and
      // tpu_dense_fsdp2_ep4, bf16[4,512,512] in tpu_dense_fsdp2_ep2.
      t.result_bytes = bytes / 2;
      t.rule = TpuRule::kBfloat16Propagation;
      t.reason =
          "float32 partial sums read only as bfloat16: TPU's bfloat16 propagation reduces them in "
          "bfloat16";
    }
    if (f.kind != CollectiveKind::kAllGather) {
      out.push_back(std::move(t));
      return true;
    }
    if (op.kind == OpKind::kTopK) return false;
    if (f.reason != "einsum operand") {
      out.push_back(std::move(t));
      return true;
    }
    if (f.dtype == DType::kFloat32 && options_.default_matmul_precision &&
        !trace_.tensors[static_cast<size_t>(f.tensor)].in_shard_map) {
      bytes /= 2;
      t.result_bytes = bytes;
      t.rule = TpuRule::kBfloat16MatmulOperand;
      t.reason =
          "float32 einsum operand at matmul_precision=default: the MXU reads it as bfloat16 and "
          "TPU gathers the rounded copy";
    }
    if (f.participants == kWindowedGroup) {
      Windowed(out, t, bytes / f.participants,
               fmt::format("einsum operand gathered over {} devices: GSPMD's windowed einsum, {} "
                           "collective-permutes of one device's share",
                           f.participants, kWindowedPermutes));
      return true;
    }
    out.push_back(std::move(t));
    return true;
  }

  const ImpliedCollective* FindImplied(const StepCollective& c) const {
    for (const ImpliedCollective& f : spmd_.implied_at(c.forward_op))
      if (f.tensor == c.tensor && f.kind == c.kind) return &f;
    return nullptr;
  }

  void Backward(const StepCollective& c, TpuCollective base, TpuStepCollectives& out) const {
    if (c.forward_op < 0) {  // every StepCollective names its forward op; kept as it is if not
      out.backward.push_back(ModelKey(c, base));
      return;
    }
    const OpRecord& op = trace_.ops[static_cast<size_t>(c.forward_op)];
    if (c.recompute) {
      bool kept = true;
      std::vector<TpuCollective> lowered;
      if (c.written && op.collective) {
        kept = Written(op, base, lowered, true);
        if (!kept) base.rule = TpuRule::kNotRecomputed;
      } else if (const ImpliedCollective* f = FindImplied(c);
                 f != nullptr && f->reason.find("scatter updates") != std::string::npos) {
        // In the step (jvp) TPU partitions the routing weights' scatter as a scatter-add of each
        // device's updates into the whole [B,S,E], reduce-scattered into the batch sharding
        // (the compiled step's forward: reduce-scatter.fusion of jvp()/scatter-add,
        // bf16 16384 B in every tpu_dense_*fsdp4* step), where the forward compiled alone
        // gathers the updates; remat's re-run is the step's (tpu_dense_fsdp4_remat_full, _minimal).
        TpuCollective t = base;
        t.op = "reduce-scatter";
        t.group = f->participants;
        t.result_bytes = spmd_.tensor(op.outputs.at(0)).bytes_per_device;
        t.rule = TpuRule::kScatterAddReduceScatter;
        t.reason =
            "the step partitions the scatter as a scatter-add of local updates, reduce-scattered";
        lowered.push_back(std::move(t));
      } else if (const ImpliedCollective* f = FindImplied(c)) {
        kept = Implied(op, *f, base, lowered);
        if (!kept) base.rule = TpuRule::kShardedTopK;
      } else {
        lowered.push_back(ModelKey(c, base));
      }
      if (!kept) {
        base.op = Hlo(c.kind);
        base.group = c.participants;
        base.result_bytes = ModelKey(c, base).result_bytes;
        base.reason = base.rule == TpuRule::kNotRecomputed
                          ? "remat's re-run reads the forward's tiny integer all_gather"
                          : "top_k runs on the batch-sharded logits: nothing gathered";
        base.recompute = true;
        out.dropped.push_back(std::move(base));
        return;
      }
      for (TpuCollective& t : lowered) {
        t.recompute = true;
        out.backward.push_back(std::move(t));
      }
      return;
    }
    if (c.kind == CollectiveKind::kPsumScatter && c.participants == kWindowedGroup) {
      if (c.written) {
        TpuCollective t = base;
        t.op = "all-reduce";
        t.group = c.participants;
        t.result_bytes = TensorBytes(c.local_before, c.dtype);
        t.rule = TpuRule::kUnfusedWholeTorus;
        // tpu_sparse_fsdp8: the three shard_map psums over fsdp=8 are one combined all-reduce
        // of the whole kernels, each sliced after (the fusion pass changed nothing).
        t.reason =
            "psum sliced back over all 8 devices of v5p-16: TPU does not fuse it into a "
            "reduce-scatter; all-reduced whole, then sliced";
        out.backward.push_back(std::move(t));
        return;
      }
      if (op.kind == OpKind::kEinsum) {
        Windowed(out.backward, base, TensorBytes(c.local_after, c.dtype),
                 fmt::format("gradient of an einsum operand reduce-scattered over {} devices: "
                             "GSPMD's windowed einsum, {} collective-permutes of the share",
                             c.participants, kWindowedPermutes));
        return;
      }
    }
    if (c.kind == CollectiveKind::kPsumScatter && UnfusedMinorDim(trace_, c)) {
      TpuCollective t = base;
      t.op = "all-reduce";
      t.group = c.participants;
      t.result_bytes = TensorBytes(c.local_before, c.dtype);
      t.rule = TpuRule::kUnfusedMinorDim;
      t.reason = fmt::format(
          "{}-byte share of the layout's minor dim (under {} B): TPU's all-reduce-scatter fusion "
          "refuses it; all-reduced whole, then sliced",
          MinorShareBytes(trace_, c), kMinMinorShareBytes);
      out.backward.push_back(std::move(t));
      return;
    }
    out.backward.push_back(ModelKey(c, base));
  }

 private:
  // The step model's collective as TPU runs it when no rule rewrites it: its own dtype (the
  // XLA:CPU result scaled back from float32), a reduce-scatter's result the device's share.
  // An entry that rides in XLA:CPU's all-reduce before it (xla_cpu_op "-") is its own op on TPU.
  static TpuCollective ModelKey(const StepCollective& c, TpuCollective base) {
    int64_t bytes =
        c.xla_cpu_result_bytes * ByteSize(c.dtype) / ByteSize(XlaCpuCollectiveDType(c.dtype));
    if (c.kind == CollectiveKind::kPsumScatter && c.xla_cpu_op == "all-reduce")
      bytes /= c.participants;
    if (c.xla_cpu_op == "-") bytes = TensorBytes(c.local_after, c.dtype);
    base.op = Hlo(c.kind);
    base.group = c.participants;
    base.result_bytes = bytes;
    return base;
  }

  const Mesh& mesh_;
  const Trace& trace_;
  const SpmdResult& spmd_;
  const TpuLoweringOptions& options_;
};

// TPU's all-reduce combiner runs after the all-reduce-scatter fusion and sends the all-reduces
// that stayed whole over one group as one tuple all-reduce: tpu_dense_fsdp4's four gradients
// (router and three kernels, 25174016 B), tpu_sparse_fsdp4's router and wo, tpu_sparse_fsdp8's
// three kernels, and moe.py's two decomposed all_gathers (tpu_sparse_ep4: s32[64] and s32[16]).
void Combine(std::vector<TpuCollective>& list) {
  std::map<std::pair<int64_t, bool>, int> first;
  for (size_t i = 0; i < list.size(); ++i) {
    TpuCollective& t = list[i];
    if (t.op != "all-reduce" || t.rule == TpuRule::kAsModelled) continue;
    const auto [it, added] =
        first.emplace(std::make_pair(t.group, t.recompute), static_cast<int>(i));
    t.combined_group = it->second;
    if (!added) list[static_cast<size_t>(it->second)].combined_group = it->second;
  }
  // A group of one is no combination.
  std::map<int, int> members;
  for (const TpuCollective& t : list)
    if (t.combined_group >= 0) ++members[t.combined_group];
  for (TpuCollective& t : list)
    if (t.combined_group >= 0 && members[t.combined_group] < 2) t.combined_group = -1;
}

// What becomes of a backward collective before the per-collective rules: kept (kAsModelled),
// folded into an earlier one (`into`), or replaced by one all-reduce (`group`, `result_bytes`).
struct BackwardMerge {
  TpuRule rule = TpuRule::kAsModelled;
  std::string op = "all-reduce";
  int into = -1;
  int64_t group = 1;
  int64_t result_bytes = 0;
  std::string reason;
};

// Whether GSPMD on TPU computes the weight gradient of einsum `op` from its cotangent gathered
// over the batch axes `c` reduces over: the einsum's output is sharded on a weight letter (E)
// over an axis that also shards the activation's batch (dense_matmul's wi_0 and wi_1,
// BSM,EMH->BSEH, under fsdp x expert, where MaxText's activation batch includes expert).
bool GathersCotangentOverBatch(const Trace& trace, const SpmdResult& spmd, const OpRecord& op,
                               const StepCollective& c) {
  if (op.kind != OpKind::kEinsum || !op.einsum || op.inputs.size() != 2 || c.axes.empty() ||
      c.tensor < 0)
    return false;
  if (trace.tensors[static_cast<size_t>(c.tensor)].kind != TensorKind::kWeight) return false;
  const Shape& shape = trace.tensors[static_cast<size_t>(c.tensor)].shape;
  int k = -1;
  for (int i = 0; i < 2; ++i)
    if (trace.tensors[static_cast<size_t>(op.inputs[static_cast<size_t>(i)])].shape == shape) k = i;
  if (k < 0) return false;
  const ParsedEinsum& e = *op.einsum;
  const std::string& w = e.operands[static_cast<size_t>(k)];
  const std::string& x = e.operands[static_cast<size_t>(1 - k)];
  const PartitionSpec* out_spec =
      spmd.SpecOf(trace.tensors[static_cast<size_t>(op.outputs.front())]);
  const PartitionSpec* x_spec =
      spmd.SpecOf(trace.tensors[static_cast<size_t>(op.inputs[static_cast<size_t>(1 - k)])]);
  if (out_spec == nullptr || x_spec == nullptr || out_spec->rank() != e.output.size() ||
      x_spec->rank() != x.size())
    return false;
  std::vector<std::string> batch_axes;  // the activation's batch letters' axes
  for (size_t d = 0; d < x.size(); ++d)
    if (w.find(x[d]) == std::string::npos && e.output.find(x[d]) != std::string::npos)
      for (const std::string& a : (*x_spec)[d]) batch_axes.push_back(a);
  for (size_t d = 0; d < e.output.size(); ++d) {
    const char l = e.output[d];
    if (w.find(l) == std::string::npos || x.find(l) != std::string::npos) continue;
    for (const std::string& a : (*out_spec)[d])
      if (std::find(batch_axes.begin(), batch_axes.end(), a) != batch_axes.end()) return true;
  }
  return false;
}

std::vector<BackwardMerge> MergesOf(const Mesh& mesh, const Trace& trace, const SpmdResult& spmd,
                                    const std::vector<StepCollective>& backward) {
  std::vector<BackwardMerge> out(backward.size());
  // XLA's reduce-scatter / all-reduce reassociation: the partial sums of one gradient from
  // several VJPs, reduced into the same sharding, are added first and reduced once. The block
  // input's gradient from wi_0's and wi_1's VJPs: one reduce-scatter over tensor in
  // tpu_mlp_fsdp2_tp2 and tpu_dense_fsdp2_tp2 ([4,512,256]), over expert in tpu_dense_ep4,
  // where the model reduces each VJP's partial sums.
  std::map<std::string, int> first;
  for (size_t i = 0; i < backward.size(); ++i) {
    const StepCollective& c = backward[i];
    if (c.written || c.recompute || c.participants <= 1 ||
        (c.kind != CollectiveKind::kPsumScatter && c.kind != CollectiveKind::kPsum))
      continue;
    const std::string key = fmt::format("{} {} {} {} {} {}", c.tensor, static_cast<int>(c.kind),
                                        fmt::join(c.axes, ","), fmt::join(c.local_before, ","),
                                        fmt::join(c.local_after, ","), ToString(c.dtype));
    const auto [it, added] = first.emplace(key, static_cast<int>(i));
    if (added) continue;
    out[i].rule = TpuRule::kReassociated;
    out[i].into = it->second;
    out[i].reason =
        "partial sums of the same gradient from another VJP: TPU adds them before the one "
        "reduction (reassociation)";
  }
  // The scatter's transpose (a gather of the routing weights' [B,S,E] cotangent at the top-k
  // slots): where that cotangent is sharded on the scattered dim (E), GSPMD gathers each
  // device's slots locally (zeros for the others) and all-reduces the updates-shaped [B,S,K]
  // result over every axis the model gathers on, instead of all-gathering [B,S,E]:
  // tpu_dense_ep4 (bf16[8,512,2] over expert), tpu_dense_fsdp2_ep4 (bf16[16,512,2] over fsdp x
  // expert). Sharded only on the batch (tpu_dense_fsdp4), the cotangent is all-gathered.
  std::map<int, std::vector<size_t>> by_scatter;
  for (size_t i = 0; i < backward.size(); ++i) {
    const StepCollective& c = backward[i];
    if (c.written || c.recompute || c.participants <= 1 || c.kind != CollectiveKind::kAllGather ||
        c.forward_op < 0)
      continue;
    const OpRecord& op = trace.ops[static_cast<size_t>(c.forward_op)];
    if (op.kind == OpKind::kScatterSet && op.inputs.size() >= 3 && c.tensor == op.outputs.front())
      by_scatter[c.forward_op].push_back(i);
  }
  for (const auto& [op_id, members] : by_scatter) {
    const OpRecord& op = trace.ops[static_cast<size_t>(op_id)];
    const int updates = op.inputs[2];
    const Shape& u = trace.tensors[static_cast<size_t>(updates)].shape;
    const Shape& o = trace.tensors[static_cast<size_t>(op.outputs.front())].shape;
    if (u.size() != o.size()) continue;
    bool on_scattered_dim = false;
    int64_t group = 1;
    for (const size_t i : members) {
      const StepCollective& c = backward[i];
      group *= c.participants;
      for (size_t d = 0; d < c.local_before.size() && d < c.local_after.size() && d < u.size(); ++d)
        on_scattered_dim |= c.local_before[d] != c.local_after[d] && u[d] != o[d];
    }
    if (!on_scattered_dim) continue;
    const StepCollective& head = backward[members.front()];
    for (const size_t i : members) {
      out[i].rule = TpuRule::kScatterTransposeAllReduce;
      out[i].reason = fmt::format(
          "the scatter's transpose reads the cotangent sharded on the scattered dim: each device "
          "gathers its slots, and the {}-shaped result is all-reduced",
          trace.tensors[static_cast<size_t>(updates)].name);
      if (i != members.front()) out[i].into = static_cast<int>(members.front());
    }
    out[members.front()].group = group;
    // The forward gathered the updates whole for the replicated scatter (ScatterCotangent's
    // precondition), so its transpose's result is the whole updates array.
    out[members.front()].result_bytes = TensorBytes(u, head.dtype);
  }
  // dense_matmul under fsdp x expert: GSPMD on TPU gathers wi_0's and wi_1's [B,S,E/EP,H]
  // cotangents over fsdp (ffn_act's transpose) instead of reducing their weight gradients'
  // partial sums over the batch, so the block input's gradient holds the whole batch and is
  // all-reduced over expert. Both fixtures (tpu_dense_fsdp2_ep2: bf16[8,512,4,1024],
  // tpu_dense_fsdp2_ep4: bf16[16,512,4,1024]) and four held-out compiles of fsdp=2 x expert=2
  // (emb 128 / H 256 / sequence 128, sequence 64, H 4096, float32 activations) do so; wo's
  // gradient is reduce-scattered as the model plans. XLA:CPU's compiles at the oracle's small
  // dims reduce-scatter instead (the model's plan).
  std::map<int, std::vector<std::string>> gathered_ops;  // forward op -> the batch axes
  for (size_t i = 0; i < backward.size(); ++i) {
    const StepCollective& c = backward[i];
    if (c.written || c.recompute || c.kind != CollectiveKind::kPsumScatter || c.forward_op < 0 ||
        out[i].rule != TpuRule::kAsModelled)
      continue;
    const OpRecord& op = trace.ops[static_cast<size_t>(c.forward_op)];
    if (!GathersCotangentOverBatch(trace, spmd, op, c)) continue;
    gathered_ops[c.forward_op] = c.axes;
    const int result = op.outputs.front();
    out[i].rule = TpuRule::kCotangentGatheredOverBatch;
    out[i].op = "all-gather";
    out[i].group = mesh.Size(c.axes);
    out[i].result_bytes = TensorBytes(spmd.tensor(result).local_shape,
                                      trace.tensors[static_cast<size_t>(result)].dtype) *
                          out[i].group;
    out[i].reason = fmt::format(
        "GSPMD on TPU gathers {}'s cotangent over {} for this weight gradient (no reduction of "
        "the gradient over the batch)",
        trace.tensors[static_cast<size_t>(result)].name, fmt::join(c.axes, ", "));
  }
  for (size_t i = 0; i < backward.size(); ++i) {
    const StepCollective& c = backward[i];
    const auto it = gathered_ops.find(c.forward_op);
    if (it == gathered_ops.end() || c.written || c.recompute ||
        c.kind != CollectiveKind::kPsumScatter || out[i].rule != TpuRule::kAsModelled)
      continue;
    out[i].rule = TpuRule::kCotangentGatheredOverBatch;
    out[i].group = c.participants;
    out[i].result_bytes = TensorBytes(c.local_before, c.dtype) * mesh.Size(it->second);
    out[i].reason = fmt::format(
        "the cotangent was gathered over {}: this gradient's partial sums hold the whole batch "
        "there and are all-reduced",
        fmt::join(it->second, ", "));
  }
  return out;
}

}  // namespace

std::string RewriteSummary(const TpuStepCollectives& tpu) {
  std::map<TpuRule, int> count;
  for (const std::vector<TpuCollective>* list : {&tpu.forward, &tpu.backward, &tpu.dropped})
    for (const TpuCollective& c : *list)
      if (c.rule != TpuRule::kAsModelled) ++count[c.rule];
  std::string out;
  for (const auto& [rule, n] : count)
    out += fmt::format("{}{} {}", out.empty() ? "" : ", ", n, ToString(rule));
  return out;
}

std::vector<ModelForwardCollective> ModelForwardCollectives(const Mesh& mesh, const Trace& trace,
                                                            const SpmdResult& spmd) {
  std::vector<ModelForwardCollective> out;
  for (const OpRecord& op : trace.ops) {
    if (op.collective && op.collective->origin == CollectiveOrigin::kWritten &&
        mesh.Size(op.collective->axes) > 1)
      out.push_back({op.id, true, nullptr});
    for (const ImpliedCollective& c : spmd.implied_at(op.id))
      if (c.kind != CollectiveKind::kSlice && c.participants > 1) out.push_back({op.id, false, &c});
  }
  return out;
}

TpuStepCollectives LowerForTpu(const Mesh& mesh, const Trace& trace, const SpmdResult& spmd,
                               const StepResult* step, const TpuLoweringOptions& options) {
  const Lowering lowering(mesh, trace, spmd, options);
  TpuStepCollectives out;
  const std::vector<ModelForwardCollective> forward = ModelForwardCollectives(mesh, trace, spmd);
  for (size_t i = 0; i < forward.size(); ++i) {
    const ModelForwardCollective& m = forward[i];
    const OpRecord& op = trace.ops[static_cast<size_t>(m.op)];
    TpuCollective base;
    base.source = static_cast<int>(i);
    base.tensor = m.written ? (op.inputs.empty() ? -1 : op.inputs.front()) : m.implied->tensor;
    const bool kept = m.written ? lowering.Written(op, base, out.forward, false)
                                : lowering.Implied(op, *m.implied, base, out.forward);
    if (!kept) {
      base.op = HloName(m.written ? op.collective->kind : m.implied->kind);
      base.group = m.implied ? m.implied->participants : mesh.Size(op.collective->axes);
      base.result_bytes = m.implied ? TensorBytes(m.implied->local_after, m.implied->dtype) : 0;
      base.rule = TpuRule::kShardedTopK;
      base.reason = "top_k runs on the batch-sharded logits: nothing gathered";
      out.dropped.push_back(std::move(base));
    }
  }
  Combine(out.forward);
  if (step == nullptr) return out;
  const std::vector<BackwardMerge> merges = MergesOf(mesh, trace, spmd, step->backward);
  for (size_t i = 0; i < step->backward.size(); ++i) {
    const StepCollective& c = step->backward[i];
    if (c.participants <= 1) continue;
    TpuCollective base;
    base.source = static_cast<int>(i);
    base.tensor = c.tensor;
    // A parameter gathered whole for a VJP is resharded where it enters the step, as on
    // XLA:CPU; the block output's cotangent is not: TPU gathers it in the backward
    // (tpu_mlp_fsdp2_tp2: all-gather.10, op_name transpose(jvp())/convert_element_type).
    base.argument = c.argument && c.tensor >= 0 &&
                    trace.tensors[static_cast<size_t>(c.tensor)].kind == TensorKind::kWeight;
    const BackwardMerge& m = merges[i];
    if (m.rule == TpuRule::kAsModelled) {
      lowering.Backward(c, base, out);
      continue;
    }
    base.rule = m.rule;
    base.reason = m.reason;
    if (m.into >= 0) {  // folded into an earlier collective
      base.op = HloName(c.kind);
      base.group = c.participants;
      base.result_bytes = TensorBytes(c.local_after, c.dtype);
      out.dropped.push_back(std::move(base));
      continue;
    }
    base.op = m.op;
    base.group = m.group;
    base.result_bytes = m.result_bytes;
    out.backward.push_back(std::move(base));
  }
  Combine(out.backward);
  return out;
}

}  // namespace shardtrace
