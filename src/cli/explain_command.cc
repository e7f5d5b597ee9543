// `shardtrace explain`: one logical-axes tuple resolved rule by rule.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <nlohmann/json.hpp>
#include <sstream>

#include "cli/cli.h"
#include "cli/cli_options.h"
#include "cli/commands.h"
#include "run/run.h"
#include "shard/sharding.h"
#include "util/error.h"

namespace shardtrace {
namespace {

struct ExplainOptions {
  CommonOptions common;
  std::string axes;
  std::string shape;
  std::string dtype;
};

Shape ParseShape(const std::string& text, size_t rank) {
  Shape shape;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    try {
      size_t used = 0;
      const long long v = std::stoll(item, &used);
      if (used != item.size() || v <= 0) throw std::invalid_argument(item);
      shape.push_back(v);
    } catch (const std::exception&) {
      Fail("--shape {}: '{}' is not a positive integer", text, item);
    }
  }
  if (shape.size() != rank)
    Fail("--shape {} has {} dims but --axes names {}", text, shape.size(), rank);
  return shape;
}

nlohmann::ordered_json EntryJson(const PartitionSpec::Entry& e) {
  if (e.empty()) return nullptr;
  if (e.size() == 1) return e[0];
  return e;
}

std::string AxesList(const std::vector<std::string>& axes) {
  return axes.empty() ? "[]" : fmt::format("[{}]", fmt::join(axes, ", "));
}

std::string DecisionText(const RuleDecision& d) {
  switch (d.outcome) {
    case RuleDecision::Outcome::kApplied:
      return "applied";
    case RuleDecision::Outcome::kDimAlreadyAssigned:
      return "skipped: dim already assigned by an earlier rule";
    case RuleDecision::Outcome::kMeshAxisUsed:
      return fmt::format("skipped: mesh axis '{}' already used by another dim", d.blocking_axis);
  }
  return "";
}

void RunExplainCommand(const ExplainOptions& options, std::ostream& out) {
  const RunInputs in = LoadInputs(SymbolicRequest(options.common.args, options.common.devices));
  if (options.axes.find_first_not_of(" ,()") == std::string::npos)
    Fail("--axes '{}': expected logical axis names separated by commas, e.g. exp,embed_moe,mlp_moe",
         options.axes);
  const LogicalAxes axes = ParseLogicalAxes(options.axes);
  const Resolution res = ResolveLogicalAxes(axes, in.config.logical_axis_rules(), &in.mesh);
  std::optional<Sharding> sharding;
  if (!options.shape.empty()) {
    const DType dtype =
        ParseDType(options.dtype.empty() ? in.config.Str("dtype") : options.dtype, "--dtype");
    sharding =
        ShardTensor("--shape", ParseShape(options.shape, axes.size()), dtype, res.spec, in.mesh);
  }
  if (options.common.format == "json") {
    nlohmann::ordered_json j;
    nlohmann::ordered_json logical = nlohmann::ordered_json::array();
    for (const auto& a : axes)
      logical.push_back(a ? nlohmann::ordered_json(*a) : nlohmann::ordered_json(nullptr));
    j["logical_axes"] = logical;
    nlohmann::ordered_json spec = nlohmann::ordered_json::array();
    for (const auto& e : res.spec.entries()) spec.push_back(EntryJson(e));
    j["partition_spec"] = spec;
    j["physical"] = res.spec.ToString();
    nlohmann::ordered_json before = nlohmann::ordered_json::array();
    for (const auto& e : res.before_removal.entries()) before.push_back(EntryJson(e));
    j["before_size1_removal"] = before;
    j["mesh"] = in.mesh.ToString();
    nlohmann::ordered_json dims = nlohmann::ordered_json::array();
    for (const DimResolution& d : res.dims) {
      nlohmann::ordered_json dj;
      dj["logical"] =
          d.logical ? nlohmann::ordered_json(*d.logical) : nlohmann::ordered_json(nullptr);
      nlohmann::ordered_json rules = nlohmann::ordered_json::array();
      for (const RuleDecision& r : d.decisions)
        rules.push_back(
            {{"rule", r.rule_index}, {"mesh_axes", r.mesh_axes}, {"outcome", DecisionText(r)}});
      dj["rules"] = rules;
      dj["removed_axes"] = d.removed;
      dims.push_back(dj);
    }
    j["dims"] = dims;
    if (sharding) {
      j["local_shape"] = sharding->local_shape;
      j["bytes_per_device"] = sharding->bytes_per_device;
      j["warnings"] = sharding->warnings;
    }
    WriteOutput(options.common, j.dump(2) + "\n", out);
    return;
  }
  std::string text;
  text += fmt::format("logical   {}\n", LogicalAxesToString(axes));
  text += fmt::format("mesh      {}\n", in.mesh.ToString());
  text += fmt::format("flax      {}   (before size-1 removal)\n", res.before_removal.ToString());
  text += fmt::format("physical  {}\n", res.spec.ToString());
  if (sharding) {
    text += fmt::format("local     {} of {} {}, {} bytes per device\n",
                        ShapeToString(sharding->local_shape), ToString(sharding->dtype),
                        ShapeToString(sharding->global_shape), sharding->bytes_per_device);
    for (const std::string& w : sharding->warnings) text += fmt::format("warning   {}\n", w);
  }
  for (size_t i = 0; i < res.dims.size(); ++i) {
    const DimResolution& d = res.dims[i];
    text += fmt::format("\ndim {} {} -> {}\n", i, d.logical ? "'" + *d.logical + "'" : "None",
                        PartitionSpec::EntryToString(res.spec[i]));
    if (!d.logical) {
      text += "  unnamed dim: replicated\n";
      continue;
    }
    if (!d.has_rule) text += "  no rule names it: replicated\n";
    for (const RuleDecision& r : d.decisions)
      text += fmt::format("  rule {:>2} {} {:<40} {}\n", r.rule_index, r.logical,
                          AxesList(r.mesh_axes), DecisionText(r));
    if (!d.removed.empty())
      text += fmt::format("  removed {} (size 1 or not in the mesh)\n", AxesList(d.removed));
  }
  WriteOutput(options.common, text, out);
}

}  // namespace

Command AddExplainCommand(CLI::App& app) {
  auto options = std::make_shared<ExplainOptions>();
  CLI::App* cmd =
      app.add_subcommand("explain", "resolve logical axes to a PartitionSpec, rule by rule");
  AddCommon(cmd, options->common, {"text", "json"});
  cmd->add_option("--axes", options->axes,
                  "logical axes, e.g. exp,embed_moe,mlp_moe (None = unnamed)")
      ->required();
  cmd->add_option("--shape", options->shape, "global shape, e.g. 64,2048,1408");
  cmd->add_option("--dtype", options->dtype, "dtype for bytes per device (default: config dtype)");
  cmd->footer(
      "Example: shardtrace explain --axes exp,embed_moe,mlp_moe --shape 64,2048,1408 "
      "ici_expert_parallelism=2 --devices 8");
  return {cmd, std::shared_ptr<CommonOptions>(options, &options->common),
          [] { return std::vector<std::string>(); },
          [options](std::ostream& out) {
            RunExplainCommand(*options, out);
            return kExitOk;
          }};
}

}  // namespace shardtrace
