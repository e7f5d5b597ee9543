// The whole training step of a MaxText model on a slice, per device, symbolic at full size:
// what `fit` prints and `plan` ranks. It composes, rather than re-derives: the parameters
// come from MaxText's own layout of the model (model/layouts.h) placed by the config's
// logical axis rules on its mesh; each MoE, shared-expert and dense MLP layer is the block
// the tracer runs (run/run.h, RunRequest::step: its kept residuals, backward temporaries and
// collectives); attention, the embedding and the logits are shapes and shardings of their
// own (model/attention_step.h, model/logits_step.h). The result names its memory fields as
// MaxText's compiled step's memory_analysis() does, so a fixture compiled by the TPU compiler
// compares field by field.
//
// The memory plan (docs/fit.md):
//   argument = parameters + optimizer state (adamw/adam_pax: mu and nu; sgd: none) + the
//              batch (inputs, positions, segmentations, targets: int32 [batch, length])
//   output   = the new state; alias = the donated state it reuses
//   temp     = gradients (sharded like the parameters) + what each layer keeps for the
//              backward x layers (the scan's carry, and the names the remat policy saves)
//              + on TPU, the scanned weights cast to the activation dtype when stored wider
//              + the largest of: one layer's backward (its block's gathered weights, their
//              unreduced gradients, residuals and cotangents), the logits and cross-entropy
//   peak     = argument + output - alias + temp, against the device's HBM.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "config/remat_policy.h"
#include "ir/collective_kind.h"
#include "model/block_cache.h"
#include "model/hardware.h"
#include "model/layouts.h"
#include "model/unmodelled.h"
#include "numeric/array.h"
#include "shard/mesh.h"
#include "shard/partition_spec.h"
#include "util/warnings.h"

