#include "model/whole_step.h"

#include <algorithm>
#include <map>
#include <set>

#include "config/config.h"
#include "config/embedded_configs.h"
#include "config/parsed_yaml_cache.h"
#include "config/run_inputs.h"
#include "model/attention_step.h"
#include "model/block_step.h"
#include "model/fit_variants.h"
#include "model/gradient_accumulation.h"
#include "model/linear_attention_step.h"
#include "model/step_keys.h"
#include "model/step_peak.h"
#include "model/tpu_tiles.h"
#include "model/unmodelled_flags.h"
#include "numeric/dtype.h"
#include "run/run.h"
#include "shard/axis_rules.h"
#include "shard/sharding.h"
#include "util/checked.h"
#include "util/error.h"

namespace shardtrace {
namespace {

using model_internal::BlockFigures;
using model_internal::LayerWeights;

// The six int32 [global batch, length] arrays of MaxText's shaped training batch.
constexpr int kBatchArrays = 6;

Target TargetFor(const HardwareTable& table, const Config& config, const FitRequest& request,
                 std::vector<std::string>& notes) {
  const std::string topology = config.Has("compile_topology") ? config.Str("compile_topology") : "";
  if (request.devices) {
    if (!topology.empty()) {
      Fail("compile_topology={} and --devices {} both name the devices; give one", topology,
           *request.devices);
    }
    if (!request.hbm_gib) Fail("--devices {} needs --hbm GIB (memory per device)", *request.devices);
    return DevicesTarget(table, *request.devices, *request.hbm_gib, request.chip);
  }
  if (request.hbm_gib || request.chip) {
    Fail("--hbm and --chip go with --devices; compile_topology= names its own chip");
  }
  if (topology.empty()) {
    Fail("fit needs compile_topology=NAME (as MaxText's train_compile takes it, e.g. "
         "compile_topology=v5p-256) or --devices N --hbm GIB");
  }
  int64_t slices = config.Has("compile_topology_num_slices")
                       ? config.Int("compile_topology_num_slices")
                       : 1;
  if (slices == -1) {
    notes.push_back("compile_topology_num_slices is unset (-1): one slice (train_compile "
                    "requires a positive value)");
    slices = 1;
  }
  if (slices < 1) Fail("compile_topology_num_slices is {}, expected a positive number of slices", slices);
  return ResolveTopology(table, topology, slices);
}

bool IsStacked(const ParamBuffer& p) { return !p.stack.empty(); }

// The modules of `role` among a stack's parameters: the distinct directories of their anchor
// arrays (experts: wi_0; attention: the output projection; shared experts and MLPs: wi_0's
// kernel), so gpt-oss's layers_0/GptOssMlp and layers_1/GptOssMlp are two blocks of one
// scanned layer.
int CountModules(const std::vector<const ParamBuffer*>& params, ParamRole role) {
  std::set<std::string> modules;
  for (const ParamBuffer* p : params) {
    if (p->role != role) continue;
    const std::string& path = p->path;
    const auto ends = [&](std::string_view tail) {
      return path.size() >= tail.size() && path.compare(path.size() - tail.size(), tail.size(), tail) == 0;
    };
    std::string module;
    if (role == ParamRole::kMoe && (ends("/wi_0") || ends("/wi"))) {
      module = path.substr(0, path.rfind('/'));
    } else if (role == ParamRole::kAttention && ends("/out/kernel")) {
      module = path.substr(0, path.size() - std::string_view("/out/kernel").size());
    } else if (role == ParamRole::kLinearAttention && ends("/out_proj/kernel")) {
      module = path.substr(0, path.size() - std::string_view("/out_proj/kernel").size());
    } else if ((role == ParamRole::kSharedExperts || role == ParamRole::kMlp) &&
               (ends("/wi_0/kernel") || ends("/wi/kernel"))) {
      module = path.substr(0, path.rfind("/wi"));
    }
    if (!module.empty()) modules.insert(module);
  }
  return static_cast<int>(modules.size());
}

void AddCollectives(std::vector<StepCollectiveTotal>& into,
                    const std::vector<StepCollectiveTotal>& per_layer, int64_t layers) {
  for (StepCollectiveTotal t : per_layer) {
    t.count = CheckedMul(t.count, layers, "collectives per step");
    t.bytes_per_device = CheckedMul(t.bytes_per_device, layers, "collective bytes per step");
    into.push_back(std::move(t));
  }
}

// A collective over axes that span slices, as TPU's compiler runs it: the collective inside
// each slice over the ICI share of the group, and host transfers between slices of one piece
// (the HLO's megascale sends, _xla_megascale_transfer_type). An all-gather sends its device's
// shard to each other slice; a reduce-scatter or all-reduce first reduces inside the slice and
// all-reduces its 1/ici piece between slices (qwen3-30b at fsdp 16 over two v6e-8 slices:
// bf16 sends of 24 MiB for 384 MiB expert kernels, 1/16, and 48 MiB for their gradients, 1/8).
// Over a group all between slices (ici 1), or another kind, all of it crosses them.
std::vector<StepCollectiveTotal> SplitAcrossSlices(const StepCollectiveTotal& t, const Mesh& mesh) {
  int64_t group = 1, slices = 1;
  for (const MeshAxis& a : mesh.axes()) {
    if (!std::count(t.axes.begin(), t.axes.end(), a.name)) continue;
    group *= a.size;
    slices *= a.dcn;
  }
  StepCollectiveTotal whole = t;
  whole.dcn = slices > 1;
  const int64_t ici = group / std::max<int64_t>(1, slices);
  const bool hierarchical = t.kind == CollectiveKind::kAllGather ||
                            t.kind == CollectiveKind::kPsumScatter ||
                            t.kind == CollectiveKind::kPsum;
  if (slices <= 1 || ici <= 1 || !hierarchical) return {whole};
  // bytes_per_device is the whole group's ring: an all-gather or a reduce-scatter moves
  // (g-1)/g of the full buffer, an all-reduce twice that.
  const double g = static_cast<double>(group), d = static_cast<double>(slices),
               i = static_cast<double>(ici);
  const double twice = t.kind == CollectiveKind::kPsum ? 2.0 : 1.0;
  const double full = static_cast<double>(t.bytes_per_device) * g / (g - 1) / twice;
  StepCollectiveTotal in_slice = t, across = t;
  in_slice.dcn = false;
  across.dcn = true;
  if (t.kind == CollectiveKind::kAllGather) {
    in_slice.bytes_per_device = static_cast<int64_t>(full * (i - 1) / i);
    across.bytes_per_device = static_cast<int64_t>(full / g * (d - 1));
  } else {
    in_slice.bytes_per_device = static_cast<int64_t>(full * (i - 1) / i * twice);
    across.bytes_per_device = static_cast<int64_t>(full / i * 2 * (d - 1) / d);
  }
  return {in_slice, across};
}

// Same kind, axes and network summed; `from` lists every part once.
std::vector<StepCollectiveTotal> Merge(const std::vector<StepCollectiveTotal>& all, const Mesh& mesh) {
  std::vector<StepCollectiveTotal> out;
  for (const StepCollectiveTotal& whole : all) {
    for (const StepCollectiveTotal& t : SplitAcrossSlices(whole, mesh)) {
      auto it = std::find_if(out.begin(), out.end(), [&](const StepCollectiveTotal& o) {
        return o.kind == t.kind && o.axes == t.axes && o.dcn == t.dcn;
      });
      if (it == out.end()) {
        out.push_back(t);
        continue;
      }
      it->count += t.count;
      it->bytes_per_device += t.bytes_per_device;
      if (it->from.find(t.from) == std::string::npos) it->from += ", " + t.from;
    }
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) {
    return a.bytes_per_device > b.bytes_per_device;
  });
  return out;
}

// Whether MaxText unrolls the scan over the decoder's blocks: Gemma 4's
// (nnx_decoders.py _apply_gemma4_scanned_blocks: unroll=scan_length, "lets XLA pipeline/free
// block activations across iterations"); Qwen3-Next's loops.
bool UnrollsBlockScan(const std::string& decoder_block) {
  return decoder_block == "DecoderBlockType.GEMMA4";
}

// The stacks' names in the forward's order, as MaxText's layout lists its arrays.
std::vector<std::string> StackOrder(const ModelLayout& layout) {
  std::vector<std::string> order;
  for (const ParamLayout& p : layout.params) {
    if (!p.stack.empty() && std::find(order.begin(), order.end(), p.stack) == order.end()) {
      order.push_back(p.stack);
    }
  }
  return order;
}

FitResult FitOnce(const FitRequest& request) {
  FitResult r;
  SHARDTRACE_CHECK(request.tables != nullptr);
  const HardwareTable& table = request.tables->hardware;
  // fit's layouts and TPU fixtures are MaxText 0.2.5's: with no config file it loads the
  // release's own embedded files, as --maxtext-revision 0.2.5 does (the seed era's rules have
  // no entry for the release's logical axes: embed_attn would leave every attention kernel
  // whole on each device).
  std::vector<std::string> args = request.args;
  if (SplitArgs(args, request.yaml_cache).files.empty() && RevisionArg(args).empty()) {
    args.push_back(fmt::format("{}{}", kRevisionArg, kEmbeddedReleaseRevision));
  }
  // One load: the config names the topology, whose device count the mesh is built for.
  Config loaded = LoadRunConfig(args, {}, request.yaml_cache);
  if (loaded.Has("gradient_accumulation_steps") && loaded.Int("gradient_accumulation_steps") > 1) {
    FitRequest accumulated = request;
    accumulated.args = args;
    return model_internal::AccumulatedFit(accumulated, loaded.Int("gradient_accumulation_steps"),
                                          FitOnce);
  }
  r.target = TargetFor(table, loaded, request, r.notes);
  if (loaded.Has("num_slices") && r.target.num_slices > 1) {
    // pyconfig takes num_slices from compile_topology_num_slices when compiling for a topology.
    args = WithOverrides(args, {fmt::format("num_slices={}", r.target.num_slices)});
    loaded = LoadRunConfig(args, {}, request.yaml_cache);
  }
  RunRequest base = SymbolicRequest(args, r.target.devices());
  base.yaml_cache = request.yaml_cache;
  const RunSetup setup = Prepare(WithMesh(std::move(loaded), r.target.devices()));
  const Config& config = setup.config;
  r.warnings = setup.warnings;
  r.mesh = setup.mesh;
  r.revision = config.revision().Title();
  r.model_name = config.Str("model_name");
  r.policy = RematPolicyOf(config);
  if (!config.Bool("scan_layers")) Fail("scan_layers is false: fit models the scanned decoder only");
  // Axes whose training loop MaxText builds differently: pipeline stages run the decoder
  // through its pipeline module, DiLoCo replicas train apart and sync outer steps. Neither is
  // the one step fit composes, so neither is read as a mere sharding axis.
  using Refused = std::pair<std::string_view, std::string_view>;
  for (const auto& [axis, what] : {Refused{"stage", "pipeline parallelism (MaxText's pipeline module)"},
                                   Refused{"diloco", "DiLoCo replicas"}}) {
    if (r.mesh.Size(axis) > 1) {
      Fail("mesh axis '{}' has {} devices: fit does not model {}", axis, r.mesh.Size(axis), what);
    }
  }
  // Axes that split the sequence: MaxText's attention then gathers keys and values over them
  // (context parallelism's all-gather or ring, Ulysses' all-to-all of heads); fit shards the
  // activations along them but models no such exchange (no TPU fixture crosses one).
  for (const std::string_view axis : {"context", "context_usp_ulysses", "tensor_sequence"}) {
    if (r.mesh.Size(axis) > 1) {
      r.notes.push_back(fmt::format(
          "mesh axis '{}' has {} devices: the attention's exchange of keys and values over it is "
          "not counted",
          axis, r.mesh.Size(axis)));
    }
  }
  const std::string opt = config.Str("opt_type");
  if (opt != "adamw" && opt != "adam_pax" && opt != "sgd") {
    Fail("opt_type is '{}': fit models adamw, adam_pax and sgd", opt);
  }
  for (std::string& note : AccountStepKeys(config)) r.notes.push_back(std::move(note));
  // DeepSeek-V3.2's dense warm-up stage: MaxText's train step skips the main model's loss and
  // trains the indexer alone by its KL loss (trainers/pre_train/train.py); with the factor 0 the
  // compiled step is the optimizer's update alone (its fixture's compile: 3.9 MB of temporaries).
  if (config.Has("use_indexer") && config.Bool("use_indexer") &&
      !(config.Has("indexer_sparse_training") && config.Bool("indexer_sparse_training"))) {
    Fail(
        "use_indexer=true with indexer_sparse_training=false is MaxText's dense warm-up stage, "
        "whose step skips the model's loss and trains the indexer alone: fit models the training "
        "step of the sparse stage (indexer_sparse_training=true)");
  }
  const DType weight_dtype = ParseDType(config.Str("weight_dtype"), "weight_dtype");
  const std::string mu_name = config.Has("mu_dtype") ? config.Str("mu_dtype") : "";
  const DType mu_dtype = mu_name.empty() ? weight_dtype : ParseDType(mu_name, "mu_dtype");
  // A trainable array's optimizer state: mu in mu_dtype and nu like the array (sgd: none).
  const auto moments_bytes = [&](const ParamBuffer& p) -> int64_t {
    if (opt == "sgd") return 0;
    return p.hbm_bytes / ByteSize(p.dtype) * ByteSize(mu_dtype) + p.hbm_bytes;
  };
  const int64_t batch = setup.setup.batch;
  const int64_t length = setup.setup.seq;

  const bool tpu = r.target.platform == "tpu";
  // Parameters, as MaxText lays them out and the rules shard them.
  const ModelLayout layout = request.tables->layouts.For(config);
  // Where the step offloads to the host or crosses slices, TPU's compiler peels a layer loop's
  // first iteration (loop_peel in the HLO of the four such fixtures); a loop of two is left
  // with one iteration, which it inlines (LayerStack::peeled).
  const bool peels =
      tpu && (r.target.num_slices > 1 || (r.policy.wrapped && !r.policy.offloaded.empty()));
  // MaxText unrolls Gemma 4's scan over blocks (models/gemma4.py).
  const bool unrolled = UnrollsBlockScan(layout.decoder_block);
  // Where the layer loop's accumulators are not the optimizer update's operands in the state's
  // layout, TPU keeps each expert kernel's gradient as megablox's tgmm writes it: where the
  // compiler peels the loop (DeepSeek-V3 at fsdp 128, Qwen3-235B at fsdp 512) and where the
  // block scan is unrolled (Gemma 4: f32[128,704,176] on 256 lanes). A plain scan's are laid out
  // as the state (qwen3-30b at fsdp 32: f32[48,128,768,64] in its elements' 1,152 MiB; Llama 4
  // Scout at fsdp 32 likewise).
  const bool in_order_gradients = peels || (tpu && unrolled);
  // The layouts' logical axes are the release's; under another revision's rules one without a
  // rule would leave its dim whole on every device (the seed era's has no embed_attn).
  if (config.revision().id != RevisionId::kRelease) {
    for (const ParamLayout& p : layout.params) {
      for (const std::optional<std::string>& axis : p.axes) {
        if (!axis || IsLayerAxis(axis)) continue;
        const AxisRules& rules = config.logical_axis_rules();
        if (std::any_of(rules.begin(), rules.end(),
                        [&](const AxisRule& rule) { return rule.logical == *axis; })) {
          continue;
        }
        Fail(
            "{}: its logical axis '{}' (MaxText {}'s layout) has no rule in the "
            "logical_axis_rules of {}; fit's layouts are the release's: give its base.yml, or "
            "no config file and no other --maxtext-revision",
            p.path, *axis, kEmbeddedReleaseRevision, config.revision().Title());
      }
    }
  }
  for (const ParamLayout& p : layout.params) {
    ParamBuffer b;
    b.path = p.path;
    for (const std::string& d : p.dims) b.shape.push_back(EvaluateDim(d, config, p.path));
    b.dtype = p.dtype == "weight_dtype" ? weight_dtype : ParseDType(p.dtype, p.path);
    // The spec as JAX prints it, shorter than the shape where MaxText's axes are (P(None,)
    // on a rank-2 norm); the dims past its end are unsharded.
    b.spec = ResolveSpec(p.axes, config.logical_axis_rules(), &r.mesh);
    std::vector<PartitionSpec::Entry> entries = b.spec.entries();
    entries.resize(std::max(entries.size(), b.shape.size()));
    const Sharding sharded =
        ShardTensor(p.path, b.shape, b.dtype, PartitionSpec(std::move(entries)), r.mesh);
    b.bytes_per_device = sharded.bytes_per_device;
    b.hbm_bytes = model_internal::RestingBytes(sharded, tpu);
    b.role = p.role;
    b.gradient_hbm_bytes =
        in_order_gradients && model_internal::GmmKernelMinor(config, r.mesh, b) > 0
            ? model_internal::TpuInOrderBytes(sharded.local_shape, b.dtype)
            : b.hbm_bytes;
    b.trainable = p.trainable;
    b.stack = p.stack;
    b.loop = p.loop;
    for (size_t i = 0; i < p.axes.size(); ++i) {
      if (!p.stack.empty() && p.axes[i] == p.stack) b.stack_axis = static_cast<int>(i);
    }
    r.parameter_count = CheckedAdd(r.parameter_count, NumElements(b.shape), "parameter count");
    r.parameter_bytes = CheckedAdd(r.parameter_bytes, b.hbm_bytes, "parameter bytes");
    r.parameter_tile_padding_bytes += b.hbm_bytes - b.bytes_per_device;
    if (b.trainable) {
      r.gradient_bytes += b.gradient_hbm_bytes;
      r.gradient_layout_bytes += b.gradient_hbm_bytes - b.hbm_bytes;
      r.optimizer_bytes += moments_bytes(b);
    }
    r.params.push_back(std::move(b));
  }
  {
    const PartitionSpec spec =
        ResolveSpec(LogicalNames({"activation_batch", nullptr}), config.logical_axis_rules(),
                           &r.mesh);
    r.batch_bytes =
        kBatchArrays * model_internal::RestingBytes(
                           ShardTensor("batch", {batch, length}, DType::kInt32, spec, r.mesh), tpu);
  }

  // The layers: each scanned stack, one layer of it composed from its blocks.
  const std::string kernel = model_internal::AttentionKernel(config, r.target.platform);
  std::map<std::string, std::vector<const ParamBuffer*>> by_stack;
  std::set<std::string> einsum_stacks;  // inlined stacks of einsum MoE layers (below)
  for (const ParamBuffer& p : r.params) {
    if (IsStacked(p)) by_stack[p.stack].push_back(&p);
  }
  model_internal::BlocksNeeded needed;
  for (const ParamBuffer& p : r.params) {
    needed.moe |= p.role == ParamRole::kMoe;
    needed.shared |= p.role == ParamRole::kSharedExperts;
    needed.mlp |= p.role == ParamRole::kMlp && IsStacked(p);
  }
  const model_internal::BlockRuns blocks = model_internal::RunBlocks(
      base, setup, needed,
      {tpu, static_cast<int>(r.target.num_slices), r.target.chip.narrow_combine_rows,
       r.target.chip.windowed_dense_backward},
      request.block_cache);
  std::vector<StepCollectiveTotal> collectives;
  const int64_t act_bytes = ByteSize(ParseDType(config.Str("dtype"), "dtype"));
  const int64_t carry = ShardTensor("decoder_layer_input", {batch, length, config.Int("emb_dim")},
                                    DType::kFloat32,
                                    ResolveSpec(LogicalNames({"activation_batch",
                                                                     "activation_norm_length",
                                                                     "activation_embed"}),
                                                       config.logical_axis_rules(), &r.mesh),
                                    r.mesh)
                            .bytes_per_device /
                        4 * act_bytes;
  for (const auto& stack_entry : by_stack) {
    // Not a structured binding: clang 14 cannot capture one in the lambda below.
    const std::string& name = stack_entry.first;
    const std::vector<const ParamBuffer*>& params = stack_entry.second;
    LayerStack s;
    s.name = name;
    const ParamBuffer& first = *params.front();
    // Every layer axis of an array whose axes name each dim: a nested stack's arrays carry
    // the outer scan's blocks and its own layers per block.
    const auto named = std::find_if(params.begin(), params.end(), [&](const ParamBuffer* p) {
      return layout.Find(p->path).axes_complete;
    });
    SHARDTRACE_CHECK(named != params.end());
    const ParamLayout& shape_of = layout.Find((*named)->path);
    s.layers = 1;
    for (size_t d = 0; d < shape_of.axes.size(); ++d) {
      if (IsLayerAxis(shape_of.axes[d])) s.layers *= (*named)->shape[d];
      if (shape_of.axes[d] == first.loop && first.loop != name) s.blocks = (*named)->shape[d];
    }
    s.loop = first.loop;
    s.attention_blocks = CountModules(params, ParamRole::kAttention);
    s.linear_attention_blocks = CountModules(params, ParamRole::kLinearAttention);
    s.moe_blocks = CountModules(params, ParamRole::kMoe);
    s.shared_blocks = CountModules(params, ParamRole::kSharedExperts);
    s.mlp_blocks = CountModules(params, ParamRole::kMlp);
    // The scan keeps each layer's input for the backward; a policy that offloads
    // decoder_layer_input (custom: decoder_layer_input=offload) keeps it on the host. A scanned
    // block of several decoder layers (Llama 4's of 4, gpt-oss's of 2) calls them in turn and
    // each names its own input so: a policy that saves or offloads the name holds one a decoder
    // layer (Llama 4 Scout on v5p-256, the published recipe: the compiler's host_temp 30 GiB,
    // 48 bf16[8,8192,5120]), where the scan alone keeps the block's input, its carry.
    const auto names = [&](const std::vector<std::string>& list) {
      return r.policy.wrapped && std::count(list.begin(), list.end(), "decoder_layer_input") > 0;
    };
    const int64_t named_inputs =
        std::max(1, s.attention_blocks + s.linear_attention_blocks) * carry;
    const bool layer_inputs_kept = names(r.policy.offloaded) || names(r.policy.saved);
    if (names(r.policy.offloaded)) {
      s.offloaded_bytes += named_inputs;
    } else if (names(r.policy.saved)) {
      s.kept.push_back(
          {"decoder_layer_input", named_inputs, "each decoder layer's input, saved by the policy"});
    } else {
      s.kept.push_back({"decoder_layer_input", carry, "the layer's input, the scan's carry"});
    }
    // The weights gathered whole, the gmm's expert kernels on their lanes on TPU.
    const auto gathered_on_target = [&](const LayerWeights& w) {
      int64_t total = 0;
      for (const ParamBuffer* p : w.params) {
        total += model_internal::GmmKernelBytes(
            model_internal::GatheredWeightBytes(config, r.mesh, {{p}, w.layers}),
            model_internal::GmmKernelMinor(config, r.mesh, *p), tpu);
      }
      return total;
    };
    const auto weights_of = [&](ParamRole role) {
      LayerWeights w;
      w.layers = s.layers;
      for (const ParamBuffer* p : params) {
        if (p->role == role) w.params.push_back(p);
      }
      return w;
    };
    // One sublayer's arrays of a role, where the stack holds `count` sublayers of it: MaxText
    // names each sublayer's under its own prefix (layers_0/, layers_1/, ...), so in path order
    // they are `count` equal runs. Llama 4's block of 4 gathers each sublayer's q, k, v and
    // out twice a step (the HLO of its published recipe: 963 such all-gathers over 48 layers,
    // not four times as many); a split that is not even takes the share of all of them.
    const auto one_sublayer = [&](ParamRole role, int count) {
      LayerWeights all = weights_of(role);
      const size_t n = all.params.size();
      if (count <= 1) return all;
      if (n % static_cast<size_t>(count) != 0) {
        all.layers *= count;
        return all;
      }
      std::sort(all.params.begin(), all.params.end(),
                [](const ParamBuffer* a, const ParamBuffer* b) { return a->path < b->path; });
      all.params.resize(n / static_cast<size_t>(count));
      return all;
    };
    // A scan of one layer is inlined on TPU: its weights stay gathered from the forward
    // (measured: gpt-oss-20b's, llama4-17b-16e's and kimi-k2's steps gather each once). Not
    // a stack sharing its loop with a nested one: MaxText runs the block's one full-attention
    // layer in a scan of its own, "guarded by a trip-count-one while boundary" so that it is
    // rematerialized alone (models/gemma4.py, _scan_global_layer; Qwen3-Next's alike).
    const bool shares_loop = std::any_of(by_stack.begin(), by_stack.end(), [&](const auto& other) {
      return other.first != name && other.second.front()->loop == s.loop;
    });
    const bool inlined = tpu && s.layers == 1 && !shares_loop;
    // Not where its MoE layers are einsums (the dense dispatch): there the compiler runs each
    // layer's backward from what it kept of that layer's forward and gathers the layer's
    // kernels again (gpt-oss-20b at 2 layers on v6e-8, sparse_matmul=false: at its fullest
    // moment, in the second layer's backward, that layer's wi_0, wi_1, ffn_act and wo outputs
    // from the forward, its three kernels gathered again, none of the first layer's).
    const bool inlined_einsums =
        inlined && s.moe_blocks > 0 && !blocks.moe.empty() && !blocks.moe.front().grouped;
    if (inlined_einsums) einsum_stacks.insert(name);
    // Each block of one layer, with its own gathered weights (a stack of several sublayers
    // holds each role's arrays once per sublayer).
    std::vector<BlockFigures> parts;
    std::vector<int64_t> part_gathered;
    std::vector<bool> part_einsum_experts;  // a MoE part of the dense dispatch
    const auto add_blocks = [&](int count, ParamRole role, const auto& figures) {
      LayerWeights weights = weights_of(role);
      // The shared experts run inside the MoE block (BlocksNeeded::shared): gathered with it.
      if (role == ParamRole::kMoe) {
        for (const ParamBuffer* p : weights_of(ParamRole::kSharedExperts).params)
          weights.params.push_back(p);
      }
      const int64_t gathered = gathered_on_target(weights) / std::max(1, count);
      for (int i = 0; i < count; ++i) {
        parts.push_back(figures());
        // A block of several MoE layers whose inputs the policy does not keep: its
        // rematerialized forward runs through each earlier layer to reach the next, and what
        // that layer's backward reads (its whole rematerialized set) stays through the later
        // layers' backward. gpt-oss-20b at expert 4: the first layer's sorted tokens, wi_0's
        // and wi_1's outputs, both bias rows, the ffn_act product and its f32[8192,4,2880]
        // combine input, held from its rematerialized forward to its own backward (the dump
        // of gpt_oss_20b_l4_v5p32_ep4); Qwen3.5 at expert 4 each of its block's three earlier
        // layers' sorted tokens, gmm outputs, ffn_act product and gathered kernels (temp -12.0%
        // without this, +5.5% with it, written before its compile). With each layer's input
        // kept (decoder_layer_input saved or offloaded: Llama 4's published recipes), each
        // layer's forward is run again from its own input, and the earlier layers hold their
        // sorted tokens alone.
        if (role == ParamRole::kMoe && i + 1 < count && r.policy.wrapped && !layer_inputs_kept &&
            !inlined_einsums && parts.back().rematerialized_bytes) {
          parts.back().recomputed_bytes = *parts.back().rematerialized_bytes;
        }
        part_gathered.push_back(gathered);
        part_einsum_experts.push_back(role == ParamRole::kMoe && !parts.back().grouped);
      }
    };
    // The block's own layer of a loop shared with a nested stack: one a block.
    if (shares_loop && s.loop == name) s.blocks = s.layers;
    add_blocks(s.attention_blocks, ParamRole::kAttention, [&] {
      return model_internal::AttentionLayer(config, r.mesh, r.policy, kernel,
                                            one_sublayer(ParamRole::kAttention, s.attention_blocks),
                                            batch, tpu);
    });
    add_blocks(s.linear_attention_blocks, ParamRole::kLinearAttention, [&] {
      return model_internal::LinearAttentionLayer(
          config, r.mesh, r.policy,
          one_sublayer(ParamRole::kLinearAttention, s.linear_attention_blocks), batch, tpu);
    });
    add_blocks(s.moe_blocks, ParamRole::kMoe, [&] { return blocks.moe.at(0); });
    add_blocks(s.mlp_blocks, ParamRole::kMlp, [&] { return blocks.mlp.at(0); });
    int64_t peak_part_gathered = 0, lean_peak_part_gathered = 0;
    // The layer's backward runs its parts last first, after one rematerialized forward of the
    // whole layer: what the earlier parts' backward reads is live through the later parts'.
    // That includes the weights a part that keeps nothing gathers again in that forward, read
    // by its backward too (Qwen3.5's block of four MoE layers: all twelve bf16[1,256,2048,512]
    // expert kernels gathered at the compiler's fullest moment; the attention's kernels beside
    // the MoE backward of every fixture under remat full, about 1% of temp).
    int64_t earlier_recomputed = 0;
    for (size_t i = 0; i < parts.size(); ++i) {
      const BlockFigures& f = parts[i];
      for (const MemoryItem& k : f.kept) s.kept.push_back(k);
      s.offloaded_bytes += f.offloaded_bytes;
      const int64_t peak = f.backward_peak_bytes + earlier_recomputed;
      const int64_t lean_peak =
          f.lean_backward_peak_bytes.value_or(f.backward_peak_bytes) + earlier_recomputed;
      if (lean_peak > s.lean_backward_peak_bytes) {
        s.lean_backward_peak_bytes = lean_peak;
        lean_peak_part_gathered = part_gathered[i];
      }
      s.forward_peak_bytes = std::max(s.forward_peak_bytes, f.forward_peak_bytes);
      earlier_recomputed += f.recomputed_bytes;
      // Not a dense dispatch's expert kernels, which the compiler gathers again for each
      // layer's backward (gpt-oss-20b at 4 layers on v6e-8: one layer's three at its fullest
      // moment, in the second layer's backward of a block: temp +22.0% with the other's, +10.2% without).
      if (r.policy.wrapped && !inlined && f.kept.empty() && !part_einsum_experts[i]) {
        earlier_recomputed += part_gathered[i];
      }
      if (peak > s.backward_peak_bytes) {
        s.backward_peak_bytes = peak;
        s.backward_peak_where = f.backward_peak_where;
        peak_part_gathered = part_gathered[i];
      }
      std::vector<StepCollectiveTotal> issued;
      for (const StepCollectiveTotal& c : f.collectives) {
        if (!(inlined && !inlined_einsums && c.regather)) issued.push_back(c);
      }
      AddCollectives(collectives, issued, s.layers);
    }
    // The cotangent of the layer's output arrives beside the layer's backward, in the
    // activation dtype: the backward loop's carry (bf16[batch, length, emb] among the buffers
    // at the compiler's fullest moment on the 12 fixtures that peak inside the loop with it,
    // float32 on none).
    s.backward_peak_bytes += carry;
    s.lean_backward_peak_bytes += carry;
    s.recomputed_bytes = earlier_recomputed;
    if (!parts.empty()) {
      const BlockFigures& last = parts.back();
      s.rematerialized_bytes = earlier_recomputed - last.recomputed_bytes +
                               last.rematerialized_bytes.value_or(last.recomputed_bytes);
    }
    for (const MemoryItem& k : s.kept) s.kept_bytes += k.bytes;
    s.inlined = inlined;
    for (const ParamBuffer* p : params) {
      if (!p->trainable) continue;
      s.gradient_bytes += p->gradient_hbm_bytes;
      // kimi-k2's inlined expert stacks at expert 8: TPU's temp holds their gradients as
      // bf16[48,7168,2048] and writes the float32 update straight into the donated state.
      s.held_gradient_bytes += s.inlined ? p->gradient_hbm_bytes / ByteSize(p->dtype) *
                                               std::min(act_bytes, ByteSize(p->dtype))
                                         : p->gradient_hbm_bytes;
    }
    if (s.inlined && !inlined_einsums) {
      // All its weights stay gathered from the forward (the fixtures' buffer reports:
      // llama4-17b-16e's twelve bf16 expert kernels, gpt-oss-20b's six, live at the peak);
      // the block's backward peak counted its own.
      for (const ParamBuffer* p : params) {
        s.gathered.push_back({p->path, gathered_on_target({{p}, 1}), ""});
        s.gathered_bytes += s.gathered.back().bytes;
      }
      s.backward_peak_bytes -= std::min(s.backward_peak_bytes, peak_part_gathered);
      s.forward_peak_bytes -= std::min(s.forward_peak_bytes, s.gathered_bytes);
      s.lean_backward_peak_bytes -= std::min(s.lean_backward_peak_bytes, lean_peak_part_gathered);
    }
    r.kept_bytes += CheckedMul(s.kept_bytes, s.layers, "kept residuals");
    r.offloaded_bytes += CheckedMul(s.offloaded_bytes, s.layers, "offloaded residuals");
    r.stacks.push_back(std::move(s));
  }
  LayerWeights head;
  for (const ParamBuffer& p : r.params) {
    if (p.role == ParamRole::kOutputHead ||
        (p.role == ParamRole::kEmbedding && config.Bool("logits_via_embedding"))) {
      head.params.push_back(&p);
    }
  }
  const BlockFigures logits = model_internal::LogitsStep(config, r.mesh, head, batch, tpu);
  r.logits_peak_bytes = logits.backward_peak_bytes;
  AddCollectives(collectives, logits.collectives, 1);
  LayerWeights embedding;
  for (const ParamBuffer& p : r.params) {
    if (p.role == ParamRole::kEmbedding) embedding.params.push_back(&p);
  }
  AddCollectives(collectives,
                 model_internal::EmbeddingCollectives(config, r.mesh, embedding, batch,
                                                      config.Bool("logits_via_embedding")),
                 1);
  // Where the weights are stored wider than the activations, TPU casts each scanned stack to
  // the activation dtype once, before the layer loop, and keeps the cast through the step
  // (measured on the TPU fixtures: the forward loop carries bf16[layers, ...] shards).
  // An inlined stack has no loop to cast before. Where MaxText unrolls the scan over blocks
  // (Gemma 4's), each block casts its own slice before its loops: one block's cast is live
  // (gemma4 with two blocks: bf16[5,128,176,704] of the local experts).
  if (tpu) {
    for (LayerStack& s : r.stacks) {
      if (s.inlined) continue;
      for (const ParamBuffer& p : r.params) {
        if (IsStacked(p) && p.stack == s.name && ByteSize(p.dtype) > act_bytes) {
          s.cast_bytes += p.hbm_bytes / ByteSize(p.dtype) * act_bytes;
        }
      }
      if (unrolled) s.cast_bytes /= s.blocks;
      r.cast_bytes += s.cast_bytes;
    }
  }
  // Stacks scanned in blocks of layers. Where the outer scan loops, a nested stack's inner
  // loop writes the block's gradients into accumulators of its own and reads the block's slice
  // of the cast weights as a copy, beside the outer loop's (Qwen3-Next with two blocks:
  // f32[3,512,128,512] and bf16[3,512,128,512] beside the stack's f32[2,512,3,128,512] and
  // bf16[2,3,512,128,512] at the compiler's fullest moment; with one block the outer loop is
  // gone and they are one). Unrolled (Gemma 4's), a block's gradients are the stack's own
  // (gemma4 with two blocks: f32[5,...] accumulators twice, nothing beside them).
  for (LayerStack& s : r.stacks) {
    if (s.blocks > 1 && !unrolled && s.loop != s.name) {
      s.backward_peak_bytes += (s.gradient_bytes + s.cast_bytes) / s.blocks;
      s.lean_backward_peak_bytes += (s.gradient_bytes + s.cast_bytes) / s.blocks;
    }
  }
  for (LayerStack& s : r.stacks) {
    s.peeled = peels && !s.inlined && s.layers == 2 && s.blocks == 1 && s.loop == s.name;
    if (s.peeled || einsum_stacks.count(s.name))
      model_internal::RelayoutUpdate(by_stack[s.name], s.peeled, moments_bytes, &s);
  }
  const std::vector<std::string> order = StackOrder(layout);
  model_internal::ComposePeak(order, logits, &r);
  model_internal::SettleMemory(&r);
  if (tpu) model_internal::ChooseBackwardOrder(order, logits, &r);

  r.collectives = Merge(collectives, r.mesh);
  for (const StepCollectiveTotal& t : r.collectives) r.collective_bytes_per_device += t.bytes_per_device;

  // The largest buffers at the peak: each parameter with its optimizer state and gradient,
  // the kept residuals of a stack, and the peak's own temporaries.
  for (const ParamBuffer& p : r.params) {
    const int copies = opt == "sgd" ? 2 : 4;
    r.largest.push_back(
        {p.path, p.hbm_bytes * copies,
         fmt::format("{} {} {}: parameter, {}gradient", ToString(p.dtype), ShapeToString(p.shape),
                     p.spec.ToString(), opt == "sgd" ? "" : "mu, nu, ")});
  }
  for (const LayerStack& s : r.stacks) {
    r.largest.push_back({fmt::format("kept residuals of {}", s.name), s.kept_bytes * s.layers,
                         fmt::format("{} layers x {} per layer", s.layers, s.kept.size())});
  }
  r.largest.push_back({"peak temporaries", r.peak_temporary_bytes, r.peak_where});
  std::sort(r.largest.begin(), r.largest.end(),
            [](const MemoryItem& a, const MemoryItem& b) { return a.bytes > b.bytes; });
  if (r.largest.size() > 5) r.largest.resize(5);

  // FLOPs: every trainable matmul weight a token meets (experts: top-k of them), then attention.
  {
    const double experts = static_cast<double>(config.Int("num_experts"));
    const double top_k = static_cast<double>(config.Int("num_experts_per_tok"));
    double active = 0, layer_active = 0;
    for (const ParamBuffer& p : r.params) {
      if (!p.trainable || p.role == ParamRole::kEmbedding || p.role == ParamRole::kNorm) continue;
      double n = static_cast<double>(NumElements(p.shape));
      if (p.role == ParamRole::kMoe && p.path.find("gate") == std::string::npos && experts > 0) {
        n *= top_k / experts;
      }
      active += n;
      if (IsStacked(p)) layer_active += n;
    }
    r.tokens = CheckedMul(batch, length, "tokens per step");
    const double tokens = static_cast<double>(r.tokens);
    const bool mla = config.Str("attention_type") == "mla";
    const double head_dim =
        mla ? static_cast<double>(config.Int("qk_nope_head_dim") + config.Int("qk_rope_head_dim"))
            : static_cast<double>(config.Int("head_dim"));
    double attention_layers = 0;
    for (const LayerStack& s : r.stacks) attention_layers += static_cast<double>(s.layers * s.attention_blocks);
    const double attention = attention_layers * 6.0 * static_cast<double>(batch) *
                             static_cast<double>(length) * static_cast<double>(length) *
                             static_cast<double>(config.Int("num_query_heads")) * head_dim;
    r.model_flops = 6.0 * tokens * active + attention;
    // full re-runs every layer's forward; a policy that saves some names re-runs the rest,
    // counted as half a forward; none keeps everything.
    const double forward = 2.0 * tokens * layer_active + attention / 3.0;
    r.recompute_flops = !r.policy.wrapped ? 0.0 : r.policy.name == "full" ? forward : forward / 2;
  }
  r.global_batch = batch;
  r.settings = {
      {"per_device_batch_size", config.Get("per_device_batch_size").ToString()},
      {"global batch", std::to_string(batch)},
      {"max_target_length", std::to_string(length)},
      {"remat_policy", r.policy.name},
      {"opt_type", opt},
      {"weight_dtype", ToString(weight_dtype)},
      {"dtype", config.Str("dtype")},
      {"attention", config.Str("attention") + " -> " + kernel},
  };
  r.notes.push_back(fmt::format("parameters from MaxText 0.2.5's own layout of {} (recorded by "
                                "tools/maxtext_oracle/export_layouts.py)",
                                layout.model_name));
  for (const std::string& n : blocks.notes) r.notes.push_back(n);
  for (const LayerStack& s : r.stacks) {
    if (!s.peeled) continue;
    r.notes.push_back(
        r.target.num_slices > 1
            ? fmt::format(
                  "not modelled: the stack '{}' has 2 layers and the step crosses slices, where "
                  "TPU's compiler peels its backward loop to none and gathers every layer's "
                  "weights for it in the forward (mixtral-8x7b on 2 x v5p-8: 5.8 GiB kept "
                  "through the backward); fit's temp was 19.5% under the compiler's there (4 "
                  "layers keep the loop)",
                  s.name)
            : fmt::format(
                  "the stack '{}' has 2 layers and the step offloads to the host, where TPU's "
                  "compiler peels its loop to none: the optimizer updates its weights in their "
                  "gradient's layer-major layout, {:.1f} GiB of new state written there before "
                  "copied back (LayerStack::peeled)",
                  s.name, static_cast<double>(s.relayout_update_bytes) / (1 << 30)));
  }
  model_internal::FlagUnmodelled(config, needed.moe, &r);
  if (config.Has("use_indexer") && config.Bool("use_indexer")) {
    r.notes.push_back(
        "use_indexer=true: the sparse indexer's parameters and their gathers are counted, its "
        "index "
        "scores ([batch, length, length] per indexer head) and top-k mask are not: the attention "
        "is modelled as the dense kernel it masks");
  }
  return r;
}

}  // namespace

FitTables LoadFitTables(const HardwareFile& hardware) {
  return {LoadHardwareTable(hardware.text, hardware.source), LayoutTable::Embedded()};
}

FitResult Fit(const FitRequest& given) {
  FitRequest request = given;
  if (!request.tables) request.tables = std::make_shared<const FitTables>(LoadFitTables(request.hardware));
  // The variants that change only remat_policy reuse the blocks' forward runs.
  BlockCache block_cache;
  if (request.block_cache == nullptr) request.block_cache = &block_cache;
  // And every fit of the command reads the same base.yml and model file: parsed once (three
  // parses of MaxText's 92 KB base.yml were most of a fit command's time).
  ParsedYamlCache yaml_cache;
  if (request.yaml_cache == nullptr) request.yaml_cache = &yaml_cache;
  FitResult r = FitOnce(request);
  if (!request.variants) return r;
  // What would make it fit, or give the most headroom: each row a whole fit of its own.
  r.variants = model_internal::Variants(request, r, FitOnce);
  return r;
}

}  // namespace shardtrace
