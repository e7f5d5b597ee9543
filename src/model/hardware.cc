#include "model/hardware.h"

#include <yaml-cpp/yaml.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "config/key_suggest.h"
#include "util/error.h"

namespace shardtrace {

// Embedded data files (scripts/embed_text.cmake).
std::string_view HardwareTableText();
std::string_view MaxTextTopologiesText();

namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

double PositiveNumber(const YAML::Node& row, const std::string& chip, const char* field,
                      std::string_view source) {
  const YAML::Node node = row[field];
  double value = 0;
  try {
    value = node ? node.as<double>() : 0;
  } catch (const YAML::Exception&) {
    Fail("{}: chips.{}.{} is '{}', expected a positive number", source, chip, field, node.Scalar());
  }
  if (!(value > 0) || !std::isfinite(value)) {
    Fail("{}: chips.{}.{} is missing or not positive, expected a positive number", source, chip,
         field);
  }
  return value;
}

int64_t WholeNumber(double value, const std::string& chip, const char* field,
                    std::string_view source) {
  if (value > 9.0e18 || value != std::floor(value)) {
    Fail("{}: chips.{}.{} is {}, expected a whole number", source, chip, field, value);
  }
  return static_cast<int64_t>(value);
}

}  // namespace

HardwareTable LoadHardwareTable(std::string_view text, std::string_view source_name) {
  HardwareTable table;
  table.source_name = text.empty() ? "embedded hardware_table.yml" : std::string(source_name);
  const std::string_view source = table.source_name;
  YAML::Node root;
  try {
    root = YAML::Load(std::string(text.empty() ? HardwareTableText() : text));
  } catch (const YAML::Exception& e) {
    Fail("{}:{}:{}: {}", source, e.mark.line + 1, e.mark.column + 1, e.msg);
  }
  if (!root.IsMap() || !root["chips"] || !root["chips"].IsMap()) {
    Fail("{}: expected a mapping with 'chips' (one row per chip kind)", source);
  }
  for (const auto& entry : root["chips"]) {
    const std::string name = entry.first.Scalar();
    const YAML::Node row = entry.second;
    if (!row.IsMap()) Fail("{}: chips.{} is not a mapping of figures", source, name);
    Chip chip;
    chip.name = name;
    chip.hbm_bytes = WholeNumber(PositiveNumber(row, name, "hbm_bytes", source), name,
                                 "hbm_bytes", source);
    chip.hbm_bandwidth = PositiveNumber(row, name, "hbm_bandwidth", source);
    chip.peak_bf16_flops = PositiveNumber(row, name, "peak_bf16_flops", source);
    chip.ici_link_bandwidth = PositiveNumber(row, name, "ici_link_bandwidth", source);
    chip.ici_links = WholeNumber(PositiveNumber(row, name, "ici_links", source), name,
                                 "ici_links", source);
    chip.torus = row["torus"] ? WholeNumber(row["torus"].as<double>(0), name, "torus", source) : 0;
    chip.dcn_bandwidth_per_host = PositiveNumber(row, name, "dcn_bandwidth_per_host", source);
    chip.devices_per_host = WholeNumber(PositiveNumber(row, name, "devices_per_host", source),
                                        name, "devices_per_host", source);
    if (row["matmul_efficiency"]) {
      chip.matmul_efficiency = PositiveNumber(row, name, "matmul_efficiency", source);
      if (chip.matmul_efficiency > 1) {
        Fail("{}: chips.{}.matmul_efficiency is {}, expected a share of the peak in (0, 1]", source,
             name, chip.matmul_efficiency);
      }
    }
    if (row["scheduler_memory_limit"]) {
      chip.scheduler_memory_limit = PositiveNumber(row, name, "scheduler_memory_limit", source);
      if (chip.scheduler_memory_limit > 1) {
        Fail("{}: chips.{}.scheduler_memory_limit is {}, expected a share of hbm_bytes in (0, 1]",
             source, name, chip.scheduler_memory_limit);
      }
    }
    for (const auto& [key, field] : {std::pair{"narrow_combine_rows", &chip.narrow_combine_rows},
                                     std::pair{"windowed_dense_backward",
                                               &chip.windowed_dense_backward}}) {
      if (!row[key]) continue;
      const std::string v = row[key].Scalar();
      if (v != "true" && v != "false") {
        Fail("{}: chips.{}.{} is {}, expected true or false", source, name, key, v);
      }
      *field = v == "true";
    }
    chip.source = row["source"] ? row["source"].Scalar() : "";
    if (chip.source.empty()) Fail("{}: chips.{}.source is missing: cite the figures", source, name);
    table.chips.emplace(name, std::move(chip));
  }
  if (root["topology_chips"]) {
    for (const auto& entry : root["topology_chips"]) {
      const std::string chip = entry.second.Scalar();
      if (!table.chips.count(chip)) {
        Fail("{}: topology_chips.{} names chip '{}', which chips lacks", source,
             entry.first.Scalar(), chip);
      }
      table.topology_chips.emplace(entry.first.Scalar(), chip);
    }
  }
  const nlohmann::json maxtext = nlohmann::json::parse(MaxTextTopologiesText());
  table.topologies_source = maxtext.at("source").get<std::string>();
  for (const auto& [name, t] : maxtext.at("topologies").items()) {
    table.topologies[name] = {t.at("platform").get<std::string>(),
                              t.at("devices_per_slice").get<int64_t>()};
  }
  return table;
}