namespace shardtrace {

// What every fit reads and no config changes, loaded once and shared by the fits of one
// command (fit's variants, plan's configs). Immutable.
struct FitTables {
  HardwareTable hardware;  // the embedded chip table, or --hardware's
  LayoutTable layouts;
};
FitTables LoadFitTables(const HardwareFile& hardware);

struct FitRequest {
  // MaxText's argv: config files, then key=value (compile_topology=, compile_topology_num_slices=).
  std::vector<std::string> args;
  std::optional<int64_t> devices;  // --devices (no compile_topology: GPUs or any machine)
  std::optional<double> hbm_gib;   // --hbm: memory per device with --devices
  std::optional<std::string> chip;  // --chip: a chip table row for --devices
  HardwareFile hardware;  // --hardware FILE (empty: the embedded chip table)
  // Compute the "what would make it fit" variants (each a whole fit of its own).
  bool variants = true;
  // Parsed config files shared between fits (plan's); not owned; null: Fit makes one for its
  // own fit and its variants.
  ParsedYamlCache* yaml_cache = nullptr;
  // The tables `hardware` names, shared between fits; null: Fit loads them.
  std::shared_ptr<const FitTables> tables;
  // Blocks' forward runs shared between fits that differ only in remat_policy (plan's); not
  // owned; null: every fit runs its own.
  BlockCache* block_cache = nullptr;
};

// One parameter array of the model, as MaxText shards it.
struct ParamBuffer {
  std::string path;
  Shape shape;
  DType dtype = DType::kFloat32;
  PartitionSpec spec;
  int64_t bytes_per_device = 0;  // its elements on one device, as MaxText's state reports them
  // What it takes of the device's memory at rest: on TPU in the tiled layout its compiler
  // gives the step's state (model/tpu_tiles.h), elsewhere bytes_per_device. The step's
  // arguments, gradients and optimizer moments are counted in these.
  int64_t hbm_bytes = 0;
  // Its gradient as the step holds it: a gmm's expert kernel's as megablox's tgmm writes it on
  // TPU, in the kernel's own dim order (model/tpu_tiles.h, TpuInOrderBytes); else hbm_bytes.
  int64_t gradient_hbm_bytes = 0;
  ParamRole role = ParamRole::kOther;
  bool trainable = true;  // false: model state with no gradient or optimizer moments
  std::string stack;  // the scanned stack ("layers", "moe_layers", ...) or empty
  std::string loop;   // the scan whose loop runs that stack (ParamLayout::loop)
  int stack_axis = -1;  // the dim its stack's layers are stacked on (MaxText's param_scan_axis)
};

// A named amount of memory per device, with what it is.
struct MemoryItem {
  std::string name;
  int64_t bytes = 0;
  std::string detail;
};

// One scanned stack of identical layers and what one of its layers holds and needs.
struct LayerStack {
  std::string name;  // the stack's logical axis ("layers", "moe_layers", "dense_layers")
  // Its layers in the whole model: a stack nested in another scan's blocks counts them all
  // (Gemma 4's local layers: 5 per block x 5 blocks).
  int64_t layers = 0;
  // The scan whose loop runs it: its own name, or the outer scan whose every iteration runs
  // it beside the stacks that share that loop (their backward runs interleaved, one loop).
  std::string loop;
  // Scanned in blocks of layers (sharing its loop with a nested stack): the blocks, each
  // holding layers / blocks of it.
  int64_t blocks = 1;
  int attention_blocks = 0, linear_attention_blocks = 0, moe_blocks = 0, shared_blocks = 0,
      mlp_blocks = 0;
  std::vector<MemoryItem> kept;  // per layer, on the device
  int64_t kept_bytes = 0;        // per layer
  int64_t offloaded_bytes = 0;   // per layer, to pinned_host
  int64_t backward_peak_bytes = 0;  // one layer's backward temporaries at their peak
  std::string backward_peak_where;
  // One layer's forward temporaries at their peak, where its parts have one of their own
  // (BlockFigures::forward_peak_bytes): the step's forward holds no gradient beside them.
  int64_t forward_peak_bytes = 0;
  // The same in the order TPU's scheduler takes where memory is not ample (block_step.h):
  // what backward_peak_bytes becomes where the step passes kWeightsLastUntilHbm.
  int64_t lean_backward_peak_bytes = 0;
  // What one layer's backward reads that its rematerialized forward writes again: the parts'
  // recomputed residuals, and the weights a part that keeps nothing gathers again.
  int64_t recomputed_bytes = 0;
  // What the layer's rematerialized forward holds once it has run, before its backward reads
  // any of it: the earlier parts' recomputed residuals and the last part's whole rematerialized
  // set (BlockFigures::rematerialized_bytes).
  int64_t rematerialized_bytes = 0;
  int64_t gradient_bytes = 0;  // the stack's parameters' gradients, every layer
  // What of them the backward holds: inlined, in the activation dtype (no loop accumulates
  // them; the cast to the weight dtype fuses into the optimizer's update).
  int64_t held_gradient_bytes = 0;
  // A stack of one layer is a scan of one iteration, which XLA's while-loop simplifier
  // inlines: on TPU its weights are gathered (in the activation dtype) once in the forward
  // and kept for the backward, not cast before a loop and gathered again.
  bool inlined = false;
  int64_t gathered_bytes = 0;  // inlined: its weights gathered, kept from forward to backward
  int64_t cast_bytes = 0;      // looped, TPU: its weights cast to the activation dtype, every layer
  std::vector<MemoryItem> gathered;  // inlined: each array's share of gathered_bytes
  // TPU's compiler peels the first iteration of a layer loop where the step offloads to the
  // host or crosses slices; a stack of two layers is left with no loop (mixtral-8x7b's two
  // such fixtures: no layer loop in the offloaded step's HLO, none in the other's backward).
  bool peeled = false;
  // Peeled, the unrolled backward stacks each weight's gradient layer-major, unlike the
  // parameter (its layers on dim 1): the optimizer's update reads the parameter and moments in
  // the gradient's layout and writes the new ones there, copied back into the donated state
  // after every stacked weight's update (mixtral-8x7b offloaded: 9 f32[8,2,...] copies of
  // wi_0, wi_1 and wo live at once, with wi_1's two per-layer gradients, in 9.0 of the 9.0
  // GiB the compiler's temp covers at its fullest moment). The new state, and the largest
  // gradient the last update reads.
  int64_t relayout_update_bytes = 0;
  int64_t relayout_gradient_bytes = 0;
};

// The step's collectives of one kind over one set of mesh axes.
struct StepCollectiveTotal {
  CollectiveKind kind = CollectiveKind::kAllGather;
  std::vector<std::string> axes;
  int64_t count = 0;              // per step
  int64_t bytes_per_device = 0;   // sent per step
  bool dcn = false;               // crosses slices
  std::string from;               // which parts of the model ("attention, MoE")
  // A weight's all-gather the backward runs again under remat: an inlined stack (a scan of
  // one layer, TPU) keeps the forward's gathered weights instead.
  bool regather = false;
};

// memory_analysis()'s fields, per device.
struct FitMemory {
  int64_t argument_size_in_bytes = 0;
  int64_t output_size_in_bytes = 0;
  int64_t alias_size_in_bytes = 0;
  int64_t temp_size_in_bytes = 0;
  int64_t host_temp_size_in_bytes = 0;
  int64_t peak_memory_in_bytes = 0;
};

// A variant of the config and how it would fit.
struct FitVariant {
  std::vector<std::string> overrides;  // key=value added to the user's
  bool fits = false;
  int64_t peak_bytes = 0;
  int64_t headroom_bytes = 0;  // capacity - peak (negative: short by), as FitResult's
  std::string refused;         // the one-line error when the variant is not a legal config
  std::string note;            // what the row is, where its overrides do not say it all
};

// fit's peak against the TPU compiler's on its fixtures (peak_memory_in_bytes, or the HBM its
// RESOURCE_EXHAUSTED message says it needed; tests/fit_tpu_test.cc holds the band): from 5.5%
// of HBM under (deepseek3-test at batch 32 at 5.3%, out of HBM either way; gpt-oss-120b at 5.2%,
// whose compiler interleaves the inlined layers' backward with the head's) to 9.0% over
// (DeepSeek-V3 at batch 10, out of HBM either way). A verdict on TPU closer to the line than
// that says so.
inline constexpr double kFitPeakUnderHbm = 0.055;
inline constexpr double kFitPeakOverHbm = 0.09;

// The share of HBM, by fit's count of what TPU's scheduler weighs where it orders a gmm
// block's backward with the weight gradients last (a layer loop's carried state and one
// layer's backward; the whole step for an inlined or peeled stack; ChooseBackwardOrder in
// model/step_peak.h), past which it runs each weight gradient as its dot's backward runs
// instead (model/block_step.h).
// Read from the order of the gmms and tgmms in the dumped compiled backwards
// (tools/maxtext_oracle/tpu_backward_order.py) where fit's two orders differ by more than 1%
// of HBM: weights last with the loop at 42.4% (deepseek2-16b at batch 20 on v5p-16, the whole
// step at 92% of HBM; 6.8% of HBM between the orders), 47.8% (gpt-oss-20b at expert 4 on
// v6e-16) and 50.6% (Qwen3.5 at expert 4 on v6e-16); interleaved at 72.7% (mixtral with two
// layers at sequence 8192 and batch 24; at batch 32, 95%). The line is between; fit takes the
// middle. Past the scheduler's own limit (Chip::scheduler_memory_limit) the whole step decides.
// Three dumps interleave with their loop far under it, for another reason (the same gpt-oss
// shapes on v5p-32 at 16%; deepseek2-16b at tensor 2, 4.6%; gemma4-26b with two blocks, 35.6%),
// where fit's orders differ by 0.6% to 1.4% of HBM.
inline constexpr double kWeightsLastUntilHbm = 0.617;

struct FitResult {
  std::string revision;  // the MaxText revision whose layouts and moe.py it follows
  Target target;
  Mesh mesh;
  std::string model_name;
  std::vector<std::pair<std::string, std::string>> settings;  // key, value as used
  RematPolicy policy;
  std::vector<ParamBuffer> params;
  int64_t parameter_count = 0;
  int64_t parameter_bytes = 0;  // in HBM (ParamBuffer::hbm_bytes)
  // Of parameter_bytes, what TPU's tiles add to the arrays' elements (gpt-oss's 2880-wide
  // dims on 2,944 lanes); 0 off TPU.
  int64_t parameter_tile_padding_bytes = 0;
  // Of gradient_bytes, what the expert kernels' gradients take beyond their parameters' bytes,
  // held in megablox's tgmm layout (ParamBuffer::gradient_hbm_bytes).
  int64_t gradient_layout_bytes = 0;
  int64_t optimizer_bytes = 0;
  int64_t batch_bytes = 0;
  int64_t gradient_bytes = 0;
  std::vector<LayerStack> stacks;
  int64_t kept_bytes = 0;       // every layer's kept residuals on the device
  int64_t offloaded_bytes = 0;  // every layer's residuals on the host
  int64_t cast_bytes = 0;  // the scanned weights cast to the activation dtype (TPU)
  int64_t peak_gradient_bytes = 0;  // the gradients live at the peak (inlined stacks' come later)
  std::string peak_gradient_why;    // why they are fewer than all of them, where they are
  int64_t peak_kept_bytes = 0;      // the kept residuals live at the peak (done stacks' are freed)
  int64_t peak_cast_bytes = 0;      // the cast weights live at the peak (done stacks' are freed)
  int64_t gathered_bytes = 0;  // inlined stacks' gathered weights live at the peak (TPU)
  int64_t logits_kept_bytes = 0;  // the logits live in the layers' backward at the peak (TPU)
  int64_t logits_peak_bytes = 0;
  int64_t peak_temporary_bytes = 0;  // the transient part of temp at the step's peak
  // gradient_accumulation_steps > 1: the accumulator, zeros like the parameters, live through
  // the microbatches' scan (model/gradient_accumulation.h); 0 otherwise.
  int64_t accumulator_bytes = 0;
  std::string peak_where;
  FitMemory memory;
  bool fits = false;
  // What the step may hold: the HBM, on TPU its share the compiler schedules within
  // (scheduler_memory_limit in the chip table).
  int64_t capacity_bytes = 0;
  int64_t headroom_bytes = 0;  // capacity - peak (negative: short by)
  // On TPU, the headroom is within fit's measured error of the line (kFitPeakUnderHbm,
  // kFitPeakOverHbm): only a compile can tell.
  bool near_line = false;
  // What the compiler may do here that fit does not count (model/unmodelled.h), each also
  // named in a note; only a compile can tell.
  std::vector<Unmodelled> unmodelled;
  std::vector<MemoryItem> largest;  // the largest buffers live at the peak
  std::vector<StepCollectiveTotal> collectives;
  int64_t collective_bytes_per_device = 0;
  // The step's arithmetic, for `plan`'s time estimate: matmul FLOPs of the forward and
  // backward over the whole mesh (6 x tokens x the parameters a token uses, top-k of the
  // experts; plus causal attention's 6 x batch x length^2 x heads x head dim per layer), and
  // what the remat policy runs again.
  int64_t global_batch = 0;  // sequences per step (every microbatch's)
  int64_t tokens = 0;
  double model_flops = 0;
  double recompute_flops = 0;
  std::vector<FitVariant> variants;
  std::vector<std::string> notes;  // what was assumed, and what is not modelled
  std::vector<Warning> warnings;
};

// Throws Error with one line naming the key, flag or file for bad input.
FitResult Fit(const FitRequest& request);

}  // namespace shardtrace
