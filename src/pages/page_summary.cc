#include "pages/page_summary.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>

#include "emit/ascii_flow.h"
#include "emit/fit_report.h"
#include "emit/human_bytes.h"
#include "numeric/array.h"
#include "util/error.h"

namespace shardtrace {
namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
constexpr size_t kMaxCollectiveRows = 6;

// "+1.5 KiB", "-2.0 KiB", "0 B".
std::string SignedBytes(int64_t delta) {
  if (delta == 0) return "0 B";
  return fmt::format("{}{}", delta > 0 ? "+" : "-", HumanBytes(std::llabs(delta)));
}

// "+12%" against `base`; empty when base is 0.
std::string Percent(int64_t delta, int64_t base) {
  if (base == 0 || delta == 0) return "";
  const double pct = 100.0 * static_cast<double>(delta) / static_cast<double>(base);
  if (std::abs(pct) < 0.05) return fmt::format(" ({}<0.1%)", pct > 0 ? "+" : "-");
  return std::abs(pct) < 1 ? fmt::format(" ({:+.1f}%)", pct) : fmt::format(" ({:+.0f}%)", pct);
}

std::string Plural(int n, const char* word) {
  return fmt::format("{} {}{}", n, word, n == 1 ? "" : "s");
}

// The source whose code writes the block's collectives: moe.py, or linears.py for MlpBlock.
std::string CodeOf(const Trace& trace) { return trace.block == "moe" ? "moe.py" : "linears.py"; }

std::string PathLine(const Trace& trace) {
  std::vector<std::string> reasons;
  for (const std::string& note : trace.notes)
    if (note.rfind("path: ", 0) == 0) reasons.push_back(note.substr(6));
  std::string why;
  if (!reasons.empty())
    why = fmt::format(", because {}", fmt::join(reasons, "; "));
  else if (trace.reference_path)
    why = ", selected by `--path masked_loop` (shardtrace's reference, no moe.py branch)";
  else
    why = ", called directly by the decoder layer (no path selection)";
  return fmt::format("**Path** `{}` on `{}` ({} devices){}.", trace.path, trace.mesh,
                     trace.num_devices, why);
}

std::string BudgetTable(const Trace& trace, const SpmdResult& spmd, const TraceTotals& totals,
                        const StepResult* step) {
  const MemoryEstimate& m = spmd.memory;
  std::string by_dtype;
  for (const auto& [dtype, bytes] : m.parameter_bytes_by_dtype)
    by_dtype +=
        fmt::format("{}{} {}", by_dtype.empty() ? "" : ", ", ToString(dtype), HumanBytes(bytes));
  std::string largest = "nothing live";
  if (!m.at_peak.empty()) {
    const TensorRecord& t = trace.tensors[m.at_peak.front().tensor];
    largest = fmt::format("largest buffer: `{}` {}{} {}", t.name, ShortDtype(t.dtype),
                          ShapeToString(spmd.tensor(t.id).local_shape),
                          HumanBytes(m.at_peak.front().bytes));
  }
  int written = 0, implied = 0;
  for (const CollectiveTotal& c : totals.collectives) (c.written ? written : implied) += c.count;
  std::string out =
      step ? "| per device, forward pass (then the training step) | bytes | |\n|---|---|---|\n"
           : "| per device, forward pass | bytes | |\n|---|---|---|\n";
  out += fmt::format("| parameters | {} | {} |\n", HumanBytes(m.parameter_bytes), by_dtype);
  out += fmt::format("| block input | {} | |\n", HumanBytes(m.input_bytes));
  out +=
      fmt::format("| peak temporaries | {} | {} |\n", HumanBytes(m.peak_temporary_bytes), largest);
  out += fmt::format("| **peak** | **{}** | parameters + input + peak temporaries |\n",
                     HumanBytes(m.peak_bytes()));
  out += fmt::format("| communication per layer, written in {} | {} | {} |\n", CodeOf(trace),
                     HumanBytes(totals.collective_bytes_sent_per_device),
                     Plural(written, "collective"));
  // What is modelled says so: XLA never compiled this config (docs/xla-model.md says where
  // the model was checked against XLA's HLO); 16-bit floats count as TPU moves them.
  std::string modelled = "modelled, not compiled for this config";
  if (totals.implied_bytes_sent_per_device_on_xla_cpu != totals.implied_bytes_sent_per_device)
    modelled += fmt::format("; XLA:CPU widens 16-bit floats: {}",
                            HumanBytes(totals.implied_bytes_sent_per_device_on_xla_cpu));
  out += fmt::format("| communication per layer, inserted by XLA | {} | {}{} |\n",
                     HumanBytes(totals.implied_bytes_sent_per_device),
                     Plural(implied, "collective"), implied > 0 ? " (" + modelled + ")" : "");
  if (!step) return out;
  // The step's rows (spmd/step_model.h; docs/step.md): what the forward keeps under the
  // config's remat policy, the gradients, and the backward's collectives.
  const StepMemory& sm = step->memory;
  out += fmt::format(
      "| **training step peak** | **{}** | `remat_policy={}`: + gradients {}, step temporaries "
      "{}; sends {} (backward {}, of which remat {}) |\n",
      HumanBytes(sm.peak_bytes()), step->policy.name, HumanBytes(sm.gradient_bytes),
      HumanBytes(sm.peak_temporary_bytes()), HumanBytes(step->step_bytes_per_device()),
      HumanBytes(step->backward_bytes_per_device), HumanBytes(step->recompute_bytes_per_device));
  return out;
}

// `what` names the peak: "Peak" (forward) or "Training-step peak".
std::string FitLine(const std::string& what, int64_t peak,
                    const std::vector<Accelerator>& accelerators) {
  std::vector<std::string> items;
  for (const Accelerator& a : accelerators) {
    const double share = static_cast<double>(peak) / (a.gib * kGiB);
    const std::string pct = share < 0.001 ? "<0.1%" : fmt::format("{:.1f}%", 100 * share);
    items.push_back(fmt::format("{} {:g} GiB: one layer {} {}", a.name, a.gib,
                                share <= 1 ? "fits," : "**does not fit**,", pct));
  }
  return fmt::format("{} of one layer against HBM per device (not the whole model: `shardtrace "
                     "fit` with compile_topology= answers for the whole step): {}.",
                     what, fmt::join(items, " · "));
}

std::string CollectiveTable(const Trace& trace, const TraceTotals& totals) {
  if (totals.collectives.empty()) return "No collectives: every device computes its part alone.\n";
  std::string out =
      "| collective per layer | origin | mesh axes | count | sent / device "
      "|\n|---|---|---|---|---|\n";
  // The summary stays within 40 lines: past kMaxCollectiveRows kinds, the largest are shown
  // and the rest named by count (the formal specification lists every collective).
  std::vector<const CollectiveTotal*> shown;
  for (const CollectiveTotal& c : totals.collectives) shown.push_back(&c);
  if (shown.size() > kMaxCollectiveRows) {
    std::stable_sort(shown.begin(), shown.end(), [](const auto* a, const auto* b) {
      return a->bytes_sent_per_device > b->bytes_sent_per_device;
    });
    shown.resize(kMaxCollectiveRows - 1);
  }
  for (const CollectiveTotal& c : totals.collectives)
    if (std::find(shown.begin(), shown.end(), &c) != shown.end())
      out += fmt::format("| {} | {} | {} | {} | {} |\n",
                         c.written ? ToString(c.kind) : HloName(c.kind),
                         c.written ? CodeOf(trace) : "XLA", fmt::join(c.axes, ", "), c.count,
                         HumanBytes(c.bytes_sent_per_device));
  if (shown.size() < totals.collectives.size())
    out +=
        fmt::format("| {} smaller kinds: see Collectives in the formal specification | | | | |\n",
                    totals.collectives.size() - shown.size());
  return out;
}

// "sparse_matmul/ragged_all_to_all" of "sparse_matmul/ragged_all_to_all (EP=4, ...)": the
// sizes in parentheses are the knob's own values, which the row's change names.
std::string PathKind(const std::string& path) { return path.substr(0, path.find(" (")); }

std::string KnobTable(const Trace& trace, const std::vector<KnobRun>& knobs) {
  if (knobs.empty() || !knobs.front().not_traced.empty()) return "";
  const KnobRun& base = knobs.front();
  const int64_t base_comm = base.written_bytes + base.implied_bytes;
  std::string out = fmt::format(
                        "Knobs that change this: each row traces this config with the change "
                        "(symbolic{}, the same devices), Δ against the first row.\n\n",
                        trace.block == "moe" ? ", balanced routing" : "") +
                    "| change | path | peak / device | Δ peak | sent / device | Δ sent |\n"
                    "|---|---|---|---|---|---|\n";
  std::vector<std::string> untraced;
  for (const KnobRun& k : knobs) {
    if (!k.not_traced.empty()) {
      untraced.push_back(fmt::format("{} ({})", k.change, k.not_traced));
      continue;
    }
    const bool first = &k == &base;
    const int64_t comm = k.written_bytes + k.implied_bytes;
    const int64_t dpeak = k.peak_bytes - base.peak_bytes, dcomm = comm - base_comm;
    out += fmt::format(
        "| {} | {} | {} | {} | {} | {} |\n", k.change,
        first || PathKind(k.path) != PathKind(base.path) ? fmt::format("`{}`", PathKind(k.path))
                                                         : "same",
        HumanBytes(k.peak_bytes), first ? "" : SignedBytes(dpeak) + Percent(dpeak, base.peak_bytes),
        HumanBytes(comm), first ? "" : SignedBytes(dcomm) + Percent(dcomm, base_comm));
  }
  if (!untraced.empty()) out += fmt::format("\nNot traced: {}.\n", fmt::join(untraced, "; "));
  return out;
}

}  // namespace

