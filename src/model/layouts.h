// The parameters of a whole MaxText model, as MaxText itself lays them out: one record per
// parameter array (path, dims, logical axes, dtype), read from
// src/model/maxtext_layouts.json, which tools/maxtext_oracle/export_layouts.py records from
// MaxText 0.2.5's own abstract model build (nnx.eval_shape) for every MoE model file of the
// release. Each dim is an expression over config keys ("base_emb_dim",
// "qk_nope_head_dim+qk_rope_head_dim", "base_num_decoder_layers-first_num_dense_layers"),
// found by building the model at two sets of probe sizes, so a user's sizes give MaxText's
// shapes. A layout holds only for the structure it was recorded at (decoder block, MLP
// activations, shared experts, tied embeddings, ...): a config that differs in a structural
// key is refused naming the key, never fitted to another model's parameters.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "config/config.h"
#include "numeric/array.h"
#include "shard/axis_rules.h"

namespace shardtrace {

// What a parameter is part of, for the per-component totals.
enum class ParamRole {
  kEmbedding,
  kOutputHead,
  kNorm,
  kAttention,
  kLinearAttention,  // a gated delta net (Qwen3-Next's linear-attention layers)
  kMoe,
  kSharedExperts,
  kMlp,
  kOther
};
std::string ToString(ParamRole role);

struct ParamLayout {
  std::string path;  // "decoder/moe_layers/self_attention/wq_b/kernel"
  std::vector<std::string> dims;  // expressions over config keys, or integers
  LogicalAxes axes;
  std::string dtype;  // "weight_dtype" or a dtype name
  // An nnx.Param the optimizer updates; false for other state in the model (DeepSeek's
  // loss-free routing bias): no gradient and no optimizer moments.
  bool trainable = true;
  ParamRole role = ParamRole::kOther;
  // The scanned stack the parameter belongs to ("layers", "moe_layers", "dense_layers", ...;
  // empty outside the scan): the logical axis name MaxText gives its stacked dim.
  std::string stack;
  // The scan whose loop runs the stack: the stack itself, or the outer scan it is nested in
  // (Gemma 4's and Qwen3-Next's blocks scan their local layers inside each block: "layers"
  // for "local_layers").
  std::string loop;
  // Whether `axes` names every dim. MaxText gives Qwen3-Next's norms no logical axes and the
  // scans prepend theirs, so theirs is shorter than the shape, and its gated delta net's
  // decay parameters none at all (empty): JAX leaves the dims past a spec's end unsharded.
  bool axes_complete = true;
};

struct ModelLayout {
  std::string model_name;
  std::string decoder_block;
  std::vector<std::pair<std::string, std::string>> structural;  // key (or "key>0"), value
  std::vector<ParamLayout> params;

  // The parameter at `path` (one of `params`').
  const ParamLayout& Find(const std::string& path) const;
};

// A logical axis a scan gives its stacked dim ("layers", "local_layers", "moe_layers").
bool IsLayerAxis(const std::optional<std::string>& axis);

// Every recorded layout, parsed once: plan fits hundreds of configs against one table, and
// parsing the JSON was a third of each fit. Immutable once built.
class LayoutTable {
 public:
  // The embedded src/model/maxtext_layouts.json.
  static LayoutTable Embedded();

  // The recorded layout for `config`'s model_name, checked against its structural keys.
  // Throws Error naming model_name (with the recorded models) or the structural key that
  // differs.
  ModelLayout For(const Config& config) const;

  // The models with a usable recorded layout.
  std::vector<std::string> Models() const;

 private:
  struct Recorded {
    std::vector<std::string> problems;  // dims export_layouts.py could not explain
    ModelLayout layout;  // `structural` holds the recorded values, Python's repr
  };
  std::map<std::string, Recorded, std::less<>> models_;
};

// A dim expression evaluated over `config` (base_* keys read as MaxText derives them:
// emb_dim, mlp_dim, moe_mlp_dim, num_query_heads, num_kv_heads, num_decoder_layers). Throws
// Error naming `what` when the value is not a positive size.
int64_t EvaluateDim(const std::string& expression, const Config& config, const std::string& what);

}  // namespace shardtrace
