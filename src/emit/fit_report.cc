#include "emit/fit_report.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "emit/human_bytes.h"
#include "emit/text_table.h"
#include "ir/collective_kind.h"

namespace shardtrace {
namespace {

std::string AxesText(const std::vector<std::string>& axes) {
  return axes.empty() ? "-" : fmt::format("{}", fmt::join(axes, " x "));
}

std::string Billions(int64_t count) {
  return fmt::format("{:.2f} B", static_cast<double>(count) / 1e9);
}

}  // namespace

std::string FitVerdict(bool fits, int64_t headroom_bytes) {
  return fits ? fmt::format("fits with {} to spare", HumanBytes(headroom_bytes))
              : fmt::format("does not fit by {}", HumanBytes(-headroom_bytes));
}

std::string FitToText(const FitResult& f) {
  const FitMemory& m = f.memory;
  std::string out = fmt::format("{} on {}: {}\n", f.model_name, f.target.ToString(),
                                FitVerdict(f.fits, f.headroom_bytes));
  out += fmt::format("  the whole training step per device: {} of {} HBM ({})\n",
                     HumanBytes(m.peak_memory_in_bytes), HumanBytes(f.target.hbm_bytes),
                     f.revision);
  out += fmt::format("  mesh {}", f.mesh.ToString());
  for (const auto& [key, value] : f.settings) out += fmt::format(", {} {}", key, value);
  out += "\n\nmemory per device\n";
  TextTable mem({"", "bytes", "what"});
  mem.AddRow({"argument_size_in_bytes", HumanBytes(m.argument_size_in_bytes), "the step's inputs"});
  mem.AddRow({"  parameters", HumanBytes(f.parameter_bytes),
              fmt::format("{} parameters, every layer (scanned stacks), embedding, head, norms",
                          Billions(f.parameter_count))});
  mem.AddRow({"  optimizer state", HumanBytes(f.optimizer_bytes), "mu and nu (sgd: none)"});
  mem.AddRow({"  batch", HumanBytes(f.batch_bytes),
              "inputs, positions, segmentations, targets (int32)"});
  mem.AddRow({"output_size_in_bytes", HumanBytes(m.output_size_in_bytes), "the new state"});
  mem.AddRow({"alias_size_in_bytes", HumanBytes(m.alias_size_in_bytes),
              "the donated state the output reuses"});
  mem.AddRow({"temp_size_in_bytes", HumanBytes(m.temp_size_in_bytes), "inside the step"});
  mem.AddRow({"  gradients", HumanBytes(f.gradient_bytes), "sharded like the parameters"});
  mem.AddRow({"  kept for the backward", HumanBytes(f.kept_bytes),
              "every layer's residuals under " + f.policy.name});
  if (f.cast_bytes > 0) {
    mem.AddRow({"  weights cast", HumanBytes(f.cast_bytes),
                "the scanned weights in the activation dtype, cast once before the layer loop"});
  }
  mem.AddRow({"  peak temporaries", HumanBytes(f.peak_temporary_bytes), f.peak_where});
  mem.AddRow({"host_temp_size_in_bytes", HumanBytes(m.host_temp_size_in_bytes),
              "residuals offloaded to pinned_host"});
  mem.AddRow({"peak_memory_in_bytes", HumanBytes(m.peak_memory_in_bytes),
              "argument + output - alias + temp"});
  out += mem.Render("  ");

  out += "\nlayers (one layer of each scanned stack)\n";
  TextTable layers({"stack", "layers", "blocks", "kept per layer", "offloaded per layer",
                    "backward peak"});
  for (const LayerStack& s : f.stacks) {
    std::vector<std::string> blocks;
    if (s.attention_blocks) blocks.push_back(fmt::format("{} attention", s.attention_blocks));
    if (s.moe_blocks) blocks.push_back(fmt::format("{} MoE", s.moe_blocks));
    if (s.shared_blocks) blocks.push_back(fmt::format("{} shared experts", s.shared_blocks));
    if (s.mlp_blocks) blocks.push_back(fmt::format("{} MLP", s.mlp_blocks));
    layers.AddRow({s.name, std::to_string(s.layers), fmt::format("{}", fmt::join(blocks, ", ")),
                   HumanBytes(s.kept_bytes), HumanBytes(s.offloaded_bytes),
                   HumanBytes(s.backward_peak_bytes)});
  }
  out += layers.Render("  ");

  out += "\nfive largest buffers\n";
  TextTable largest({"buffer", "bytes", "what"});
  for (const MemoryItem& i : f.largest) largest.AddRow({i.name, HumanBytes(i.bytes), i.detail});
  out += largest.Render("  ");

  out += fmt::format("\ncollectives per step: {} per device\n",
                     HumanBytes(f.collective_bytes_per_device));
  TextTable coll({"collective", "mesh axes", "count", "bytes per device", "network", "from"});
  for (const StepCollectiveTotal& c : f.collectives) {
    coll.AddRow({ToString(c.kind), AxesText(c.axes), std::to_string(c.count),
                 HumanBytes(c.bytes_per_device), c.dcn ? "DCN" : "ICI", c.from});
  }
  out += coll.empty() ? "  none: every weight and activation stays on its device\n"
                      : coll.Render("  ");

  if (!f.variants.empty()) {
    out += "\nvariants (each a whole fit of its own)\n";
    TextTable var({"override", "verdict", "peak"});
    for (const FitVariant& v : f.variants) {
      var.AddRow({fmt::format("{}", fmt::join(v.overrides, " ")),
                  v.refused.empty() ? FitVerdict(v.fits, v.headroom_bytes) : "refused: " + v.refused,
                  v.refused.empty() ? HumanBytes(v.peak_bytes) : "-"});
    }
    out += var.Render("  ");
  }
  out += "\nassumed\n";
  out += fmt::format("  remat_policy={}: {}\n", f.policy.name, f.policy.summary);
  for (const std::string& n : f.notes) out += "  " + n + "\n";
  return out;
}

std::string FitToJson(const FitResult& f) {
  nlohmann::ordered_json j;
  j["maxtext_revision"] = f.revision;
  j["model_name"] = f.model_name;
  j["compile_topology"] = f.target.topology;
  j["compile_topology_num_slices"] = f.target.num_slices;
  j["devices"] = f.target.devices();
  j["chip"] = f.target.chip.name;
  j["mesh"] = f.mesh.ToString();
  j["fits"] = f.fits;
  j["hbm_bytes"] = f.target.hbm_bytes;
  j["headroom_bytes"] = f.headroom_bytes;
  const FitMemory& m = f.memory;
  j["argument_size_in_bytes"] = m.argument_size_in_bytes;
  j["output_size_in_bytes"] = m.output_size_in_bytes;
  j["alias_size_in_bytes"] = m.alias_size_in_bytes;
  j["temp_size_in_bytes"] = m.temp_size_in_bytes;
  j["host_temp_size_in_bytes"] = m.host_temp_size_in_bytes;
  j["peak_memory_in_bytes"] = m.peak_memory_in_bytes;
  j["components"] = {{"parameters", f.parameter_bytes},
                     {"optimizer_state", f.optimizer_bytes},
                     {"batch", f.batch_bytes},
                     {"gradients", f.gradient_bytes},
                     {"kept_for_backward", f.kept_bytes},
                     {"weights_cast", f.cast_bytes},
                     {"offloaded", f.offloaded_bytes},
                     {"peak_temporaries", f.peak_temporary_bytes}};
  j["peak_where"] = f.peak_where;
  j["parameter_count"] = f.parameter_count;
  nlohmann::ordered_json settings = nlohmann::ordered_json::object();
  for (const auto& [k, v] : f.settings) settings[k] = v;
  j["settings"] = settings;
  j["params"] = nlohmann::ordered_json::array();
  for (const ParamBuffer& p : f.params) {
    j["params"].push_back({{"path", p.path},
                           {"shape", p.shape},
                           {"dtype", ToString(p.dtype)},
                           {"spec", p.spec.ToString()},
                           {"bytes_per_device", p.bytes_per_device},
                           {"role", ToString(p.role)}});
  }
  j["stacks"] = nlohmann::ordered_json::array();
  for (const LayerStack& s : f.stacks) {
    nlohmann::ordered_json kept = nlohmann::ordered_json::array();
    for (const MemoryItem& k : s.kept) kept.push_back({{"name", k.name}, {"bytes", k.bytes}});
    j["stacks"].push_back({{"name", s.name},
                           {"layers", s.layers},
                           {"kept_per_layer", kept},
                           {"kept_bytes_per_layer", s.kept_bytes},
                           {"offloaded_bytes_per_layer", s.offloaded_bytes},
                           {"backward_peak_bytes", s.backward_peak_bytes}});
  }
  j["largest"] = nlohmann::ordered_json::array();
  for (const MemoryItem& i : f.largest) {
    j["largest"].push_back({{"name", i.name}, {"bytes", i.bytes}, {"what", i.detail}});
  }
  j["collectives"] = nlohmann::ordered_json::array();
  for (const StepCollectiveTotal& c : f.collectives) {
    j["collectives"].push_back({{"kind", ToString(c.kind)},
                                {"hlo", HloName(c.kind)},
                                {"axes", c.axes},
                                {"count", c.count},
                                {"bytes_per_device", c.bytes_per_device},
                                {"dcn", c.dcn},
                                {"from", c.from}});
  }
  j["variants"] = nlohmann::ordered_json::array();
  for (const FitVariant& v : f.variants) {
    nlohmann::ordered_json row = {{"overrides", v.overrides}};
    if (v.refused.empty()) {
      row["fits"] = v.fits;
      row["peak_memory_in_bytes"] = v.peak_bytes;
      row["headroom_bytes"] = v.headroom_bytes;
    } else {
      row["refused"] = v.refused;
    }
    j["variants"].push_back(row);
  }
  j["remat_policy"] = f.policy.name;
  j["notes"] = f.notes;
  return j.dump(2) + "\n";
}

}  // namespace shardtrace
