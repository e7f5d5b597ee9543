#include "emit/fit_report.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "emit/html_report.h"
#include "emit/human_bytes.h"
#include "emit/memory_json.h"
#include "emit/svg_chart.h"
#include "emit/text_table.h"
#include "ir/collective_kind.h"
#include "numeric/array.h"

namespace shardtrace {
namespace {

std::string AxesText(const std::vector<std::string>& axes) {
  return axes.empty() ? "-" : fmt::format("{}", fmt::join(axes, " x "));
}

std::string Billions(int64_t count) {
  return fmt::format("{:.2f} B", static_cast<double>(count) / 1e9);
}

std::string BlocksText(const LayerStack& s) {
  std::vector<std::string> blocks;
  if (s.attention_blocks) blocks.push_back(fmt::format("{} attention", s.attention_blocks));
  if (s.linear_attention_blocks) {
    blocks.push_back(fmt::format("{} linear attention", s.linear_attention_blocks));
  }
  if (s.moe_blocks) blocks.push_back(fmt::format("{} MoE", s.moe_blocks));
  if (s.shared_blocks) blocks.push_back(fmt::format("{} shared experts", s.shared_blocks));
  if (s.mlp_blocks) blocks.push_back(fmt::format("{} MLP", s.mlp_blocks));
  return fmt::format("{}", fmt::join(blocks, ", "));
}

// A stack scanned inside another's blocks runs in that one's loop: "local_layers (in layers)".
std::string StackName(const LayerStack& s) {
  return s.loop.empty() || s.loop == s.name ? s.name : fmt::format("{} (in {})", s.name, s.loop);
}

// A row of the memory table: memory_analysis()'s fields, the components indented under them.
struct MemoryRow {
  std::string name;
  int64_t bytes = 0;
  std::string what;
  bool indent = false;
};

// A component live only in part at the peak: what it is, and why the rest is not there.
std::string AtPeak(int64_t at_peak, int64_t whole, const std::string& what,
                   const std::string& why) {
  if (at_peak == whole) return what;
  return fmt::format("at the peak, of {}: {} ({})", HumanBytes(whole), what, why);
}

constexpr char kFreedByDoneStacks[] = "the stacks whose backward is done have freed theirs";

std::vector<MemoryRow> MemoryRows(const FitResult& f) {
  const FitMemory& m = f.memory;
  std::vector<MemoryRow> rows = {
      {"argument_size_in_bytes", m.argument_size_in_bytes, "the step's inputs"},
      {"parameters", f.parameter_bytes,
       fmt::format("{} parameters, every layer (scanned stacks), embedding, head, norms{}",
                   Billions(f.parameter_count),
                   // Named from 0.1% of the parameters: gpt-oss's 3.3%, not a few norms' tiles.
                   f.parameter_tile_padding_bytes * 1000 >= f.parameter_bytes
                       ? fmt::format("; {} of it TPU's tile padding",
                                     HumanBytes(f.parameter_tile_padding_bytes))
                       : ""),
       true},
      {"optimizer state", f.optimizer_bytes, "mu and nu (sgd: none)", true},
      {"batch", f.batch_bytes, "inputs, positions, segmentations, targets (int32)", true},
      {"output_size_in_bytes", m.output_size_in_bytes, "the new state"},
      {"alias_size_in_bytes", m.alias_size_in_bytes, "the donated state the output reuses"},
      {"temp_size_in_bytes", m.temp_size_in_bytes,
       "the buffers live at the step's fullest moment; the compiler's heap adds its packing "
       "where HBM is to spare (docs/fit.md)"},
      {"gradients", f.peak_gradient_bytes,
       AtPeak(f.peak_gradient_bytes, f.gradient_bytes,
              f.gradient_layout_bytes * 1000 >= f.gradient_bytes
                  ? fmt::format("sharded like the parameters, {} of them the expert kernels' "
                                "padding in the layout megablox's tgmm writes",
                                HumanBytes(f.gradient_layout_bytes))
                  : "sharded like the parameters",
              f.peak_gradient_why),
       true},
      {"kept for the backward", f.peak_kept_bytes,
       AtPeak(f.peak_kept_bytes, f.kept_bytes, "every layer's residuals under " + f.policy.name,
              kFreedByDoneStacks),
       true}};
  if (f.cast_bytes > 0) {
    rows.push_back(
        {"weights cast", f.peak_cast_bytes,
         AtPeak(f.peak_cast_bytes, f.cast_bytes,
                "the scanned weights in the activation dtype, cast once before the layer loop",
                kFreedByDoneStacks),
         true});
  }
  if (f.gathered_bytes > 0) {
    rows.push_back({"weights gathered", f.gathered_bytes,
                    "a one-layer stack's weights in the activation dtype, gathered in the forward "
                    "and kept for the backward (its scan of one iteration is inlined)",
                    true});
  }
  rows.push_back({"peak temporaries", f.peak_temporary_bytes, f.peak_where, true});
  if (f.accumulator_bytes > 0) {
    rows.push_back({"gradient accumulator", f.accumulator_bytes,
                    "zeros like the parameters, live through the microbatches' scan", true});
  }
  rows.push_back(
      {"host_temp_size_in_bytes", m.host_temp_size_in_bytes, "residuals offloaded to pinned_host"});
  rows.push_back(
      {"peak_memory_in_bytes", m.peak_memory_in_bytes, "argument + output - alias + temp"});
  return rows;
}

// A variant's overrides as the user would type them, then what the row is ("(the largest batch
// that fits)").
std::string VariantOverride(const FitVariant& v) {
  const std::string typed = fmt::format("{}", fmt::join(v.overrides, " "));
  return v.note.empty() ? typed : fmt::format("{} ({})", typed, v.note);
}

std::string VariantVerdict(const FitVariant& v) {
  return v.refused.empty() ? FitVerdict(v.fits, v.headroom_bytes) : "refused: " + v.refused;
}

}  // namespace

std::string FitVerdict(bool fits, int64_t headroom_bytes) {
  return fits ? fmt::format("fits with {} to spare", HumanBytes(headroom_bytes))
              : fmt::format("does not fit by {}", HumanBytes(-headroom_bytes));
}

std::string FitCapacityText(const FitResult& f) {
  if (f.capacity_bytes == f.target.hbm_bytes) return "";
  return fmt::format(", held to the {} ({:.0f}%) its compiler schedules within",
                     HumanBytes(f.capacity_bytes), 100.0 * f.target.chip.scheduler_memory_limit);
}

std::string FitHeadline(const FitResult& f) {
  std::string out = fmt::format(
      "{} on {}: {}{}", f.model_name, f.target.ToString(), FitVerdict(f.fits, f.headroom_bytes),
      f.near_line ? fmt::format(" (near the line: on its fixtures fit's peak stays within "
                                "{:.1f}% of HBM under and {:.1f}% over the TPU compiler's; "
                                "compile to be sure)",
                                100 * kFitPeakUnderHbm, 100 * kFitPeakOverHbm)
                  : "");
  // The answer comes first, so what fit does not model here stands beside it, not only among
  // the assumptions at the end (published_n1: "fits" where the compiler runs out of HBM).
  for (const Unmodelled u : f.unmodelled) {
    out += fmt::format(" ({}: not modelled, compile to be sure)", ShortLabel(u));
  }
  return out;
}

std::string FitToText(const FitResult& f) {
  const FitMemory& m = f.memory;
  std::string out = FitHeadline(f) + "\n";
  out += fmt::format("  the whole training step per device: {} of {} HBM{} ({})\n",
                     HumanBytes(m.peak_memory_in_bytes), HumanBytes(f.target.hbm_bytes),
                     FitCapacityText(f), f.revision);
  out += fmt::format("  mesh {}", f.mesh.ToString());
  for (const auto& [key, value] : f.settings) out += fmt::format(", {} {}", key, value);
  out += "\n\nmemory per device\n";
  TextTable mem({"", "bytes", "what"});
  for (const MemoryRow& r : MemoryRows(f)) {
    mem.AddRow({std::string(r.indent ? "  " : "") + r.name, HumanBytes(r.bytes), r.what});
  }
  out += mem.Render("  ");

  out += "\nlayers (one layer of each scanned stack)\n";
  TextTable layers(
      {"stack", "layers", "blocks", "kept per layer", "offloaded per layer", "backward peak"});
  for (const LayerStack& s : f.stacks) {
    layers.AddRow({StackName(s), std::to_string(s.layers), BlocksText(s), HumanBytes(s.kept_bytes),
                   HumanBytes(s.offloaded_bytes), HumanBytes(s.backward_peak_bytes)});
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
      var.AddRow({VariantOverride(v), VariantVerdict(v),
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
  j["capacity_bytes"] = f.capacity_bytes;
  j["headroom_bytes"] = f.headroom_bytes;
  j["near_line"] = f.near_line;
  j["unmodelled"] = nlohmann::ordered_json::array();
  for (const Unmodelled u : f.unmodelled) j["unmodelled"].push_back(ToString(u));
  const FitMemory& m = f.memory;
  AddMemoryAnalysis(j, m);
  j["components"] = {{"parameters", f.parameter_bytes},
                     {"optimizer_state", f.optimizer_bytes},
                     {"batch", f.batch_bytes},
                     {"gradients", f.peak_gradient_bytes},
                     {"kept_for_backward", f.peak_kept_bytes},
                     {"weights_cast", f.peak_cast_bytes},
                     {"weights_gathered", f.gathered_bytes},
                     {"logits_kept", f.logits_kept_bytes},
                     {"offloaded", f.offloaded_bytes},
                     {"peak_temporaries", f.peak_temporary_bytes},
                     {"gradient_accumulator", f.accumulator_bytes}};
  j["peak_where"] = f.peak_where;
  j["parameter_count"] = f.parameter_count;
  j["parameter_tile_padding_bytes"] = f.parameter_tile_padding_bytes;
  j["gradient_layout_bytes"] = f.gradient_layout_bytes;
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
    nlohmann::ordered_json gathered = nlohmann::ordered_json::array();
    for (const MemoryItem& g : s.gathered) gathered.push_back({{"path", g.name}, {"bytes", g.bytes}});
    j["stacks"].push_back({{"name", s.name},
                           {"layers", s.layers},
                           {"loop", s.loop},
                           {"blocks", BlocksText(s)},
                           {"kept_per_layer", kept},
                           {"kept_bytes_per_layer", s.kept_bytes},
                           {"offloaded_bytes_per_layer", s.offloaded_bytes},
                           {"backward_peak_bytes", s.backward_peak_bytes},
                           {"inlined", s.inlined},
                           {"gathered", gathered}});
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
    if (!v.note.empty()) row["note"] = v.note;
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

namespace {

HtmlTable NewTable(std::string id, std::string caption, std::vector<std::string> headers) {
  HtmlTable table;
  table.id = std::move(id);
  table.caption = std::move(caption);
  table.headers = std::move(headers);
  return table;
}

HtmlTable::Cell Bytes(int64_t bytes) { return {HumanBytes(bytes), static_cast<double>(bytes)}; }
HtmlTable::Cell Text(std::string text) { return {std::move(text), std::nullopt}; }
HtmlTable::Cell Count(int64_t n) { return {std::to_string(n), static_cast<double>(n)}; }

// The step per device by component, stacked, against the device's HBM.
std::string FitMemoryChart(const FitResult& f) {
  const auto d = [](int64_t bytes) { return static_cast<double>(bytes); };
  StackedBarChart chart;
  chart.id = "memory-chart";
  chart.title = "The training step per device, by component, against the device's HBM";
  chart.format = [](double v) { return HumanBytes(static_cast<int64_t>(v)); };
  ChartBar bar{"training step",
               {{"parameters", d(f.parameter_bytes)},
                {"optimizer state", d(f.optimizer_bytes)},
                {"batch", d(f.batch_bytes)},
                {"gradients", d(f.peak_gradient_bytes)},
                {"kept for the backward", d(f.peak_kept_bytes)}}};
  if (f.cast_bytes > 0) bar.segments.push_back({"weights cast", d(f.peak_cast_bytes)});
  if (f.gathered_bytes > 0) bar.segments.push_back({"weights gathered", d(f.gathered_bytes)});
  bar.segments.push_back({"peak temporaries", d(f.peak_temporary_bytes)});
  if (f.accumulator_bytes > 0) {
    bar.segments.push_back({"gradient accumulator", d(f.accumulator_bytes)});
  }
  const int64_t drawn = f.parameter_bytes + f.optimizer_bytes + f.batch_bytes +
                        f.peak_gradient_bytes + f.peak_kept_bytes + f.peak_cast_bytes +
                        f.gathered_bytes + f.peak_temporary_bytes + f.accumulator_bytes;
  // What peak_memory_in_bytes holds beyond the named components (output - alias).
  if (f.memory.peak_memory_in_bytes > drawn) {
    bar.segments.push_back({"other", d(f.memory.peak_memory_in_bytes - drawn)});
  }
  chart.bars.push_back(std::move(bar));
  chart.lines.push_back(
      {fmt::format("{} HBM {}", f.target.chip.name, HumanBytes(f.target.hbm_bytes)),
       d(f.target.hbm_bytes)});
  if (f.capacity_bytes != f.target.hbm_bytes) {
    chart.lines.push_back(
        {fmt::format("{:.0f}% scheduling limit {}", 100.0 * f.target.chip.scheduler_memory_limit,
                     HumanBytes(f.capacity_bytes)),
         d(f.capacity_bytes)});
  }
  return "<figure class=\"chart-box\">\n" + StackedBarsSvg(chart) + "</figure>\n";
}

std::string TableSection(const HtmlTable& table, const std::string& intro = "") {
  return (intro.empty() ? "" : "<p>" + HtmlEscape(intro) + "</p>\n") + HtmlTableMarkup(table);
}

}  // namespace

std::string FitToHtml(const FitResult& f, const std::string& command) {
  const FitMemory& m = f.memory;
  HtmlReport report;
  report.command_name = "fit";
  report.title = fmt::format("fit: {} on {}", f.model_name,
                             f.target.topology.empty() ? f.target.chip.name : f.target.topology);
  report.generator = fmt::format("shardtrace {}; {}", SHARDTRACE_VERSION, f.revision);
  report.command = command;
  std::vector<std::string> settings = {"<code>" + HtmlEscape(f.mesh.ToString()) + "</code>"};
  for (const auto& [key, value] : f.settings) {
    settings.push_back(fmt::format("{} <code>{}</code>", HtmlEscape(key), HtmlEscape(value)));
  }
  report.summary = fmt::format(
      "<p class=\"verdict {}\">{}</p>\n<p>The whole training step per device: {} of {} HBM "
      "({:.0f}%){}, {}.</p>\n<p class=\"note\">{}</p>\n",
      f.fits ? "fits" : "does-not-fit", HtmlEscape(FitHeadline(f)),
      HtmlEscape(HumanBytes(m.peak_memory_in_bytes)), HtmlEscape(HumanBytes(f.target.hbm_bytes)),
      f.target.hbm_bytes > 0 ? 100.0 * static_cast<double>(m.peak_memory_in_bytes) /
                                   static_cast<double>(f.target.hbm_bytes)
                             : 0.0,
      HtmlEscape(FitCapacityText(f)), HtmlEscape(f.revision), fmt::join(settings, ", "));
  report.summary += FitMemoryChart(f);

  // memory_analysis()'s fields with the components indented under them, in this order.
  std::string mem =
      "<table id=\"memory-table\">\n<thead><tr><th>field</th><th>bytes</th><th>what</th></tr>"
      "</thead>\n<tbody>\n";
  for (const MemoryRow& r : MemoryRows(f)) {
    mem += fmt::format("<tr><td{}>{}</td><td class=\"num\">{}</td><td>{}</td></tr>\n",
                       r.indent ? " class=\"component\"" : "",
                       r.indent ? HtmlEscape(r.name) : "<code>" + HtmlEscape(r.name) + "</code>",
                       HtmlEscape(HumanBytes(r.bytes)), HtmlEscape(r.what));
  }
  mem += "</tbody>\n</table>\n";
  report.sections.push_back(
      {"memory", "Memory per device: memory_analysis()'s fields", mem, false});

  HtmlTable layers = NewTable(
      "layers-table", "stacks",
      {"stack", "layers", "blocks", "kept per layer", "offloaded per layer", "backward peak"});
  for (const LayerStack& s : f.stacks) {
    layers.rows.push_back({Text(StackName(s)), Count(s.layers), Text(BlocksText(s)),
                           Bytes(s.kept_bytes), Bytes(s.offloaded_bytes),
                           Bytes(s.backward_peak_bytes)});
  }
  report.sections.push_back(
      {"layers", "Layers (one layer of each scanned stack)", HtmlStaticTableMarkup(layers), false});

  HtmlTable largest = NewTable("largest-table", "buffers", {"buffer", "bytes", "what"});
  for (const MemoryItem& i : f.largest) {
    largest.rows.push_back({Text(i.name), Bytes(i.bytes), Text(i.detail)});
  }
  report.sections.push_back(
      {"largest", "Five largest buffers", HtmlStaticTableMarkup(largest), false});

  HtmlTable coll =
      NewTable("collectives-table", "collectives",
               {"collective", "mesh axes", "count", "bytes per device", "network", "from"});
  for (const StepCollectiveTotal& c : f.collectives) {
    coll.rows.push_back({Text(ToString(c.kind)), Text(AxesText(c.axes)), Count(c.count),
                         Bytes(c.bytes_per_device), Text(c.dcn ? "DCN" : "ICI"), Text(c.from)});
  }
  report.sections.push_back({"collectives",
                             fmt::format("Collectives per step: {} per device",
                                         HumanBytes(f.collective_bytes_per_device)),
                             coll.rows.empty()
                                 ? "<p>None: every weight and activation stays on its device.</p>\n"
                                 : TableSection(coll,
                                                "Click a column header to sort by it (again to "
                                                "reverse); type in the box to filter."),
                             false});

  HtmlTable params = NewTable("params-table", "parameters",
                              {"path", "shape", "dtype", "spec", "bytes per device"});
  for (const ParamBuffer& p : f.params) {
    params.rows.push_back({Text(p.path), Text(ShapeToString(p.shape)), Text(ToString(p.dtype)),
                           Text(p.spec.ToString()), Bytes(p.bytes_per_device)});
  }
  report.sections.push_back(
      {"params",
       fmt::format("Parameters ({}): shape, sharding and bytes per device", f.params.size()),
       TableSection(params,
                    "Click a column header to sort by it (again to reverse); type in the "
                    "box to keep the rows that contain every word."),
       false});

  if (!f.variants.empty()) {
    HtmlTable var = NewTable("variants-table", "variants", {"override", "verdict", "peak"});
    for (const FitVariant& v : f.variants) {
      var.rows.push_back({Text(VariantOverride(v)), Text(VariantVerdict(v)),
                          v.refused.empty() ? Bytes(v.peak_bytes) : Text("-")});
    }
    report.sections.push_back(
        {"variants", "Variants (each a whole fit of its own)", HtmlStaticTableMarkup(var), false});
  }
  std::string assumed = fmt::format("remat_policy={}: {}\n", f.policy.name, f.policy.summary);
  for (const std::string& n : f.notes) assumed += n + "\n";
  report.sections.push_back({"assumed", "Assumed", HtmlPre(assumed), false});
  return RenderHtmlReport(report);
}

void AddMemoryAnalysis(nlohmann::ordered_json& j, const FitMemory& m) {
  j["argument_size_in_bytes"] = m.argument_size_in_bytes;
  j["output_size_in_bytes"] = m.output_size_in_bytes;
  j["alias_size_in_bytes"] = m.alias_size_in_bytes;
  j["temp_size_in_bytes"] = m.temp_size_in_bytes;
  j["host_temp_size_in_bytes"] = m.host_temp_size_in_bytes;
  j["peak_memory_in_bytes"] = m.peak_memory_in_bytes;
}

}  // namespace shardtrace
