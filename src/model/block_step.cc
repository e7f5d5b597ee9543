#include "model/block_step.h"

#include <algorithm>
#include <map>
#include <set>

#include "model/attention_step.h"
#include "model/tpu_tiles.h"
#include "numeric/einsum.h"
#include "run/run.h"
#include "spmd/spmd_memory_estimate.h"
#include "spmd/step_model.h"
#include "spmd/tpu_collectives.h"
#include "util/checked.h"
#include "util/error.h"

namespace shardtrace::model_internal {
namespace {

// Kept by the remat policy on the device (or offloaded): not written again in the backward.
bool Kept(const StepMemory& m, int tensor) {
  return std::any_of(m.saved.begin(), m.saved.end(),
                     [&](const SavedResidual& s) { return s.tensor == tensor; });
}

// A marker passes its operand on unchanged: its value's real readers come after it.
bool IsMarker(OpKind k) {
  return k == OpKind::kCheckpointName || k == OpKind::kOptimizationBarrier ||
         k == OpKind::kShardingConstraint;
}

// The einsum operands TPU's compiler copies batch-major in the backward, before the
// rematerialized forward's dot reads them: an activation operand of an einsum with a weight,
// whose batch letters (in every operand and the output) are not its leading dims. The dense
// dispatch's wo einsum (BSEH,EHM->BSEM) reads the ffn_act product expert-major; the forward
// writes the product so, but the backward's product is also read by wo's weight gradient, in
// another layout. gpt-oss-20b's dump on v6e-8 copies the rematerialized bf16[2,2048,32,2880]
// from {1,3,2,0} to {1,3,0,2} for the rematted wo dot alone (copy.2325, both of its
// ffn_act/mul copies in rematted_computation), and such a copy is at the compiler's fullest
// moment beside wi_0's and wi_1's outputs and the product on Mixtral at fsdp 8 on v5p-16,
// gpt-oss-20b at 2 layers and qwen3-30b on v6e-8 and v6e-16. The capacity path's
// EBCH,EHM->EBCM reads its operand expert-major already: no copy. By the residual the operand
// is an alias of (through casts and markers), with its bytes.
struct BatchMajorCopy {
  int64_t bytes = 0;
  int einsum = -1;  // the dot that reads it
  int kernel = -1;  // its weight operand as the dot reads it
};
std::map<int, BatchMajorCopy> BatchMajorCopies(const RunResult& run, const StepMemory& m) {
  const Trace& trace = run.trace;
  std::vector<int> producer(trace.tensors.size(), -1);
  for (const OpRecord& op : trace.ops) {
    for (const int o : op.outputs) producer[static_cast<size_t>(o)] = op.id;
  }
  const auto is_alias = [](OpKind k) { return k == OpKind::kAstype || IsMarker(k); };
  std::map<int, int64_t> residual;
  for (const StepRange& r : m.backward_ranges) {
    if (!r.buffer.cotangent) residual[r.buffer.tensor] = r.buffer.bytes;
  }
  // `t`, or what it is a cast or marker of, back to the first tensor `stop` accepts.
  const auto source = [&](int t, const auto& stop) {
    while (!stop(t) && producer[static_cast<size_t>(t)] >= 0 &&
           is_alias(trace.ops[static_cast<size_t>(producer[static_cast<size_t>(t)])].kind)) {
      t = trace.ops[static_cast<size_t>(producer[static_cast<size_t>(t)])].inputs[0];
    }
    return t;
  };
  std::map<int, BatchMajorCopy> out;
  for (const OpRecord& op : trace.ops) {
    if (op.kind != OpKind::kEinsum || !op.einsum || op.inputs.size() != 2) continue;
    const ParsedEinsum& e = *op.einsum;
    const int weight = source(op.inputs[1], [](int) { return false; });
    if (trace.tensors[static_cast<size_t>(weight)].kind != TensorKind::kWeight || e.batch.empty() ||
        e.operands[0].compare(0, e.batch.size(), e.batch) == 0) {
      continue;
    }
    const int t = source(op.inputs[0], [&](int x) { return residual.count(x) > 0; });
    if (residual.count(t)) out[t] = {residual.at(t), op.id, op.inputs[1]};
  }
  return out;
}

// What a block's rematerialized forward holds once it has run, before its backward reads any
// of it, as a fusing compiler writes it: each matmul's activation operands and output the
// policy does not keep (the gmms where the block has them, else its einsums: a dense MLP's),
// and of the rest the backward reads what a non-elementwise op reads (the combine's float32
// input); bias adds, clamps, scales and activations are computed inside their readers.
// gpt-oss-120b's rematerialized forward beside the logits' backward: the sorted tokens, three
// bf16[16384,2880] gmm outputs, the ffn_act product wo's gmm reads and f32[4096,4,2880];
// deepseek2-16b's dense layer beside the MoE layers' backward on v5p-16: its input, wi_0's and
// wi_1's outputs and their product, three bf16[4,4096,10944]. Each at its bytes on the device
// (an einsum's tensors are the block's whole arrays; a gmm's, inside shard_map, the device's).
int64_t RematerializedBytes(const RunResult& run, const StepResult& step) {
  const Trace& trace = run.trace;
  const bool gmm = std::any_of(trace.ops.begin(), trace.ops.end(),
                               [](const OpRecord& op) { return op.kind == OpKind::kGmm; });
  std::map<int, int64_t> device_bytes;
  for (const StepRange& r : step.memory.backward_ranges) {
    if (!r.buffer.cotangent) device_bytes[r.buffer.tensor] = r.buffer.bytes;
  }
  const auto bytes_of = [&](int t) -> int64_t {
    if (!gmm) return device_bytes.count(t) ? device_bytes.at(t) : 0;
    const TensorRecord& r = trace.tensors[static_cast<size_t>(t)];
    return CheckedMul(NumElements(r.shape), ByteSize(r.dtype), "a gmm buffer");
  };
  std::map<int, int64_t> held;
  std::set<int> read_whole;
  for (const OpRecord& op : trace.ops) {
    if (op.kind == (gmm ? OpKind::kGmm : OpKind::kEinsum) && !op.inputs.empty()) {
      // A gmm's token operand (its others are the kernel and the group sizes); an einsum's
      // operands but its weights.
      std::vector<int> held_here;
      for (size_t i = 0; i < (gmm ? 1 : op.inputs.size()); ++i) {
        const int t = op.inputs[i];
        if (trace.tensors[static_cast<size_t>(t)].kind != TensorKind::kWeight) {
          held_here.push_back(t);
        }
      }
      if (!op.outputs.empty()) held_here.push_back(op.outputs.front());
      for (int t : held_here) {
        if (!Kept(step.memory, t)) held[t] = bytes_of(t);
      }
    }
    if (!IsElementwise(op.kind) && !IsMarker(op.kind)) {
      read_whole.insert(op.inputs.begin(), op.inputs.end());
    }
  }
  for (const StepRange& r : step.memory.backward_ranges) {
    const TensorRecord& t = trace.tensors[static_cast<size_t>(r.buffer.tensor)];
    if (r.buffer.cotangent || t.kind == TensorKind::kWeight || Kept(step.memory, r.buffer.tensor) ||
        read_whole.count(r.buffer.tensor) == 0) {
      continue;
    }
    held[r.buffer.tensor] = r.buffer.bytes;
  }
  int64_t total = 0;
  for (const auto& [tensor, bytes] : held) total += bytes;
  for (const auto& [tensor, copy] : BatchMajorCopies(run, step.memory)) {
    if (held.count(tensor)) total += copy.bytes;
  }
  return total;
}

// The backward's peak as TPU's compiler writes the block, taken again over its schedule
// (measured on the TPU fixtures, docs/fit.md):
// - without a weight's whole unreduced gradient: TPU reduces it with an all-reduce-scatter
//   fused into the dot that produces it. Except where the fusion is refused (`unfused`):
//   a bf16 share of the layout's minor dim under 512 bytes (spmd/tpu_collectives.h
//   kUnfusedMinorDim), that gradient all-reduced whole (DeepSeek-V3 at fsdp 128); and across
//   slices, every gmm's, reduce-scattered whole (RunBlocks);
// - without an activation fused into its elementwise readers (silu(w0) of silu(w0) * w1);
// - an elementwise op's operand, where its VJP is that operand's last reader, shares its
//   buffer with the VJP's output (the activation's VJP fusion writes where the recomputed
//   gmm outputs were: qwen3-30b's fusion.760 starts where gmm.3, .4 and .5 end).
// Then in one of two orders:
// - kWeightGradientsLast, the scheduler's choice with memory to spare: every gmm's
//   activation gradient runs before any weight gradient (tgmm), one reduced whole (`unfused`)
//   included: it is written at the block's first gmm with the others. What the tgmms read (each
//   gmm's token operand and its output's cotangent) is held down to the block's first gmm,
//   each kernel until its activation gradient has read it, and the sorted tokens' cotangent
//   is written as two partials and their sum. The compiler's fullest moment holds five
//   [rows, emb], three [rows, mlp] and both gathered wi kernels (qwen3-30b at expert 2, its
//   dump read instruction by instruction: at the first of the two wi activation gradients,
//   five bf16[131072,2048] already written and the other wi kernel not yet read; two wi
//   kernels also at the fullest moment of qwen3-235b at expert 2, qwen3-30b on v6e-8,
//   DeepSeek-V3 and gemma4-26b). This schedule reaches that count at the sum, so it holds
//   the wi kernels until the sum (StepRange::kernel_summed_at): the count measured, not the
//   compiler's order of those writes;
// - kWeightGradientsEach, where memory is not ample (whole_step.h, kWeightsLastUntilHbm):
//   each dot's operand freed once its VJP has read it for the other operand's gradient,
//   before its own cotangent is written. It leaves the MoE backward at three [rows, mlp],
//   three gathered expert kernels and three [rows, emb] (mixtral at sequence 8192 and batch
//   32, at 93% of HBM: three bf16[524288,14336] at the compiler's fullest moment, no weight
//   gradient pending).
enum class TpuBackwardOrder { kWeightGradientsLast, kWeightGradientsEach };

// The combine's float32 input [tokens, k, emb] where TPU writes it as a buffer of its own
// (tensor -1: none), and the dtype of the rows it widens. Its einsum with the router weights
// follows the block's gmms; the gradient of those weights reads it, and TPU's scheduler runs that
// gradient after the gmms' activation gradients, writing the input again there (deepseek2-16b, k =
// 6: f32[16384,6,2048] at 2585-2597, after the last wi activation gradient at 2582, on top of the
// heap; gpt-oss-20b, k = 4: f32[8192,4,2880] at 4243-4251, after the last at 3928). The reshape of
// the [tokens * k, emb] rows to [tokens, k, emb] is a relayout only where k is not a multiple of
// the 8-row sublane tile; at k = 8 it is a bitcast the reduction reads in place, no buffer
// (deepseek3-test: no f32[8192,8,512] among its buffers).
struct CombineInput {
  int tensor = -1;
  DType rows = DType::kFloat32;
};

CombineInput DeferredCombineInput(const RunResult& run, const StepMemory& m) {
  int last_gmm = -1;
  for (const OpRecord& op : run.trace.ops)
    if (op.kind == OpKind::kGmm) last_gmm = std::max(last_gmm, op.id);
  if (last_gmm < 0) return {};
  for (const OpRecord& op : run.trace.ops) {
    if (op.id <= last_gmm || op.kind != OpKind::kEinsum) continue;
    for (const int in : op.inputs) {
      const TensorRecord& t = run.trace.tensors[static_cast<size_t>(in)];
      if (t.kind != TensorKind::kAct || t.dtype != DType::kFloat32 || t.shape.size() != 3 ||
          t.shape[1] % kTpuTileRows == 0 ||
          std::none_of(m.backward_ranges.begin(), m.backward_ranges.end(),
                       [&](const StepRange& r) { return r.buffer.tensor == in; })) {
        continue;
      }
      CombineInput found{in, DType::kFloat32};
      for (const OpRecord& producer : run.trace.ops)
        if (std::count(producer.outputs.begin(), producer.outputs.end(), in) &&
            !producer.inputs.empty())
          found.rows = run.trace.tensors[static_cast<size_t>(producer.inputs.front())].dtype;
      return found;
    }
  }
  return {};
}

// Whether TPU's compiler fuses `tensor`, a dot's output widened to float32 and read only by
// dots, into those dots (each reads the narrower output and converts it as it loads), so that
// neither it nor its float32 cotangent is written: the dense dispatch's weight_sum of the wo
// einsum's [batch, length, experts, emb] (qwen3-30b's bf16[2,4096,128,2048] on v6e-8 and
// deepseek2-16b's on v5p-8 at the compiler's fullest moment, no float32 copy of either).
// Not the sparse path's combine input, the gmm's rows unsorted and then widened: the compiler
// fuses that cast into the unsort and writes it in float32 (DeferredCombineInput; at k = 8 too,
// DeepSeek-V3's and qwen3-30b's steps count it within 3% of the compiler's temp).
// A bias added between the dot and the cast fuses the same way: gpt-oss's dense dispatch adds
// wo_bias to the wo einsum's output before the cast, and its step holds bf16[2,2048,32,2880]
// wo outputs and no float32 copy at the compiler's fullest moment (gpt-oss-20b on v6e-8).
bool CastFusedIntoDots(const RunResult& run, int tensor) {
  const TensorRecord& t = run.trace.tensors[static_cast<size_t>(tensor)];
  if (t.kind != TensorKind::kAct || t.dtype != DType::kFloat32) return false;
  // Through the identities between (a sharding constraint, a checkpoint name: one input of the
  // same shape and dtype) and elementwise ops whose other operands are weights (a bias).
  const auto written_by_dot = [&](int source) {
    for (int hops = 0; hops < 8; ++hops) {
      const auto producer =
          std::find_if(run.trace.ops.begin(), run.trace.ops.end(), [&](const OpRecord& op) {
            return std::count(op.outputs.begin(), op.outputs.end(), source) > 0;
          });
      if (producer == run.trace.ops.end()) return false;
      if (producer->kind == OpKind::kEinsum) return true;
      const TensorRecord& out = run.trace.tensors[static_cast<size_t>(source)];
      const auto same = [&](int in) {
        const TensorRecord& r = run.trace.tensors[static_cast<size_t>(in)];
        return r.shape == out.shape && r.dtype == out.dtype;
      };
      const auto through = std::find_if(producer->inputs.begin(), producer->inputs.end(), same);
      if (through == producer->inputs.end()) return false;
      const bool others_weights =
          std::all_of(producer->inputs.begin(), producer->inputs.end(), [&](int in) {
            return in == *through ||
                   run.trace.tensors[static_cast<size_t>(in)].kind == TensorKind::kWeight;
          });
      if (producer->inputs.size() != 1 && !(IsElementwise(producer->kind) && others_weights)) {
        return false;
      }
      source = *through;
    }
    return false;
  };
  bool cast = false, read = false;
  for (const OpRecord& op : run.trace.ops) {
    const bool writes = std::count(op.outputs.begin(), op.outputs.end(), tensor) > 0;
    if (writes) {
      cast = op.kind == OpKind::kAstype && op.inputs.size() == 1 &&
             run.trace.tensors[static_cast<size_t>(op.inputs[0])].dtype != DType::kFloat32 &&
             written_by_dot(op.inputs[0]);
    }
    if (std::count(op.inputs.begin(), op.inputs.end(), tensor) > 0) {
      if (op.kind != OpKind::kEinsum) return false;
      read = true;
    }
  }
  return cast && read;
}

// `narrow_combine_rows`: Chip::narrow_combine_rows.
int64_t TpuBackwardPeak(const RunResult& run, const StepResult& step, const std::set<int>& unfused,
                        const std::set<int>& windowed, TpuBackwardOrder order,
                        bool narrow_combine_rows) {
  const StepMemory& m = step.memory;
  const auto op_of = [&](int id) -> const OpRecord& {
    return run.trace.ops[static_cast<size_t>(id)];
  };
  const auto is_weight = [&](int tensor) {
    return run.trace.tensors[static_cast<size_t>(tensor)].kind == TensorKind::kWeight;
  };
  const bool last = order == TpuBackwardOrder::kWeightGradientsLast && m.first_gmm >= 0;
  // Measured in the weights-last order only (deepseek2-16b at batch 4 to 24, gpt-oss-20b,
  // mixtral on v5p-8 and tpu7x).
  const CombineInput deferred = last ? DeferredCombineInput(run, m) : CombineInput{};
  const std::map<int, BatchMajorCopy> copies = BatchMajorCopies(run, m);
  // The dense dispatch's wo einsum where its kernel is gathered whole in the backward (not
  // windowed): TPU computes its activation gradient with the output's cotangent (the
  // weight_sum's VJP, [batch, length, experts, emb]) fused into the dot, and writes that
  // cotangent whole only for wo's weight gradient, after the block's activation gradients,
  // beside the batch-major copy of the product it reads. qwen3-30b at fsdp 8 on v5p-16 (its
  // dump, schedule steps of one layer's backward): the activation gradient at 1447, in the
  // rematerialized forward, before wi_0 and wi_1 are computed again; the product copied
  // expert-major at 1461; the wi kernels' weight gradients at 2027-2196; the cotangent
  // bf16[128,1,2048,2,4096] (4 GiB) written at 2229 for wo's at 2238-2277, the copy the only
  // other [batch, length, experts, mlp] buffer then. Counted at its wo VJP, fit's temp was
  // 41.2% over the compiler's (held out).
  std::set<int> late;       // such outputs and the markers' aliases of them
  std::set<int> late_copy;  // the products whose copy waits for that weight gradient
  if (m.first_gmm < 0) {
    for (const auto& [product, copy] : copies) {
      if (windowed.count(copy.kernel)) continue;
      late_copy.insert(product);
      late.insert(op_of(copy.einsum).outputs.front());
    }
    for (const OpRecord& op : run.trace.ops) {  // in program order: a marker follows its input
      if (IsMarker(op.kind) && !op.inputs.empty() && !op.outputs.empty() &&
          late.count(op.inputs[0])) {
        late.insert(op.outputs[0]);
      }
    }
  }
  std::vector<int64_t> delta(m.backward_transient.size() + 1, 0);
  const auto add = [&](int lo, int hi, int64_t bytes) {
    if (lo > hi) return;
    delta[static_cast<size_t>(lo)] += bytes;
    delta[static_cast<size_t>(hi) + 1] -= bytes;
  };
  for (const StepRange& r : m.backward_ranges) {
    const StepBuffer& b = r.buffer;
    const bool weight_gradient = b.cotangent && !unfused.count(b.tensor) && is_weight(b.tensor);
    if (weight_gradient || r.fusible_activation || windowed.count(b.tensor)) continue;
    if (b.tensor != deferred.tensor && CastFusedIntoDots(run, b.tensor)) continue;
    if (b.cotangent && late.count(b.tensor)) {
      add(0, 0, b.bytes);  // the block's backward ends at op 0: its weight gradients after it
      continue;
    }
    if (!b.cotangent && b.tensor == deferred.tensor) {
      // Written again after the activation gradients, beside what the tgmms still hold, in its
      // tiles (k on the rows: f32[16384,6,2048] takes 1,024 MiB on deepseek2-16b's v5p-16).
      add(m.first_gmm, m.first_gmm,
          TpuInOrderBytes(run.spmd.tensor(b.tensor).local_shape,
                          narrow_combine_rows ? deferred.rows : DType::kFloat32));
      continue;
    }
    const OpKind reader = op_of(r.lo).kind;
    const bool gmm_kernel = !b.cotangent && reader == OpKind::kGmm && is_weight(b.tensor);
    int lo = r.lo;
    if (last && r.read_by_weight_gradient) {
      lo = std::min(lo, m.first_gmm);
    } else if (last && gmm_kernel && r.kernel_summed_at >= 0) {
      lo = std::min(lo, r.kernel_summed_at);
    } else if (r.freed_before_cotangent && !(last && gmm_kernel)) {
      lo = r.lo + 1;
    } else if (!b.cotangent && (reader == OpKind::kMul || reader == OpKind::kActivation)) {
      lo = r.lo + 1;
    }
    const int64_t bytes =
        gmm_kernel
            ? GmmKernelBytes(b.bytes, run.trace.tensors[static_cast<size_t>(b.tensor)].shape.back(),
                             true)
            : b.bytes;
    // A weight gradient reduced whole is a tgmm's output like the others: in the weights-last
    // order it is written after the activation gradients, at the block's first gmm, not at its
    // own gmm's backward beside the kernels still held (DeepSeek-V3 at fsdp 128 on v5p-256 and
    // V3.2 on v5p-64: the compiler's fullest moment holds all three expert kernels, wo's as the
    // copy of its gather, and no unreduced gradient).
    const bool whole_gradient = b.cotangent && is_weight(b.tensor) && unfused.count(b.tensor);
    const int hi = last && whole_gradient ? std::min(r.hi, m.first_gmm) : r.hi;
    add(lo, hi, bytes);
    // The batch-major copy: made by the rematerialized forward for its dot, before the
    // backward reads anything; held to wo's weight gradient where that runs last (`late`).
    if (!b.cotangent && copies.count(b.tensor)) {
      add(late_copy.count(b.tensor) ? 0 : r.hi, r.hi, bytes);
    }
    if (last && r.summed_at >= 0) add(r.summed_at, r.summed_at, 2 * b.bytes);
  }
  if (last && m.combine_all_to_all > m.first_gmm) {
    // On the ragged all-to-all path, the combining all-to-all's output (the device's routed
    // rows, [rows, emb]) is written again by the rematerialized forward into a buffer the
    // compiler makes before the gmms' activation gradients, and held through them: only the
    // router weights' gradient reads it. At the compiler's fullest moment of all four ragged
    // fixtures: qwen3-30b at expert 2 bf16[65536,2,1024], qwen3-235b bf16[32768,2,2048],
    // deepseek2-16b at expert 4 bf16[12288,2,1024]; kimi-k2's bf16[8192,2,3584] through its
    // wi activation gradients.
    add(m.first_gmm, m.combine_all_to_all, m.combine_bytes);
  }
  int64_t live = 0, peak = 0;
  for (size_t i = 0; i < m.backward_transient.size(); ++i) {
    live += delta[i];
    // A windowed einsum reduces its weight's gradient share by share, never whole.
    const std::vector<int>& in = op_of(static_cast<int>(i)).inputs;
    const bool windowed_op =
        std::any_of(in.begin(), in.end(), [&](int t) { return windowed.count(t) > 0; });
    peak = std::max(peak, live + (windowed_op ? 0 : m.backward_transient[i]));
  }
  return peak;
}

// The expert kernels whose backward einsums TPU runs as windowed einsums (loops of
// collective-permutes of one device's share), never gathering the kernel whole nor reducing its
// gradient whole: the dense dispatch's dropless einsums (BSM,EMH->BSEH), their kernels gathered
// over 8 or 16 devices on a share of whole 128-lane tiles. qwen3-30b on v6e-8 (emb 2048/8) and
// Qwen3-Next on v6e-16 (2048/16): the HLO's kernel all-gathers are the forward's alone, none at
// the compiler's fullest moment in a MoE layer's backward. Not gpt-oss-20b (2880/8 = 360: three
// kernels gathered in each layer's backward) nor the capacity path's einsums (qwen3-30b at
// capacity factor 1: the kernels gathered there too). On v6e (Chip::windowed_dense_backward);
// v5p gathers them (Mixtral at fsdp 8 on v5p-16, shares of 512).
std::set<int> WindowedBackwardKernels(const RunResult& run, const Config& config) {
  std::set<int> out;
  if (config.Float("capacity_factor") > 0) return out;
  for (const OpRecord& op : run.trace.ops) {
    if (op.kind == OpKind::kGmm) return {};
    if (op.kind != OpKind::kEinsum) continue;
    for (const ImpliedCollective& c : run.spmd.implied_at(op.id)) {
      if (c.kind != CollectiveKind::kAllGather || c.reason != "einsum operand" ||
          (c.participants != 8 && c.participants != 16) ||
          run.trace.tensors[static_cast<size_t>(c.tensor)].kind != TensorKind::kWeight ||
          c.local_before.size() != c.local_after.size()) {
        continue;
      }
      bool whole_tiles = false;
      for (size_t d = 0; d < c.local_before.size(); ++d) {
        whole_tiles |= c.local_before[d] != c.local_after[d] && c.local_before[d] % kTpuLanes == 0;
      }
      if (!whole_tiles) continue;
      // The kernel as the einsum reads it (its cast to the activation dtype), and what it moves.
      for (const int in : op.inputs) {
        if (run.trace.tensors[static_cast<size_t>(in)].kind == TensorKind::kWeight) out.insert(in);
      }
      out.insert(c.tensor);
    }
  }
  return out;
}

// The forward's peak as TPU's compiler writes the block: without the float32 casts it fuses
// into the dots that read them (CastFusedIntoDots), which the forward writes nowhere either.
// Qwen3-Next's dense dispatch at 512 experts: fit counted f32 of the wo einsum's
// [1,4096,512,2048] (16 GiB) at its forward's peak, where the compiler's whole step peaks at
// 16.1 GiB in the backward, its bf16[512,1,2048,1,4096] the largest buffer.
int64_t TpuForwardPeak(const RunResult& run, const StepResult& step) {
  const MemoryEstimate& written = run.spmd.memory;
  std::vector<bool> fused = written.fused;
  fused.resize(run.trace.tensors.size(), false);
  bool any = false;
  for (const TensorRecord& t : run.trace.tensors) {
    if (fused[static_cast<size_t>(t.id)] || !CastFusedIntoDots(run, t.id)) continue;
    fused[static_cast<size_t>(t.id)] = true;
    any = true;
  }
  if (!any) return step.memory.forward_temporary_bytes;
  const MemoryEstimate fewer = EstimateMemory(run.trace, run.spmd, fused);
  return step.memory.forward_temporary_bytes -
         std::max<int64_t>(0, written.peak_temporary_bytes - fewer.peak_temporary_bytes);
}

BlockFigures FiguresOf(const RunResult& run, const StepResult& step, const std::string& from,
                       const BlockTarget& target, const std::set<int>& unfused,
                       const std::set<int>& windowed) {
  const bool tpu = target.tpu;
  BlockFigures f;
  for (const SavedResidual& s : step.memory.saved) {
    if (s.offloaded) continue;
    const std::string& tensor = run.trace.tensors[static_cast<size_t>(s.tensor)].name;
    f.kept.push_back({s.name.empty() ? tensor : s.name, s.bytes,
                      fmt::format("{} of the {} block", tensor, from)});
  }
  f.offloaded_bytes = step.memory.offloaded_bytes;
  // Of what the block's backward reads and the layer's rematerialized forward writes again,
  // the gmms' token operands (the sorted tokens) stay from that forward to the block's weight
  // gradients, through the backward of the parts after it. An earlier MoE layer of a block
  // whose layer inputs the policy does not keep holds its whole rematerialized set instead
  // (model/whole_step.cc).
  std::set<int> carried;
  for (const StepRange& r : step.memory.backward_ranges) {
    const TensorRecord& t = run.trace.tensors[static_cast<size_t>(r.buffer.tensor)];
    if (r.buffer.cotangent || !r.read_by_weight_gradient || t.kind == TensorKind::kWeight ||
        Kept(step.memory, r.buffer.tensor) || !carried.insert(r.buffer.tensor).second) {
      continue;
    }
    f.recomputed_bytes += r.buffer.bytes;
  }
  f.rematerialized_bytes = RematerializedBytes(run, step);
  f.grouped = std::any_of(run.trace.ops.begin(), run.trace.ops.end(),
                          [](const OpRecord& op) { return op.kind == OpKind::kGmm; });
  f.backward_peak_bytes = step.memory.peak_temporary_bytes();
  if (tpu) {
    // The forward's peak is its own phase: every expert kernel gathered before the gmms
    // (mixtral under remat minimal: three bf16[8,4096,14336], 2.9 GiB, against the backward's
    // 2.8 GiB), but no gradient beside them yet.
    f.forward_peak_bytes = TpuForwardPeak(run, step);
    f.backward_peak_bytes =
        TpuBackwardPeak(run, step, unfused, windowed, TpuBackwardOrder::kWeightGradientsLast,
                        target.narrow_combine_rows);
    f.lean_backward_peak_bytes =
        TpuBackwardPeak(run, step, unfused, windowed, TpuBackwardOrder::kWeightGradientsEach,
                        target.narrow_combine_rows);
  }
  f.backward_peak_where = fmt::format("{} block backward (spmd/step_memory.h)", from);
  for (const CollectiveTotal& t : run.totals.collectives) {
    f.collectives.push_back({t.kind, t.axes, t.count, t.bytes_sent_per_device, false, from});
  }
  for (const StepCollective& c : step.backward) {
    if (c.bytes_per_device == 0) continue;
    const bool regather =
        c.recompute && c.kind == CollectiveKind::kAllGather && c.tensor >= 0 &&
        run.trace.tensors[static_cast<size_t>(c.tensor)].kind == TensorKind::kWeight;
    f.collectives.push_back({c.kind, c.axes, 1, c.bytes_per_device, false, from, regather});
  }
  return f;
}

// A run's key in a BlockCache: what decides its trace (the block, the device count, every
// argument but the remat policy's keys, which only the step analysis reads).
std::string CacheKey(const RunRequest& request) {
  std::string key = fmt::format("{}\n{}", static_cast<int>(request.block),
                                request.devices ? *request.devices : -1);
  for (const std::string& arg : request.args) {
    if (const size_t eq = arg.find('='); eq != std::string::npos && IsRematKey(arg.substr(0, eq))) {
      continue;
    }
    key += '\n';
    key += arg;
  }
  return key;
}

// `policy` as a block sees it: the names it saves or offloads that the block's trace tags
// (checkpoint_name), which alone decide its step analysis (spmd/step_memory.cc).
std::string InBlockPolicyKey(const RematPolicy& policy, const Trace& trace) {
  if (!policy.wrapped) return "unwrapped";
  std::string key = "wrapped";
  for (const auto* names : {&policy.saved, &policy.offloaded}) {
    key += names == &policy.saved ? "\nsaved:" : "\noffloaded:";
    for (const std::string& n : *names) {
      const bool tagged = std::any_of(trace.checkpoint_tags.begin(), trace.checkpoint_tags.end(),
                                      [&](const CheckpointTag& t) { return t.name == n; });
      if (tagged) key += n + ",";
    }
  }
  return key;
}

}  // namespace

BlockRuns RunBlocks(const RunRequest& base, const RunSetup& setup, const BlocksNeeded& needed,
                    const BlockTarget& target, BlockCache* cache) {
  const bool tpu = target.tpu;
  BlockRuns out;
  const RematPolicy policy = RematPolicyOf(setup.config);
  const auto run = [&](Block block, const std::string& from) {
    RunRequest r = base;
    r.block = block;
    r.step = true;
    const std::string key = CacheKey(r);
    std::shared_ptr<const RunResult> shared = cache ? cache->Find(key) : nullptr;
    if (shared == nullptr) {
      auto fresh = std::make_shared<const RunResult>(RunPreparedSetup(r, setup));
      shared = cache ? cache->Store(key, std::move(fresh)) : std::move(fresh);
    }
    // The step for this config's own policy, on the shared forward run.
    const RunResult& forward = *shared;
    SHARDTRACE_CHECK(forward.step.has_value() && forward.tpu_step.has_value());
    const std::string policy_key = InBlockPolicyKey(policy, forward.trace);
    const bool own = InBlockPolicyKey(forward.step->policy, forward.trace) == policy_key;
    std::shared_ptr<const StepResult> step;
    if (own) {
      step = std::shared_ptr<const StepResult>(shared, &*forward.step);
    } else if (cache != nullptr) {
      const std::string step_key = key + "\n" + policy_key;
      step = cache->FindStep(step_key);
      if (step == nullptr) {
        step = cache->StoreStep(step_key, std::make_shared<const StepResult>(AnalyzeStep(
                                              forward.setup.mesh, forward.trace, forward.spmd, policy)));
      }
    } else {
      step = std::make_shared<const StepResult>(
          AnalyzeStep(forward.setup.mesh, forward.trace, forward.spmd, policy));
    }
    std::set<int> unfused;
    if (tpu) {
      // The collectives table counts GSPMD's plan; say what TPU's compiler writes otherwise.
      TpuLoweringOptions options;
      options.default_matmul_precision = setup.config.Str("matmul_precision") == "default";
      const TpuStepCollectives lowered =
          own ? *forward.tpu_step
              : LowerForTpu(forward.setup.mesh, forward.trace, forward.spmd, step.get(), options);
      for (const TpuCollective& c : lowered.backward) {
        if (c.rule == TpuRule::kUnfusedMinorDim) unfused.insert(c.tensor);
      }
      // Across slices TPU reduce-scatters each gmm weight gradient with a plain reduce-scatter
      // over the slice's fsdp (then to the other slices by send/recv), not fused into an
      // all-reduce-scatter: the tgmms' whole outputs are held (mixtral and qwen3-30b on two
      // v5p-8 slices at 4 layers: three bf16[8,4096,14336], three bf16[128,2048,768]-shaped,
      // at the compiler's fullest moment).
      if (target.slices > 1)
        unfused.insert(step->memory.gmm_kernels.begin(), step->memory.gmm_kernels.end());
      const std::string rewritten = RewriteSummary(lowered);
      if (!rewritten.empty())
        out.notes.push_back(fmt::format(
            "{} block: TPU's compiler writes some collectives otherwise than the table's plan "
            "({}; spmd/tpu_collectives.h, listed by `trace --step`)",
            from, rewritten));
    }
    return FiguresOf(
        forward, *step, from, target, unfused,
        tpu && target.windowed_dense_backward && block == Block::kMoe
            ? WindowedBackwardKernels(forward, setup.config)
            : std::set<int>{});
  };
  if (needed.moe)
    out.moe.push_back(run(Block::kMoe, needed.shared ? "MoE and shared experts" : "MoE"));
  if (needed.mlp) out.mlp.push_back(run(Block::kMlp, "dense MLP"));
  return out;
}

}  // namespace shardtrace::model_internal