std::string Target::ToString() const {
  const std::string where =
      topology.empty() ? fmt::format("{} devices", devices())
                       : fmt::format("{}{} ({} devices)", topology,
                                     num_slices > 1 ? fmt::format(" x {} slices", num_slices) : "",
                                     devices());
  return fmt::format("{}, {}, {:.2f} GiB HBM per device", where,
                     chip.name.empty() ? platform : chip.name,
                     static_cast<double>(hbm_bytes) / kGiB);
}

Target ResolveTopology(const HardwareTable& table, std::string_view topology, int64_t num_slices) {
  const auto& topologies = table.topologies;
  if (num_slices < 1 || num_slices > 4096) {
    Fail("compile_topology_num_slices is {}, expected 1 to 4096 slices", num_slices);
  }
  const auto it = topologies.find(std::string(topology));
  if (it == topologies.end()) {
    std::vector<std::string> names;
    for (const auto& [name, t] : topologies) names.push_back(name);
    const auto near = config_internal::SuggestKeys(topology, names);
    Fail("compile_topology '{}' is not in MaxText's topology table ({}){}", topology,
         table.topologies_source,
         near.empty() ? std::string(", e.g. v5p-256, v6e-256, v5e-16, tpu7x-128")
                      : fmt::format("; did you mean {}?", fmt::join(near, ", ")));
  }
  Target target;
  target.topology = std::string(topology);
  target.platform = it->second.platform;
  target.devices_per_slice = it->second.devices_per_slice;
  target.num_slices = num_slices;
  const std::string prefix(topology.substr(0, topology.find('-')));
  const auto chip = table.topology_chips.find(prefix);
  if (chip == table.topology_chips.end()) {
    Fail("compile_topology '{}': the chip table ({}) has no row for '{}'; add one to "
         "topology_chips",
         topology, table.source_name, prefix);
  }
  target.chip = table.chips.at(chip->second);
  target.hbm_bytes = target.chip.hbm_bytes;
  return target;
}

Target DevicesTarget(const HardwareTable& table, int64_t devices, double hbm_gib,
                     std::optional<std::string> chip) {
  if (devices < 1) Fail("--devices is {}, expected at least 1", devices);
  if (!(hbm_gib > 0) || !std::isfinite(hbm_gib) || hbm_gib > 1.0e6) {
    Fail("--hbm is {}, expected the GiB of memory per device (e.g. 80 for an H100)", hbm_gib);
  }
  Target target;
  target.platform = "gpu";
  target.devices_per_slice = devices;
  target.hbm_bytes = static_cast<int64_t>(hbm_gib * kGiB);
  if (chip) {
    const auto it = table.chips.find(*chip);
    if (it == table.chips.end()) Fail("--chip '{}' is not a row of {}", *chip, table.source_name);
    target.chip = it->second;
    target.platform = it->second.torus > 0 ? "tpu" : "gpu";
  }
  return target;
}

}  // namespace shardtrace
