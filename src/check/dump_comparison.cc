#include "check/dump_comparison.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <optional>
#include <set>

#include "paths/moe_block.h"
#include "run/model_dump.h"
#include "run/run.h"

namespace shardtrace {
namespace {

using Status = TensorComparison::Status;

std::string BlockName(Block block) {
  switch (block) {
    case Block::kMoe:
      return "moe";
    case Block::kMlp:
      return "mlp";
    case Block::kShared:
      return "shared";
  }
  return "";
}

// Which traced weight a dump parameter is: (block, tensor name), or nothing when the
// parameter is outside the MoE/MLP blocks (attention, norms, embeddings).
std::optional<std::pair<Block, std::string>> TracedParam(const DumpParam& p) {
  const std::vector<std::string>& m = p.modules;
  if (m.size() < 2) return std::nullopt;
  const std::string& leaf = m.back();
  const std::string& parent = m[m.size() - 2];
  // RoutedAndSharedMoE's shared_experts, Qwen3NextSparseMoeBlock's shared_expert.
  const bool shared = std::find(m.begin(), m.end(), "shared_experts") != m.end() ||
                      std::find(m.begin(), m.end(), "shared_expert") != m.end();
  static const std::set<std::string> mlp_kernels = {"wi", "wi_0", "wi_1", "wo"};
  static const std::set<std::string> expert_params = {
      "wi_0", "wi_1", "wo", "wi_0_bias", "wi_1_bias", "wo_bias", "per_expert_scale"};
  if ((leaf == "kernel" || leaf == "bias") && mlp_kernels.count(parent))
    return std::pair{shared ? Block::kShared : Block::kMlp,
                     leaf == "kernel" ? parent : parent + ".bias"};
  if (parent == "gate" && (leaf == "kernel" || leaf == "bias"))
    return std::pair{Block::kMoe, "gate." + leaf};
  if (parent == "shared_expert_gate" && leaf == "kernel")
    return std::pair{Block::kMoe, std::string("shared_expert_gate.kernel")};
  if (expert_params.count(leaf) && !shared) return std::pair{Block::kMoe, leaf};
  return std::nullopt;
}

bool IsScanAxis(const std::optional<std::string>& name) {
  return name && (*name == "layers" || *name == "moe_layers" || *name == "dense_layers");
}

// The dump's flax spec as MaxText uses it: axes of size 1 (or not in the mesh) dropped.
PartitionSpec PhysicalSpec(const PartitionSpec& flax, const std::vector<MeshAxis>& mesh) {
  std::vector<PartitionSpec::Entry> entries;
  for (const PartitionSpec::Entry& e : flax.entries()) {
    PartitionSpec::Entry kept;
    for (const std::string& axis : e)
      for (const MeshAxis& a : mesh)
        if (a.name == axis && a.size > 1) kept.push_back(axis);
    entries.push_back(kept);
  }
  return PartitionSpec(entries);
}

void Finish(TensorComparison& c) {
  if (c.dump_name.empty()) {
    c.status = Status::kOnlyInTrace;
    return;
  }
  if (c.trace_name.empty()) {
    c.status = Status::kOnlyInDump;
    return;
  }
  if (c.dump_logical != c.trace_logical) c.differing.push_back("logical axes");
  if (c.dump_spec != c.trace_spec) c.differing.push_back("spec");
  if (c.dump_shape != c.trace_shape) c.differing.push_back("shape");
  c.status = c.differing.empty() ? Status::kAgree : Status::kDiffer;
}

}  // namespace

std::string ToString(TensorComparison::Status status) {
  switch (status) {
    case Status::kAgree:
      return "agree";
    case Status::kDiffer:
      return "differ";
    case Status::kOnlyInDump:
      return "only in dump";
    case Status::kOnlyInTrace:
      return "only in trace";
  }
  return "";
}

int DumpComparison::Count(TensorComparison::Status status) const {
  return static_cast<int>(
      std::count_if(tensors.begin(), tensors.end(),
                    [&](const TensorComparison& t) { return t.status == status; }));
}

bool DumpComparison::agrees() const {
  return mesh_agrees() && Count(Status::kAgree) == static_cast<int>(tensors.size());
}

DumpComparison CompareWithDump(const ShardingDump& dump, const RunRequest& request) {
  const RunSetup run_setup = Prepare(request);
  const Config& config = run_setup.config;
  const Mesh& mesh = run_setup.mesh;
  DumpComparison out;
  out.dump_dir = dump.dir;
  out.inferred = InferRun(dump);
  out.devices = mesh.num_devices();
  out.config_files = config.loaded_files();
  out.maxtext_revision = config.revision().Title();
  out.dump_mesh = DumpMeshString(dump);
  out.trace_mesh = mesh.ToString();
  out.warnings = run_setup.warnings;

  const MoeSetup& setup = run_setup.setup;
  // Kernel weights of every traced block, by (block, name), in trace order.
  std::vector<std::pair<std::pair<Block, std::string>, const TensorRecord*>> weights;
  std::vector<Trace> traces;
  const std::vector<Block> blocks = ModelBlocks(setup);
  traces.reserve(blocks.size());
  for (const Block block : blocks) {
    RunRequest block_request = request;
    block_request.block = block;
    traces.push_back(Run(block_request).trace);
    out.blocks.push_back(BlockName(block) + ": " + traces.back().path);
  }
  // The moe trace of RoutedAndSharedMoE (Qwen3NextSparseMoeBlock) holds the shared experts
  // too: they count once, as the shared block's weights.
  for (size_t b = 0; b < blocks.size(); ++b)
    for (const TensorRecord& t : traces[b].tensors) {
      if (t.kind != TensorKind::kWeight || t.constraint != Constraint::kKernelAxes) continue;
      const bool shared = InSharedExperts(t.scope);
      const std::pair<Block, std::string> key{shared ? Block::kShared : blocks[b], t.name};
      if (std::none_of(weights.begin(), weights.end(),
                       [&](const auto& w) { return w.first == key; }))
        weights.push_back({key, &t});
    }

  std::set<size_t> matched;
  for (const DumpParam& p : dump.params) {
    const auto traced = TracedParam(p);
    if (!traced) {
      ++out.params_not_compared;
      continue;
    }
    TensorComparison c;
    c.kind = TensorComparison::Kind::kParam;
    c.dump_name = p.path;
    LogicalAxes logical;
    std::vector<PartitionSpec::Entry> spec;
    Shape shape;
    const PartitionSpec physical = PhysicalSpec(p.flax_spec, dump.mesh);
    for (size_t d = 0; d < p.shape.size(); ++d) {
      if (IsScanAxis(p.logical[d])) continue;
      logical.push_back(p.logical[d]);
      spec.push_back(physical[d]);
      shape.push_back(p.shape[d]);
    }
    c.dump_logical = LogicalAxesToString(logical);
    c.dump_spec = PartitionSpec(spec).ToString();
    c.dump_shape = ShapeToString(shape);
    for (size_t i = 0; i < weights.size(); ++i) {
      if (weights[i].first != *traced) continue;
      const TensorRecord& t = *weights[i].second;
      matched.insert(i);
      c.trace_name = fmt::format("{} {}/{}", BlockName(traced->first), t.scope, t.name);
      c.trace_logical = t.logical_axes ? LogicalAxesToString(*t.logical_axes) : "";
      c.trace_spec = t.partition_spec ? t.partition_spec->ToString() : "";
      c.trace_shape = ShapeToString(t.shape);
      break;
    }
    Finish(c);
    out.tensors.push_back(std::move(c));
  }
  std::set<Block> blocks_in_dump;
  for (const size_t i : matched) blocks_in_dump.insert(weights[i].first.first);
  for (size_t i = 0; i < weights.size(); ++i) {
    if (matched.count(i)) continue;
    if (!blocks_in_dump.count(weights[i].first.first)) {
      const std::string name = BlockName(weights[i].first.first);
      if (std::find(out.blocks_not_in_dump.begin(), out.blocks_not_in_dump.end(), name) ==
          out.blocks_not_in_dump.end())
        out.blocks_not_in_dump.push_back(name);
      ++out.trace_params_not_compared;
      continue;
    }
    const TensorRecord& t = *weights[i].second;
    TensorComparison c;
    c.trace_name = fmt::format("{} {}/{}", BlockName(weights[i].first.first), t.scope, t.name);
    c.trace_logical = t.logical_axes ? LogicalAxesToString(*t.logical_axes) : "";
    c.trace_spec = t.partition_spec ? t.partition_spec->ToString() : "";
    c.trace_shape = ShapeToString(t.shape);
    Finish(c);
    out.tensors.push_back(std::move(c));
  }

  // Activations: moe/ and linears/ entries, aligned by name and occurrence. A lone block's
  // dump holds nothing else but the "Unknown" index temporaries, which are the block's own and
  // compared too; in a whole model's dump they mix with attention's and are left out.
  auto in_blocks = [](const std::string& d) {
    return d.rfind("moe/", 0) == 0 || d.rfind("linears/", 0) == 0;
  };
  const bool lone_block =
      std::all_of(dump.activations.begin(), dump.activations.end(), [&](const DumpActivation& a) {
        return in_blocks(a.description) || a.description == kUnknownActivation;
      });
  auto compared = [&](const std::string& d) {
    return in_blocks(d) || (lone_block && d == kUnknownActivation);
  };
  // A block whose kernels the dump lacks (a lone MoE block exported without the model's dense
  // layers) has none of its activations in it either.
  std::vector<Block> dumped_blocks;
  for (const Block block : blocks)
    if (std::find(out.blocks_not_in_dump.begin(), out.blocks_not_in_dump.end(), BlockName(block)) ==
        out.blocks_not_in_dump.end())
      dumped_blocks.push_back(block);
  std::vector<DumpEntry> ours = DumpBlocks(request, dumped_blocks);
  std::vector<bool> used(ours.size(), false);
  std::map<std::string, int> seen_dump;
  for (const DumpActivation& a : dump.activations) {
    if (!compared(a.description)) {
      ++out.activations_not_compared;
      continue;
    }
    const int occurrence = seen_dump[a.description]++;
    TensorComparison c;
    c.kind = TensorComparison::Kind::kActivation;
    c.dump_name =
        occurrence == 0 ? a.description : fmt::format("{} #{}", a.description, occurrence + 1);
    c.dump_logical = a.logical;
    c.dump_spec = a.spec;
    c.dump_shape = a.type;
    int k = 0;
    for (size_t i = 0; i < ours.size(); ++i) {
      if (ours[i].description != a.description || k++ != occurrence) continue;
      used[i] = true;
      c.trace_name = c.dump_name;
      c.trace_logical = ours[i].logical;
      c.trace_spec = ours[i].spec.ToString();
      c.trace_shape = ours[i].type;
      break;
    }
    Finish(c);
    out.tensors.push_back(std::move(c));
  }
  std::map<std::string, int> seen_ours;
  for (size_t i = 0; i < ours.size(); ++i) {
    const int occurrence = seen_ours[ours[i].description]++;
    if (used[i]) continue;
    if (!compared(ours[i].description)) {
      ++out.trace_activations_not_compared;
      continue;
    }
    TensorComparison c;
    c.kind = TensorComparison::Kind::kActivation;
    c.trace_name = occurrence == 0 ? ours[i].description
                                   : fmt::format("{} #{}", ours[i].description, occurrence + 1);
    c.trace_logical = ours[i].logical;
    c.trace_spec = ours[i].spec.ToString();
    c.trace_shape = ours[i].type;
    Finish(c);
    out.tensors.push_back(std::move(c));
  }
  return out;
}

}  // namespace shardtrace
