#include "model/step_peak.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <map>

namespace shardtrace::model_internal {

void ComposePeak(const std::vector<std::string>& order, const BlockFigures& logits, FitResult* r) {
  struct Phase {
    int64_t gradients = 0;
    int64_t kept = 0;
    int64_t cast = 0;
    int64_t gathered = 0;
    int64_t transient = 0;  // with the kept logits
    int64_t logits_kept = 0;
    std::string where;
    std::string gradients_why =
        "the stacks whose backward has not begun and the embedding make theirs later";
    int64_t total() const { return gradients + kept + cast + gathered + transient; }
  };
  // The stacks in the forward's order; the gradients outside them (embedding, head, norms).
  std::vector<const LayerStack*> stacks;
  int64_t outside_gradients = r->gradient_bytes;
  for (const std::string& name : order) {
    const auto s = std::find_if(r->stacks.begin(), r->stacks.end(),
                                [&](const LayerStack& l) { return l.name == name; });
    if (s == r->stacks.end()) continue;
    stacks.push_back(&*s);
    outside_gradients -= s->gradient_bytes;
  }
  // Of those, the layers' backward holds the output head's (when it runs first, the logits
  // not kept for it) but not the embedding's, which the first layer's input cotangent makes
  // after the layers' backward (kimi-k2 keeps the logits: no float32 gradient of its head or
  // embedding among the buffers at its fullest moment).
  int64_t head_gradient = 0, embedding_gradient = 0;
  const bool tied = std::none_of(r->params.begin(), r->params.end(), [](const ParamBuffer& p) {
    return p.role == ParamRole::kOutputHead;
  });
  for (const ParamBuffer& p : r->params) {
    if (!p.trainable) continue;
    if (p.role == ParamRole::kOutputHead || (tied && p.role == ParamRole::kEmbedding)) {
      head_gradient += p.hbm_bytes;
    } else if (p.role == ParamRole::kEmbedding) {
      embedding_gradient += p.hbm_bytes;
    }
  }
  // The backward loops, in the forward's order: each stack's own, or one for the stacks a
  // scan runs in every block (ParamLayout::loop).
  std::vector<std::vector<const LayerStack*>> loops;
  for (const LayerStack* s : stacks) {
    if (loops.empty() || loops.back().front()->loop != s->loop) loops.emplace_back();
    loops.back().push_back(s);
  }
  int64_t all_kept = 0, all_cast = 0, all_gathered = 0;
  for (const LayerStack* s : stacks) {
    all_kept += s->kept_bytes * s->layers;
    all_cast += s->cast_bytes;
    all_gathered += s->gathered_bytes;
  }
  const bool tpu = r->target.platform == "tpu";
  const auto largest_phase = [&](int64_t residue) -> Phase {
    // With no loop between them, the compiler runs an inlined last stack's rematerialized
    // forward before the logits' backward ends: at gpt-oss's fullest moment, beside the logits
    // and their cotangent, the splash kernel's residuals, each MoE layer's sorted tokens and
    // the last one's whole rematerialized set (LayerStack::rematerialized_bytes).
    const int64_t early_forward =
        !stacks.empty() && stacks.back()->inlined ? stacks.back()->rematerialized_bytes : 0;
    // An inlined first stack's forward stays until its backward, after the later loops': at
    // the compiler's fullest moment inside the MoE layers' backward loop, deepseek2-16b's dense
    // layer holds its MLP's three bf16[batch,4096,10944] (the forward's own on v5p-8, its
    // rematerialized forward's on v5p-16 and v5p-32, written ahead of the loop) and its
    // attention's q, k and log-sum-exp; on v5e-16 likewise at 3 layers. Without it fit called
    // deepseek2-16b at batch 27 on v5p-16 a fit, which the compiler refuses. DeepSeek-V3 with 4
    // layers on v5p-256 does not hold it (its temp +5.8% with it, -1.1% without).
    const int64_t first_forward =
        stacks.size() > 1 && stacks.front()->inlined ? stacks.front()->rematerialized_bytes : 0;
    // Offloading, the compiler peels the backward loop's first iteration, which reads the last
    // forward iteration's offloaded residuals where the loop left them, in HBM: they stay
    // through the logits' backward. Llama 4 Scout's recipe at fsdp 128 and 512 holds the
    // forward loop's four bf16[8,8192,5120] outputs there, the inputs of its last block's four
    // decoder layers (2.5 GiB, fit's offloaded a layer); gpt-oss-120b's on tpu7x-128 its last
    // block's layer inputs and wo outputs.
    const LayerStack* last = stacks.empty() ? nullptr : stacks.back();
    const int64_t last_offloaded =
        tpu && last != nullptr && !last->inlined && !last->peeled ? last->offloaded_bytes : 0;
    Phase best{
        0,
        all_kept,
        all_cast,
        all_gathered,
        r->logits_peak_bytes + early_forward + last_offloaded,
        0,
        logits.backward_peak_where +
            (early_forward > 0 ? ", beside the inlined layer's rematerialized forward" : "") +
            (last_offloaded > 0 ? ", beside the last layer's offloaded residuals, still in HBM"
                                : "")};
    // What the stacks after the current one (in the forward's order) have made or freed.
    int64_t done_gradients =
        outside_gradients - embedding_gradient - (residue > 0 ? head_gradient : 0);
    int64_t pending_kept = all_kept, pending_cast = all_cast, pending_gathered = all_gathered;
    for (auto group = loops.rbegin(); group != loops.rend(); ++group) {
      // One backward loop: every stack it runs has its accumulators made and its residuals
      // kept until the loop ends; its peak is the largest of their layers'.
      const LayerStack* largest = group->front();
      int64_t own_gradients = 0;
      for (const LayerStack* s : *group) {
        own_gradients += s->inlined ? 0 : s->gradient_bytes;
        if (s->backward_peak_bytes > largest->backward_peak_bytes) largest = s;
      }
      const int64_t early_first = group->front()->inlined ? 0 : first_forward;
      const Phase phase{
          done_gradients + own_gradients,
          pending_kept,
          pending_cast,
          pending_gathered,
          largest->backward_peak_bytes + residue + early_first,
          residue,
          fmt::format("the backward of one layer of {} ({}){}{}", largest->name,
                      largest->backward_peak_where,
                      residue > 0 ? ", beside the logits the output head's "
                                    "gradient reads after the layers' backward"
                                  : "",
                      early_first > 0
                          ? fmt::format(", and {}'s rematerialized forward", stacks.front()->name)
                          : "")};
      if (phase.total() > best.total()) best = phase;
      for (const LayerStack* s : *group) {
        done_gradients += s->inlined ? s->held_gradient_bytes : s->gradient_bytes;
        pending_kept -= s->kept_bytes * s->layers;
        pending_cast -= s->cast_bytes;
        pending_gathered -= s->gathered_bytes;
      }
    }
    return best;
  };
  Phase best = largest_phase(tpu ? logits.residue_bytes : 0);
  const double limit = r->target.chip.scheduler_memory_limit;
  const int64_t argument = r->parameter_bytes + r->optimizer_bytes + r->batch_bytes;
  if (tpu && limit > 0 && !logits.residue_pinned &&
      static_cast<double>(argument + best.total()) >
          limit * static_cast<double>(r->target.hbm_bytes)) {
    best = largest_phase(0);
  }
  // The forward of the largest layer, beside every stack's kept residuals (at most) and cast and
  // gathered weights, before any gradient is made.
  Phase forward{0, all_kept, all_cast, all_gathered, 0, 0, "", ""};
  for (const LayerStack* s : stacks) {
    if (s->forward_peak_bytes <= forward.transient) continue;
    forward.transient = s->forward_peak_bytes;
    forward.where = fmt::format("the forward of one layer of {}", s->name);
  }
  forward.gradients_why = "none before the backward";
  if (forward.total() > best.total()) best = forward;
  // After the backward, the peeled stacks' optimizer update in their gradients' layout
  // (LayerStack::relayout_update_bytes): every weight's new state is written before any is
  // copied back, beside the gradient the last update reads; nothing of the backward is live.
  Phase update{0, 0, 0, 0, 0, 0, "", ""};
  std::vector<std::string> peeled;
  for (const LayerStack* s : stacks) {
    if (s->relayout_update_bytes == 0) continue;
    peeled.push_back(s->name);
    update.transient += s->relayout_update_bytes;
    update.gradients = std::max(update.gradients, s->relayout_gradient_bytes);
  }
  update.where = fmt::format("the optimizer's update of {}, its new state written in the "
                             "gradients' layout before copied back",
                             fmt::join(peeled, " and "));
  update.gradients_why =
      "the largest stacked weight's, which the last update reads; the earlier updates have read "
      "theirs";
  if (update.total() > best.total()) best = update;
  r->peak_gradient_bytes = best.gradients;
  r->peak_gradient_why = best.gradients_why;
  r->peak_kept_bytes = best.kept;
  r->peak_cast_bytes = best.cast;
  r->gathered_bytes = best.gathered;
  r->peak_temporary_bytes = best.transient;
  r->logits_kept_bytes = best.logits_kept;
  r->peak_where = best.where;
}

void RelayoutUpdate(const std::vector<const ParamBuffer*>& params, bool peeled,
                    const std::function<int64_t(const ParamBuffer&)>& moments, LayerStack* s) {
  for (const ParamBuffer* p : params) {
    if (!p->trainable || p->stack_axis <= 0) continue;
    const std::vector<PartitionSpec::Entry>& dims = p->spec.entries();
    if (!peeled && (p->role != ParamRole::kMoe || dims.empty() || !dims.back().empty())) continue;
    s->relayout_update_bytes += p->hbm_bytes + moments(*p);
    s->relayout_gradient_bytes = std::max(s->relayout_gradient_bytes, p->gradient_hbm_bytes);
  }
}

void SettleMemory(FitResult* r) {
  // memory_analysis()'s fields. The state (parameters and optimizer) is donated: the new state
  // aliases it.
  const int64_t state = r->parameter_bytes + r->optimizer_bytes;
  FitMemory& m = r->memory;
  m.argument_size_in_bytes = state + r->batch_bytes;
  m.output_size_in_bytes = state;
  m.alias_size_in_bytes = state;
  m.temp_size_in_bytes = r->peak_gradient_bytes + r->peak_kept_bytes + r->peak_cast_bytes +
                         r->gathered_bytes + r->peak_temporary_bytes + r->accumulator_bytes;
  m.host_temp_size_in_bytes = r->offloaded_bytes;
  m.peak_memory_in_bytes = m.argument_size_in_bytes + m.output_size_in_bytes -
                           m.alias_size_in_bytes + m.temp_size_in_bytes;
  // On TPU the step is held to the share of HBM its compiler schedules within: past it the
  // compile rests on the compiler's rematerialization, which the fixtures show failing
  // (deepseek3-test on v5p-8: batch 30 compiles at 94.8% of HBM, batch 31 runs out at 102.6%,
  // its buffers 5.5 GiB fuller than batch 30's) or passing where the hardware then runs out
  // (DeepSeek-V3 on v5p-256 at batch 8 compiles at 97.6%; the published run "OOMs by 1 GB").
  const double limit = r->target.chip.scheduler_memory_limit;
  r->capacity_bytes = r->target.platform == "tpu" && limit > 0
                          ? static_cast<int64_t>(limit * static_cast<double>(r->target.hbm_bytes))
                          : r->target.hbm_bytes;
  r->fits = m.peak_memory_in_bytes <= r->capacity_bytes;
  r->headroom_bytes = r->capacity_bytes - m.peak_memory_in_bytes;
  const double hbm = static_cast<double>(r->target.hbm_bytes);
  r->near_line = r->target.platform == "tpu" &&
                 static_cast<double>(r->headroom_bytes) <= kFitPeakUnderHbm * hbm &&
                 static_cast<double>(r->headroom_bytes) >= -kFitPeakOverHbm * hbm;
}

void ChooseBackwardOrder(const std::vector<std::string>& order, const BlockFigures& logits,
                         FitResult* r) {
  // TPU's scheduler orders a gmm block's backward with the weight gradients after every
  // activation gradient where the memory it schedules is ample, and runs each as its dot's
  // backward runs where it is not (model/block_step.h, kWeightsLastUntilHbm). It schedules each
  // computation on its own: a looped stack's backward in its loop's body, whose memory is the
  // loop's carried state (every layer's kept residuals, the cast weights and the gradient
  // accumulators of the stacks it runs) and one layer's backward, not what lives outside the
  // loop (the moments, the logits, other loops' state); an inlined or peeled stack's in the
  // step's own computation, the whole step. deepseek2-16b at batch 20 on v5p-16 compiles at
  // 92% of HBM with its weight gradients last (its loop 43%); mixtral with two layers at
  // sequence 8192 and batch 32 at 93% in the second order (its loop 95%; its fullest moment
  // three bf16[524288,14336], no weight gradient pending), where the first would put it at 99%.
  // Past its memory limit the scheduler holds the step under it whatever a loop holds:
  // deepseek2-16b at batch 24 and 25 compiles at 94.8% and 95.6% of HBM, where the first order
  // would put it at 99% and 102% by fit's count (its loop 49% and 51%).
  std::map<std::string, int64_t> carried, layer_peak;
  for (const LayerStack& s : r->stacks) {
    carried[s.loop] += s.kept_bytes * s.layers + s.cast_bytes + s.gradient_bytes;
    layer_peak[s.loop] = std::max(layer_peak[s.loop], s.backward_peak_bytes);
  }
  const auto scheduled = [&](const LayerStack& s) {
    return s.inlined || s.peeled ? r->memory.peak_memory_in_bytes
                                 : carried[s.loop] + layer_peak[s.loop];
  };
  const double hbm = static_cast<double>(r->target.hbm_bytes);
  const double limit = r->target.chip.scheduler_memory_limit;
  const bool past_limit =
      limit > 0 && static_cast<double>(r->memory.peak_memory_in_bytes) > limit * hbm;
  const int64_t last_order = r->memory.temp_size_in_bytes;
  std::vector<std::string> why;
  for (LayerStack& s : r->stacks) {
    if (s.lean_backward_peak_bytes >= s.backward_peak_bytes) continue;
    const int64_t bytes = scheduled(s);
    const bool full = static_cast<double>(bytes) > kWeightsLastUntilHbm * hbm;
    if (!full && !past_limit) continue;
    s.backward_peak_bytes = s.lean_backward_peak_bytes;
    const double gib = static_cast<double>(bytes) / (1 << 30);
    if (!full) {
      why.push_back(fmt::format("the step past its memory limit ({:.0f}% of HBM)", 100 * limit));
    } else if (s.inlined || s.peeled) {
      why.push_back(fmt::format("the step past {:.1f}% of HBM ({:.1f} GiB)",
                                100 * kWeightsLastUntilHbm, gib));
    } else {
      why.push_back(
          fmt::format("the loop of {} past {:.1f}% of HBM (its carried state and one "
                      "layer's backward, {:.1f} GiB)",
                      s.loop, 100 * kWeightsLastUntilHbm, gib));
    }
  }
  if (!why.empty()) {
    ComposePeak(order, logits, r);
    SettleMemory(r);
    why.erase(std::unique(why.begin(), why.end()), why.end());
    r->notes.push_back(fmt::format(
        "TPU's scheduler with {}: each MoE weight gradient as its dot's backward runs, {:.1f} "
        "GiB under the weight gradients last (its order with memory to spare; "
        "model/block_step.h)",
        fmt::join(why, " and "),
        static_cast<double>(last_order - r->memory.temp_size_in_bytes) / (1 << 30)));
  }
}

}  // namespace shardtrace::model_internal
