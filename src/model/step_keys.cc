#include "model/step_keys.h"

#include <fmt/format.h>

#include <optional>

#include "config/config.h"
#include "util/error.h"

namespace shardtrace {
namespace {

constexpr StepKeyStatus R = StepKeyStatus::kRefused;
constexpr StepKeyStatus N = StepKeyStatus::kNoted;

// Facts: the release's base.yml (MaxText 0.2.5, testdata/maxtext/configs/base.yml) and where
// its train step reads each key (trainers/pre_train/train.py and the layers it builds). Order:
// base.yml's.
std::vector<StepKeyEntry> MakeTable() {
  return {
      {"grad_dtype", "'float32'", N,
       "the gradients cast to it after the backward (train.py), a cast the update reads: the "
       "backward's accumulators stay in the parameters' dtype, as fit counts them",
       "bfloat16"},
      {"quantization", "''", R,
       "quantized training (AQT, or qwix under use_qwix_quantization): the matmuls' int8 or fp8 "
       "operands, their scales and the weights' quantized copies",
       "int8"},
      {"dropout_rate", "0.0", N,
       "dropout after each layer's attention and MLP: its masks, drawn from the step's RNG, are "
       "not counted",
       "0.1"},
      {"mtp_num_layers", "0", R,
       "multi-token prediction: further decoder layers and their own logits after the main "
       "stack",
       "1"},
      {"optimizer_memory_host_offload", "False", R,
       "the optimizer state held on the host and brought to HBM for the update", "True"},
      {"parameter_memory_host_offload", "False", R, "the parameters held on the host", "True"},
      {"z_loss_multiplier", "0.0", N,
       "a loss term on the logits' log-sum-exp, which the cross-entropy computes anyway: no "
       "buffer fit counts changes",
       "0.0001"},
      {"record_internal_nn_metrics", "0", N, "logs activation statistics: scalars", "1"},
      {"shard_optimizer_over_data", "False", R,
       "ZeRO-1: the optimizer state and its update sharded over the data axis too, the new "
       "parameters gathered over it",
       "True"},
      {"num_vocab_tiling", "1", R,
       "the output head and cross-entropy run in N tiles of batch x length "
       "(utils/vocabulary_tiling.py), not on the whole logits",
       "4"},
      {"use_dpo", "False", R,
       "DPO: a frozen reference model's forward beside the trained model's, on paired inputs",
       "True"},
      {"use_sft", "False", N, "the loss masked to the completion's tokens: the same shapes",
       "True"},
      {"gradient_clipping_threshold", "1.0", N,
       "clipping by the gradients' global norm: its norm and scale fuse into the update (the TPU "
       "fixtures compile with 1.0), fit counts no buffer for it either way",
       "0.0"},
      {"use_iota_embed", "False", R,
       "the embedding lookup as a one-hot [batch, length, vocab] matmul, not a gather", "True"},
      {"use_untrainable_positional_embedding", "False", N,
       "sinusoidal positions added to the embedded tokens: computed, no parameter; one [batch, "
       "length, emb] more in the forward, not counted",
       "True"},
      {"trainable_position_size", "-1", N,
       "a trainable position embedding (GPT-3's) beside the token embedding: its table and "
       "moments are not counted",
       "2048"},
      {"use_multimodal", "False", R, "the vision or audio encoder and its inputs", "True"},
      {"mhc_expansion_rate", "1", R,
       "manifold-constrained hyper-connections: N residual streams through every layer", "4"},
      {"engram_layers", "[]", R, "Engram's n-gram memory layers beside the listed layers", "[1]",
       "hf_access_token=token tokenizer_path=meta-llama/Llama-3.1-8B"},
  };
}

}  // namespace

const std::vector<StepKeyEntry>& StepKeyTable() {
  static const std::vector<StepKeyEntry> kTable = MakeTable();
  return kTable;
}

std::string_view ToString(StepKeyStatus status) {
  return status == StepKeyStatus::kRefused ? "refused" : "noted";
}

std::vector<std::string> AccountStepKeys(const Config& config) {
  std::vector<std::string> notes;
  for (const StepKeyEntry& e : StepKeyTable()) {
    const std::optional<std::string> value = AwayFromDefault(config, e.key, e.default_value);
    if (!value) continue;
    if (e.status == StepKeyStatus::kRefused) {
      Fail("{}={}: fit does not model {}; expected {} (docs/fit-keys.md)", e.key, *value, e.what,
           e.default_value);
    }
    notes.push_back(fmt::format("{}={}: {}", e.key, *value, e.what));
  }
  return notes;
}

std::string StepKeyTableMarkdown() {
  std::string out =
      "<!-- Generated from src/model/step_keys.cc; a test checks this file against it "
      "(UPDATE_GOLDEN=1 rewrites it). -->\n"
      "# The train step's keys and what `fit` does with them\n\n"
      "Keys of the release's `base.yml` (MaxText 0.2.5) that change the whole training step "
      "outside the decoder's layers. **refused**: set away from its default, `fit` (and `plan`, "
      "which runs it) refuses the config in one line naming the key (exit 2): MaxText would "
      "build another step than the one fit composes. **noted**: fit counts nothing for it, and "
      "says so under \"assumed\". The MoE block's keys are `docs/maxtext-keys.md`'s; the mesh, "
      "remat policy, dtypes, optimizer and attention kernel are modelled (`docs/fit.md`). "
      "`tests/fit_keys_test.cc` sets each key to the example below through `shardtrace fit` "
      "and checks exactly that.\n\n"
      "| key | default | status | what it does | example |\n|---|---|---|---|---|\n";
  for (const StepKeyEntry& e : StepKeyTable()) {
    out += fmt::format("| `{}` | `{}` | {} | {} | `{}={}`{} |\n", e.key, e.default_value,
                       ToString(e.status), e.what, e.key, e.example,
                       e.needs.empty() ? "" : fmt::format(" with `{}`", e.needs));
  }
  return out;
}

}  // namespace shardtrace