std::vector<Accelerator> DefaultAccelerators() {
  return {{"TPU v5e", 16}, {"TPU v6e", 32}, {"TPU v5p", 95}, {"H100", 80}, {"H200", 141}};
}

Accelerator ParseAccelerator(const std::string& text) {
  const size_t eq = text.find('=');
  if (eq != std::string::npos && eq > 0) {
    const std::string number = text.substr(eq + 1);
    char* end = nullptr;
    const double gib = std::strtod(number.c_str(), &end);
    if (!number.empty() && end == number.c_str() + number.size() && gib > 0)
      return {text.substr(0, eq), gib};
  }
  Fail(
      "--hbm '{}': expected NAME=GIB, an accelerator name and its HBM per device in GiB "
      "(e.g. MI300X=192)",
      text);
}

std::string SummaryMarkdown(const SummaryInput& in) {
  const Trace& trace = *in.trace;
  std::string out = "## Summary\n\n" + PathLine(trace) + "\n\n";
  for (const std::string& w : trace.warnings) out += "> **Warning:** " + w + "\n\n";
  if (in.spmd) {
    out += BudgetTable(trace, *in.spmd, in.totals, in.step) + "\n";
    if (in.fit) {
      const FitResult& f = *in.fit;
      out += fmt::format(
          "The whole training step on {} (`shardtrace fit`, {}): {} {}: peak {} of {} HBM per "
          "device{}.{}",
          f.target.ToString(), f.revision, f.model_name,
          f.fits ? fmt::format("fits with {} to spare", HumanBytes(f.headroom_bytes))
                 : fmt::format("**does not fit**, short by {}", HumanBytes(-f.headroom_bytes)),
          HumanBytes(f.memory.peak_memory_in_bytes), HumanBytes(f.target.hbm_bytes),
          FitCapacityText(f),
          f.near_line ? " Near the line: within fit's measured error of the TPU compiler's "
                        "peak, only a compile can tell."
                      : "");
      for (const Unmodelled u : f.unmodelled) {
        const std::string_view why = Explanation(u);
        out += fmt::format(" {}{}.", static_cast<char>(std::toupper(why.front())), why.substr(1));
      }
    } else {
      out += in.step ? FitLine("Training-step peak", in.step->memory.peak_bytes(), in.accelerators)
                     : FitLine("Peak", in.spmd->memory.peak_bytes(), in.accelerators);
    }
  }
  const std::string scope =
      in.step ? fmt::format(
                    "one layer: the **forward pass**, and in the last row the **training "
                    "step** (forward + backward, `remat_policy={}`; `trace --step` lists it, "
                    "docs/step.md)",
                    in.step->policy.name)
              : "one layer's **forward pass** (an inference config has no backward pass)";
  out += fmt::format("{}Every figure is per device for {}, from this run's totals{}.\n\n",
                     in.spmd ? " " : "", scope, in.legend.empty() ? "" : "; " + in.legend);
  out += CollectiveTable(trace, in.totals);
  const std::string knobs = KnobTable(trace, in.knobs);
  if (!knobs.empty()) out += "\n" + knobs;
  return out;
}

}  // namespace shardtrace
