// MoeSetup: everything about one MoE block that MaxText derives from the config and mesh
// before running it: the dims (B S M E K H ...), which RoutedMoE path __call__ takes and
// why, the expert/tensor parallel sizes, the GMM kernel, and the sharding-relevant flags.
// Built once by MakeMoeSetup; every path, the `config` command and the emitters read it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "config/moe_settings.h"
#include "numeric/dtype.h"

namespace shardtrace {

class Config;
class Mesh;

enum class MoePath {
  kDenseDropless,  // dense_matmul, capacity_factor <= 0: every token through every expert
  kDenseDropping,  // dense_matmul, capacity_factor > 0: dispatch/combine masks
  kSparse,         // sparse_matmul inside shard_map (EP/ring/TP variants below)
  kFusedVllm,      // attention == vllm_rpa: tpu_inference fused kernel (not simulated)
};
std::string ToString(MoePath path);

struct MoeSetup {
  MoeSettings settings;  // the config values, typed (config/moe_settings.h)

  // Dims.
  int64_t batch = 0;          // B: global batch = int(per_device_batch_size * devices)
  int64_t seq = 0;            // S: max_target_length
  int64_t emb = 0;            // M: moe_expert_input_dim, or emb_dim when <= 0
  int64_t num_experts = 0;    // E
  int64_t top_k = 0;          // K
  int64_t hidden = 0;         // H: intermediate_dim the caller passes (mlp_dim for mixtral/gpt_oss)
  int64_t wi_hidden = 0;      // H of wi_0/wi_1 (padded_base_moe_mlp_dim when set)
  int64_t wo_hidden = 0;      // H of wo: wi_hidden in the release, else hidden
  int64_t mlp_dim = 0;        // F: dense MLP intermediate
  int64_t shared_hidden = 0;  // shared MLP width (shared_experts x, see MakeMoeSetup); 0 = none
  int64_t dense_layers = 0;   // first_num_dense_layers (MlpBlock layers before MoE ones)

  // Types.
  DType dtype = DType::kBfloat16;
  DType weight_dtype = DType::kFloat32;
  DType gate_dtype = DType::kBfloat16;  // float32 when float32_gate_logits

  // Path.
  MoePath path = MoePath::kSparse;
  std::vector<std::string> path_reasons;  // why __call__ picks the path
  // Why get_topk routes the way it does (score function, bias, DeepSeek groups, softmax or
  // not, normalization), each with its moe.py line.
  std::vector<std::string> routing_reasons;
  std::string gmm_kernel;                // "megablox", "tokamax ragged_dot", "jax.lax.ragged_dot"
  int64_t ep = 1;                        // expert-parallel size (product over expert_axes)
  std::vector<std::string> expert_axes;  // ("expert",) or ("context","expert") under cp-as-ep
  int64_t tp = 1;                        // tensor-parallel size ("tensor")
  int64_t tp_transpose = 1;              // "tensor_transpose" size (seed-era axis)
  int64_t cp_autoregressive = 1;
  bool ring_of_experts = false;
  bool batch_sharded_by_ep = true;  // global batch > 1
  // model_name starts with one of the revision's deepseek_routing_models ("deepseek3", ...):
  // deepseek_routing_prefix names which.
  bool deepseek3_routing = false;
  std::string deepseek_routing_prefix;
  bool inference = false;  // model_call_mode == "inference"
  std::string decoder_block;
  std::string model_name;
  // decoder_block qwen3_next / qwen3_5: the layer's MoE is qwen3.py's Qwen3NextSparseMoeBlock
  // (routed experts, and with shared_experts > 0 one shared MlpBlock of width moe_mlp_dim
  // scaled by sigmoid(shared_expert_gate(x))).
  bool qwen3_next_block = false;
  double capacity_factor = -1;
  // num_moe_token_chunks on the ring of experts (the sparse path's chunked ring); 1: none.
  int64_t token_chunks = 1;
  // defer_small_all_reduces on the ring with bias updates: the layer's bias_updates output is
  // the [shards, chunks, E] local expert counts, reduced after the layer loop (train.py).
  bool defer_bias_counts = false;
  int64_t emb_chunks = 0;  // shardtrace_pr3981_emb_chunks: > 0 selects the refactored pipeline
  std::vector<std::string> notes;  // unsupported-in-simulation remarks

  // Short label, e.g. "sparse_matmul/ragged_all_to_all (EP=4, megablox)".
  std::string PathLabel() const;
};

// Resolves the settings (ResolveMoeSettings) and derives the rest from them and the mesh.
// REQUIRES a validated Config. Throws Error for configs the path cannot run (num_experts
// not divisible by EP, ...), naming the key.
MoeSetup MakeMoeSetup(const Config& config, const Mesh& mesh);
MoeSetup MakeMoeSetup(MoeSettings settings, const Mesh& mesh);

}  // namespace shardtrace
