#include "model/attention_step.h"

#include <algorithm>
#include <set>

#include "numeric/dtype.h"
#include "shard/axis_rules.h"
#include "shard/sharding.h"
#include "util/checked.h"

namespace shardtrace::model_internal {

int64_t LocalBytes(const Config& config, const Mesh& mesh, const Shape& shape,
                   const LogicalAxes& names, DType dtype, const std::string& what) {
  const PartitionSpec spec = ResolveSpec(names, config.logical_axis_rules(), &mesh);
  return ShardTensor(what, shape, dtype, spec, mesh).bytes_per_device;
}

DType ActivationDType(const Config& config) { return ParseDType(config.Str("dtype"), "dtype"); }

namespace {

// The mesh axes MaxText splits the batch and the length of activations over: a weight
// sharded over one of them is gathered whole where it is used (FSDP).
std::set<std::string> BatchAxes(const Config& config, const Mesh& mesh) {
  std::set<std::string> axes;
  const auto spec = ResolveSpec(LogicalNames({"activation_batch", "activation_length"}),
                                       config.logical_axis_rules(), &mesh);
  for (const std::string& a : spec.UsedAxes()) axes.insert(a);
  return axes;
}

std::vector<std::string> GatherAxes(const ParamBuffer& p, const std::set<std::string>& batch) {
  std::vector<std::string> out;
  for (const std::string& a : p.spec.UsedAxes()) {
    // Under expert parallelism the tokens travel to the experts: an expert stack keeps its
    // expert shard (kimi-k2 at expert 8: bf16[48,7168,2048] per device in TPU's buffers).
    if (p.role == ParamRole::kMoe && a == "expert") continue;
    if (batch.count(a)) out.push_back(a);
  }
  return out;
}

int64_t Saved(const RematPolicy& policy, const std::string& name) {
  if (!policy.wrapped) return 1;
  return std::count(policy.saved.begin(), policy.saved.end(), name) > 0 ? 1 : 0;
}
int64_t Offloaded(const RematPolicy& policy, const std::string& name) {
  return policy.wrapped &&
         std::count(policy.offloaded.begin(), policy.offloaded.end(), name) > 0;
}

// One collective of a layer, `count` times `bytes` sent per device over `axes`; nothing over
// fewer than two devices.
void AddCollective(const Mesh& mesh, CollectiveKind kind, std::vector<std::string> axes,
                   int64_t count, int64_t bytes, const std::string& from, bool regather,
                   std::vector<StepCollectiveTotal>* out) {
  if (axes.empty() || mesh.Size(axes) < 2 || bytes == 0) return;
  StepCollectiveTotal t;
  t.kind = kind;
  t.axes = std::move(axes);
  t.count = count;
  t.bytes_per_device = CheckedMul(count, bytes, "collective bytes");
  t.from = from;
  t.regather = regather;
  out->push_back(std::move(t));
}

}  // namespace

bool WindowedGather(const Config& config, const Mesh& mesh, const ParamBuffer& p) {
  constexpr int64_t kWindowedGroups[] = {8, 16};
  const int64_t group = mesh.Size(GatherAxes(p, BatchAxes(config, mesh)));
  return std::count(std::begin(kWindowedGroups), std::end(kWindowedGroups), group) > 0;
}

std::string AttentionKernel(const Config& config, const std::string& platform) {
  const std::string kernel = config.Str("attention");
  if (kernel == "autoselected") {
    return platform == "tpu" && config.Int("max_target_length") >= 128 ? "flash" : "dot_product";
  }
  return kernel;
}

int64_t GatheredWeightBytes(const Config& config, const Mesh& mesh, const LayerWeights& weights) {
  const std::set<std::string> batch = BatchAxes(config, mesh);
  const int64_t act = ByteSize(ActivationDType(config));
  int64_t total = 0;
  for (const ParamBuffer* p : weights.params) {
    const int64_t one_layer = p->bytes_per_device / std::max<int64_t>(1, weights.layers);
    total += one_layer * mesh.Size(GatherAxes(*p, batch)) / ByteSize(p->dtype) *
             std::min(act, ByteSize(p->dtype));
  }
  return total;
}

int64_t GmmKernelMinor(const Config& config, const Mesh& mesh, const ParamBuffer& p) {
  if (p.role != ParamRole::kMoe || !config.Bool("sparse_matmul") || p.shape.empty() ||
      p.path.find("gate") != std::string::npos) {
    return 0;
  }
  const std::vector<std::string> gathered = GatherAxes(p, BatchAxes(config, mesh));
  std::vector<std::string> kept;
  if (p.spec.rank() == p.shape.size()) {
    for (const std::string& a : p.spec[p.spec.rank() - 1]) {
      if (std::find(gathered.begin(), gathered.end(), a) == gathered.end()) kept.push_back(a);
    }
  }
  return p.shape.back() / std::max<int64_t>(1, mesh.Size(kept));
}

std::vector<StepCollectiveTotal> WeightCollectives(const Config& config, const Mesh& mesh,
                                                   const LayerWeights& weights, bool gathered_again,
                                                   const std::string& from) {
  const std::set<std::string> batch = BatchAxes(config, mesh);
  const int64_t act = ByteSize(ActivationDType(config));
  std::vector<StepCollectiveTotal> out;
  const auto add = [&](CollectiveKind kind, std::vector<std::string> axes, int64_t count,
                       int64_t bytes, bool regather = false) {
    AddCollective(mesh, kind, std::move(axes), count, bytes, from, regather, &out);
  };
  for (const ParamBuffer* p : weights.params) {
    const int64_t shard = p->bytes_per_device / std::max<int64_t>(1, weights.layers);
    const std::vector<std::string> gather = GatherAxes(*p, batch);
    const int64_t n = mesh.Size(gather);
    // The weight is cast to the activation dtype before its gather, and its gradient is
    // reduced in that dtype too: the reduction follows the dot that writes it, before the
    // cast's transpose widens it (the TPU fixtures' HLO: mixtral's attention kernels reduce
    // as bf16[4096,4096], its output head as bf16[4096,32000]).
    const int64_t narrow = shard / ByteSize(p->dtype) * std::min(act, ByteSize(p->dtype));
    const int64_t gathered = narrow * n;
    add(CollectiveKind::kAllGather, gather, 1, gathered - gathered / n);
    if (gathered_again) add(CollectiveKind::kAllGather, gather, 1, gathered - gathered / n, true);
    add(CollectiveKind::kPsumScatter, gather, 1, gathered - narrow);
    std::vector<std::string> replicated;
    const std::vector<std::string> used = p->spec.UsedAxes();
    for (const std::string& a : batch) {
      if (std::find(used.begin(), used.end(), a) == used.end()) replicated.push_back(a);
    }
    add(CollectiveKind::kPsum, replicated, 1, narrow);
  }
  return out;
}

std::vector<StepCollectiveTotal> EmbeddingCollectives(const Config& config, const Mesh& mesh,
                                                      const LayerWeights& table, int64_t batch,
                                                      bool tied) {
  // Only the embed dim sharded, over axes that split the batch: the lookup runs on the
  // device's embed slice for every token and an all-to-all gives each device its tokens'
  // whole rows; the backward sends the cotangent back the same way and scatter-adds into
  // the local slice. No table is gathered or reduced (the TPU fixtures' HLO: two all-to-alls
  // of bf16[batch, length, emb] per device, e.g. DeepSeek-V3's 112 MiB at fsdp 128).
  const auto split = [&](const ParamBuffer& p, size_t dim) {  // axes of >1 device on dim
    std::vector<std::string> axes;
    if (dim < p.spec.rank()) {
      for (const std::string& a : p.spec[dim]) {
        if (mesh.Size(a) > 1) axes.push_back(a);
      }
    }
    return axes;
  };
  const std::set<std::string> batch_axes = BatchAxes(config, mesh);
  const bool one_table = table.params.size() == 1 && table.params.front()->shape.size() == 2;
  const std::vector<std::string> embed_axes =
      one_table ? split(*table.params.front(), 1) : std::vector<std::string>{};
  const bool embed_over_batch =
      one_table && split(*table.params.front(), 0).empty() && !embed_axes.empty() &&
      std::all_of(embed_axes.begin(), embed_axes.end(),
                  [&](const std::string& a) { return batch_axes.count(a) > 0; });
  const int64_t rows = LocalBytes(
      config, mesh, {batch, config.Int("max_target_length"), config.Int("emb_dim")},
      LogicalNames({"activation_embed_and_logits_batch", "activation_length", "activation_embed"}),
      ActivationDType(config), "embedded tokens");
  // The partitioner moves whichever is smaller: a device's tokens' rows, or the table (mixtral
  // at batch 24 and length 8192: 1.5 GiB of rows against a 250 MiB table, gathered; at equal
  // bytes the rows: deepseek2-16b at batch 25 on v5p-16, 400 MiB of each).
  if (!embed_over_batch || rows > GatheredWeightBytes(config, mesh, table)) {
    // A table that is also the output head: the head's gather and reduction serve the lookup.
    if (tied) return {};
    return WeightCollectives(config, mesh, table, false, "embedding");
  }
  const int64_t n = mesh.Size(embed_axes);
  StepCollectiveTotal t;
  t.kind = CollectiveKind::kAllToAll;
  t.axes = embed_axes;
  t.count = 2;
  t.bytes_per_device = CheckedMul(2, rows - rows / n, "collective bytes");
  t.from = "embedding";
  return {t};
}

BlockFigures AttentionLayer(const Config& config, const Mesh& mesh, const RematPolicy& policy,
                            const std::string& kernel, const LayerWeights& weights, int64_t batch,
                            bool tpu) {
  const DType dt = ActivationDType(config);
  // TPU's (8, 128) tiles: the head dim is the minor dim of q, k, v and the context (the
  // fixtures' buffers: deepseek3-test's bf16[30,128,2048,192] hold 3.75 GiB, 256 lanes a row;
  // gpt-oss-20b's bf16[2,64,2048,64] 62.5 MiB, 128).
  const auto lanes = [tpu](int64_t dim) { return Lanes(dim, tpu); };
  const int64_t length = config.Int("max_target_length");
  const int64_t emb = config.Int("emb_dim");
  const int64_t heads = config.Int("num_query_heads");
  const bool mla = config.Str("attention_type") == "mla";
  const int64_t kv_heads = mla ? heads : config.Int("num_kv_heads");
  const int64_t qk_dim = lanes(mla ? config.Int("qk_nope_head_dim") + config.Int("qk_rope_head_dim")
                                   : config.Int("head_dim"));
  const int64_t v_dim = lanes(mla ? config.Int("v_head_dim") : config.Int("head_dim"));
  const LogicalAxes q_names = LogicalNames({"activation_batch", "activation_length",
                                            "activation_heads", "activation_kv"});
  const LogicalAxes kv_names = LogicalNames({"activation_batch", "activation_length",
                                             "activation_kv_heads", "activation_kv"});
  const int64_t q = LocalBytes(config, mesh, {batch, length, heads, qk_dim}, q_names, dt, "query");
  const int64_t k = LocalBytes(config, mesh, {batch, length, kv_heads, qk_dim}, kv_names, dt, "key");
  const int64_t v = LocalBytes(config, mesh, {batch, length, kv_heads, v_dim}, kv_names, dt, "value");
  const int64_t ctx = LocalBytes(config, mesh, {batch, length, heads, v_dim}, q_names, dt, "context");
  const int64_t out = LocalBytes(config, mesh, {batch, length, emb},
                                 LogicalNames({"activation_batch", "activation_length",
                                               "activation_embed"}),
                                 dt, "attention output");

  BlockFigures f;
  const auto keep = [&](const std::string& name, int64_t bytes, const std::string& detail) {
    if (Saved(policy, name)) f.kept.push_back({name, bytes, detail});
    if (Offloaded(policy, name)) f.offloaded_bytes += bytes;
    // Not the output projection: the compiler holds it beside the MoE backward at the fullest
    // moment of 7 of the 8 dumped fixtures read, but fit counts none of the decoder layer's
    // [batch, length, emb] activations between its blocks, which would take two verdicts near
    // the line past the compiler's (docs/fit.md, "What temp is made of").
    if (policy.wrapped && !Saved(policy, name) && name != "out_proj") f.recomputed_bytes += bytes;
  };
  keep("query_proj", q, "the query projection");
  keep("key_proj", k, "the key projection");
  keep("value_proj", v, "the value projection");
  keep("context", ctx, "the attention context");
  keep("out_proj", out, "the output projection");
  if (mla) {
    const int64_t q_rank = config.Int("q_lora_rank");
    const LogicalAxes low = LogicalNames({"activation_batch", "activation_length", nullptr});
    if (q_rank > 0) {
      keep("mla_q", LocalBytes(config, mesh, {batch, length, q_rank}, low, dt, "mla_q"),
           "the low-rank query");
    }
    keep("mla_kv",
         LocalBytes(config, mesh,
                    {batch, length, config.Int("kv_lora_rank") + config.Int("qk_rope_head_dim")},
                    low, dt, "mla_kv"),
         "the low-rank key/value");
  }

  // The projections contract the embed dim, which the activations split over
  // activation_embed's axes (tensor): XLA gathers the normed input whole over them, and the
  // projections' weight gradients read that copy, so it is rematerialized with the layer (the
  // TPU fixtures at tensor 2, beside the MoE backward: bf16[4,2048,4096] on v5p-8,
  // bf16[8,4096,4096] on tpu7x-16, each the input gathered for the projections).
  const int64_t whole_input = LocalBytes(
      config, mesh, {batch, length, emb},
      LogicalNames({"activation_batch", "activation_length", nullptr}), dt, "attention input");
  const int64_t input_gathered = whole_input > out ? whole_input : 0;
  if (input_gathered > 0) {
    if (!policy.wrapped) {
      f.kept.push_back({"attention_input_gathered", input_gathered,
                        "the attention's input gathered over activation_embed's axes"});
    } else {
      f.recomputed_bytes += input_gathered;
    }
  }

  // The backward of one attention layer: its gathered weights and their unreduced gradients,
  // q, k and v (recomputed or kept) with their cotangents and the context's cotangent, the
  // input gathered for the projections where it is (above), and under dot_product the masked
  // logits and their cotangent (below). The context itself is not read there (the flash kernel's
  // backward takes a row sum of it with its cotangent before it starts): deepseek3-test's step
  // at batch 20 and 30 holds four bf16[batch,128,2048,192] (q, k and their cotangents) and
  // three of [batch,128,2048,128] (v, its cotangent and the context's) at the compiler's
  // fullest moment, inside the splash kernel's backward.
  const int64_t gathered = GatheredWeightBytes(config, mesh, weights);
  int64_t peak = 2 * gathered + 2 * (q + k + v) + ctx + 2 * out + input_gathered;
  std::string where =
      "attention backward: gathered weights, their gradients, q/k/v and their "
      "cotangents, the context's cotangent";
  if (kernel == "dot_product") {
    // apply_attention_dot's masked logits, [batch, kv_heads, groups, length, length], in the
    // activation dtype (float32 under float32_logits or float32_qk_product): what the softmax's
    // backward reads, so the rematerialized forward writes them again and they stay live
    // through the backward of the parts after attention, as q, k and v do. DeepSeek-V3.2 on
    // v5p-64 (dot_product, the indexer's kernel): at the compiler's fullest moment, inside the
    // MoE block's backward, its bf16[1,128,1,2048,2048] (1 GiB) from the MoE layer's
    // rematerialized forward, and the inlined dense layer's from its forward; in the
    // attention's backward, those and their bf16 cotangent.
    const DType logits_dtype =
        config.Bool("float32_logits") || config.Bool("float32_qk_product") ? DType::kFloat32 : dt;
    const int64_t logits = LocalBytes(
        config, mesh, {batch, heads, length, length},
        LogicalNames({"activation_batch", "activation_heads", "activation_length", nullptr}),
        logits_dtype, "attention logits");
    keep("attn_weights", logits, "the masked [batch, heads, length, length] logits");
    peak += 2 * logits;
    where += fmt::format(" and the {} [batch, heads, length, length] logits with their cotangent",
                         ToString(logits_dtype));
  }
  if (kernel != "dot_product" && policy.wrapped) {
    // The flash kernel's residuals beside q, k, v and the context: its log-sum-exp in float32,
    // which TPU's splash kernel keeps on 128 lanes a row (the fixtures' dumps: mixtral at batch
    // 13 holds f32[13,32,2048,128] of splash_mha_fwd_segmented_residuals at the compiler's
    // peak, in the MoE block's backward).
    f.recomputed_bytes += LocalBytes(config, mesh, {batch, length, heads, 128}, q_names,
                                     DType::kFloat32, "log-sum-exp");
  }
  f.backward_peak_bytes = peak;
  f.backward_peak_where = where;
  f.collectives = WeightCollectives(config, mesh, weights, policy.wrapped, "attention");
  if (input_gathered > 0) {
    // Tensor parallelism's activation collectives over those axes, each moving the device's
    // [batch, length, emb] share: the input gathered for the projections and the output
    // projection's partial sums reduce-scattered, in the forward and again in the
    // rematerialized forward; the output's cotangent gathered and the input's reduce-scattered
    // in the backward (tpu7x-16 at tensor 2: three all-gathers of bf16[8,4096,4096] and three
    // of its reduce-scatters to bf16[8,4096,2048] a layer in the HLO).
    const PartitionSpec spec = ResolveSpec(
        LogicalNames({"activation_batch", "activation_length", "activation_embed"}),
        config.logical_axis_rules(), &mesh);
    std::vector<std::string> axes;
    for (const std::string& a : spec.rank() > 2 ? spec[2] : std::vector<std::string>{}) {
      if (mesh.Size(a) > 1) axes.push_back(a);
    }
    const int64_t count = policy.wrapped ? 3 : 2;
    const int64_t sent = input_gathered - input_gathered / std::max<int64_t>(1, mesh.Size(axes));
    for (const CollectiveKind kind : {CollectiveKind::kAllGather, CollectiveKind::kPsumScatter}) {
      AddCollective(mesh, kind, axes, count, sent, "attention", false, &f.collectives);
    }
  }
  return f;
}

BlockFigures LogitsStep(const Config& config, const Mesh& mesh, const LayerWeights& head,
                        int64_t batch, bool tpu) {
  const int64_t length = config.Int("max_target_length");
  const int64_t vocab = config.Int("vocab_size");
  const LogicalAxes names = LogicalNames({"activation_embed_and_logits_batch",
                                          "activation_length", "activation_vocab"});
  const DType logits_dtype =
      config.Bool("logits_dot_in_fp32") ? DType::kFloat32 : ActivationDType(config);
  const int64_t logits = LocalBytes(config, mesh, {batch, length, vocab}, names, logits_dtype,
                                    "logits");
  BlockFigures f;
  // Cross-entropy's softmax, one-hot and float32 upcast fuse into the reductions and into the
  // cotangent's producer (the TPU fixtures: deepseek3-test's vocab 129,280 holds no float32
  // [batch, length, vocab] buffer): the logits, kept from the forward, and their cotangent in
  // the logits' dtype live together, beside the gathered head kernel and its gradient. TPU
  // reduces that gradient inside its dot (the fixtures' buffer reports hold one gathered head:
  // gpt-oss-20b's bf16[2880,201088], llama4-17b-16e's bf16[5120,202048]).
  const int64_t gathered = GatheredWeightBytes(config, mesh, head);
  // The cotangent's only readers are the head's two dots, which on TPU at the default matmul
  // precision read bf16 operands: float32 logits get a bf16 cotangent, whatever the activation
  // dtype (qwen3-30b on v6e-8: f32[2,4096,151936] logits beside a bf16[2,4096,151936]
  // cotangent at the compiler's fullest moment under logits_dot_in_fp32, and the same bf16
  // cotangent under dtype=float32).
  const bool narrow_cotangent =
      tpu && logits_dtype == DType::kFloat32 && config.Str("matmul_precision") == "default";
  const int64_t cotangent = narrow_cotangent
                                ? LocalBytes(config, mesh, {batch, length, vocab}, names,
                                             DType::kBfloat16, "logits' cotangent")
                                : logits;
  f.backward_peak_bytes = logits + cotangent + (tpu ? 1 : 2) * gathered;
  f.backward_peak_where = tpu ? "the logits and their cotangent, the gathered output head"
                              : "the logits and their cotangent, the gathered output head and "
                                "its gradient";
  // TPU's schedule computes the head's weight gradient late: the cotangent it reads stays live
  // through the layers' backward (the fixtures' buffer reports: bf16[1,2048,102400] of
  // deepseek2-16b, bf16[1024,32000] of mixtral-8x7b, at the peak inside a layer's backward;
  // under dtype=float32, qwen3-30b's bf16[2,4096,151936], not its float32 logits).
  f.residue_bytes = cotangent;
  // Over a group of 8 or 16 devices TPU gathers the head, and reduces its gradient, in a
  // windowed einsum (loops of collective-permutes, spmd/tpu_collectives.h) and runs the
  // gradient's loop after the layers' backward whatever the memory: each of the eight dumped
  // steps with that loop keeps the logits' cotangent there, mixtral on v5e-16 at batch 13 at
  // 96% of HBM (and at batch 14 past it, out of HBM). Groups of 4 (v5p-8) and 128 (v5p-256)
  // keep an all-gather and a dot, which the scheduler moves before the layers' backward past
  // its memory limit (ComposePeak), and on v5p-8 at times below it (listed 'peak logits').
  f.residue_pinned =
      tpu && std::any_of(head.params.begin(), head.params.end(),
                         [&](const ParamBuffer* p) { return WindowedGather(config, mesh, *p); });
  f.collectives = WeightCollectives(config, mesh, head, false, "output head");
  return f;
}

}  // namespace shardtrace::model_internal
