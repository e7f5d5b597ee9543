#include "emit/xla_spmd_text.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "emit/human_bytes.h"

namespace shardtrace {

std::string ImpliedLabel(const ImpliedCollective& c) { return HloName(c.kind) + " \u21c4 xla"; }

std::string ImpliedDetail(const Trace& trace, const ImpliedCollective& c) {
  const TensorRecord& t = trace.tensors[c.tensor];
  return fmt::format("{} {} -> {} [{}]", t.name, c.from.ToString(), c.to.ToString(), c.reason);
}

std::string ImpliedFlowText(const Trace& trace, const ImpliedCollective& c) {
  return fmt::format("\u21c4 xla {} over {}: {} {} -> {}, {} per device", HloName(c.kind),
                     fmt::join(c.axes, ","), trace.tensors[c.tensor].name, c.from.ToString(),
                     c.to.ToString(), HumanBytes(c.bytes_per_device));
}

namespace {

// The last two components of a scope ("wrapper/gmm_wo"): enough to find it in the tables.
std::string ShortScope(const std::string& scope) {
  if (scope.empty()) return "(top)";
  size_t cut = scope.rfind('/');
  if (cut != std::string::npos && cut > 0) cut = scope.rfind('/', cut - 1);
  return cut == std::string::npos ? scope : ".../" + scope.substr(cut + 1);
}

}  // namespace

std::vector<std::string> MemoryLines(const Trace& trace, const SpmdResult& spmd) {
  const MemoryEstimate& m = spmd.memory;
  std::vector<std::string> lines;
  std::string by_dtype;
  for (const auto& [dtype, bytes] : m.parameter_bytes_by_dtype)
    by_dtype +=
        fmt::format("{}{} {}", by_dtype.empty() ? "" : ", ", ToString(dtype), HumanBytes(bytes));
  lines.push_back(fmt::format("parameters        {}{}", HumanBytes(m.parameter_bytes),
                              by_dtype.empty() ? "" : " (" + by_dtype + ")"));
  lines.push_back(fmt::format("inputs            {}", HumanBytes(m.input_bytes)));
  std::string where;
  if (m.peak_op >= 0) {
    const OpRecord& op = trace.ops[m.peak_op];
    where = fmt::format(" during op {} {} in {}", op.id, op.Name(), ShortScope(op.scope));
  }
  lines.push_back(fmt::format("peak temporaries  {}{}", HumanBytes(m.peak_temporary_bytes), where));
  const size_t shown = std::min<size_t>(m.at_peak.size(), 6);
  for (size_t i = 0; i < shown; ++i) {
    const TensorRecord& t = trace.tensors[m.at_peak[i].tensor];
    const TensorSpmd& s = spmd.tensor(t.id);
    lines.push_back(fmt::format("  {:>10}  {} {}{} {} in {}", HumanBytes(m.at_peak[i].bytes),
                                t.name, ToString(t.dtype), ShapeToString(s.local_shape),
                                ToString(s.placement), ShortScope(t.scope)));
  }
  if (m.at_peak.size() > shown) {
    int64_t rest = 0;
    for (size_t i = shown; i < m.at_peak.size(); ++i) rest += m.at_peak[i].bytes;
    lines.push_back(
        fmt::format("  {:>10}  {} smaller buffers", HumanBytes(rest), m.at_peak.size() - shown));
  }
  if (m.gathered_weight_bytes > 0)
    lines.push_back(fmt::format("  of which weight copies (casts, gathers) {}",
                                HumanBytes(m.gathered_weight_bytes)));
  if (m.unresolved_bytes > 0)
    lines.push_back(fmt::format("  of which {} counted replicated (no sharding reached them)",
                                HumanBytes(m.unresolved_bytes)));
  lines.push_back(fmt::format("peak per device   {} = parameters + inputs + peak temporaries",
                              HumanBytes(m.peak_bytes())));
  return lines;
}

}  // namespace shardtrace
