#include "pages/knob_variants.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <optional>
#include <utility>

#include "paths/moe_block.h"
#include "run/run.h"
#include "spmd/trace_totals.h"
#include "util/error.h"

namespace shardtrace {
namespace {

using Knob = std::pair<std::string, std::vector<std::string>>;  // label, overrides

Knob Set(const std::string& key, const std::string& value) {
  const std::string kv = key + "=" + value;
  return {"`" + kv + "`", {kv}};
}

// The ICI sizes of the mesh axes a parallelism knob trades: the device count stays, so a
// parallelism that grows takes its factor from fsdp (or expert, for tensor parallelism) and
// one that shrinks gives it back to fsdp. A trade the mesh cannot make is no knob here.
struct IciSizes {
  int64_t fsdp = 1, expert = 1, tensor = 1;
};

IciSizes Ici(const Config& config, const Mesh& mesh) {
  const auto ici = [&](const char* axis) {
    const int64_t dcn = config.Int(fmt::format("dcn_{}_parallelism", axis));
    return mesh.Size(axis) / std::max<int64_t>(dcn, 1);
  };
  return {ici("fsdp"), ici("expert"), ici("tensor")};
}

// `key=to`, with `from_key` traded so the mesh keeps its size; nullopt when it cannot.
std::optional<Knob> Trade(const std::string& key, int64_t now, int64_t to,
                          const std::string& from_key, int64_t from_now) {
  std::vector<std::string> overrides = {fmt::format("{}={}", key, to)};
  if (to > now) {
    if (from_now % (to / now) != 0) return std::nullopt;
    overrides.push_back(fmt::format("{}={}", from_key, from_now / (to / now)));
  } else {
    overrides.push_back(fmt::format("{}={}", from_key, from_now * (now / to)));
  }
  return Knob{fmt::format("`{}`", fmt::join(overrides, "` `")), overrides};
}

// The keys that move memory or communication on this path, each turned one way: a
// parallelism halved or doubled (traded with fsdp), a switch flipped, the batch doubled.
std::vector<Knob> Knobs(const MoeSetup& s, const IciSizes& ici, const Trace& traced,
                        const VariantBase& base) {
  std::vector<Knob> knobs;
  const auto add = [&](std::optional<Knob> k) {
    if (k) knobs.push_back(std::move(*k));
  };
  const bool moe = base.block == "moe";
  const bool sparse = moe && s.path == MoePath::kSparse && !base.masked_loop;
  const bool ragged = traced.path.find("ragged_all_to_all") != std::string::npos;
  if (ragged)
    knobs.push_back(Set("ragged_buffer_factor", s.settings.ragged_buffer_factor > 0 ? "-1" : "1"));
  if (moe && !base.masked_loop)
    knobs.push_back(Set("capacity_factor", s.capacity_factor > 0 ? "-1" : "1"));
  const std::string fsdp = "ici_fsdp_parallelism", ep = "ici_expert_parallelism",
                    tp = "ici_tensor_parallelism";
  if (moe) {
    if (ici.expert % 2 == 0) add(Trade(ep, ici.expert, ici.expert / 2, fsdp, ici.fsdp));
    add(Trade(ep, ici.expert, ici.expert * 2, fsdp, ici.fsdp));
  }
  if (ici.tensor > 1)
    add(Trade(tp, ici.tensor, 1, fsdp, ici.fsdp));
  else if (ici.fsdp % 2 == 0)
    add(Trade(tp, 1, 2, fsdp, ici.fsdp));
  else if (moe)
    add(Trade(tp, 1, 2, ep, ici.expert));
  if (sparse && s.ep > 1)
    knobs.push_back(Set("use_ring_of_experts", s.ring_of_experts ? "false" : "true"));
  if (moe)
    knobs.push_back(Set("shard_exp_on_fsdp", s.settings.shard_exp_on_fsdp ? "false" : "true"));
  knobs.push_back(
      Set("per_device_batch_size", fmt::format("{:g}", 2 * s.settings.per_device_batch_size)));
  if (moe && !base.masked_loop)
    knobs.push_back(Set("sparse_matmul", s.settings.sparse_matmul ? "false" : "true"));
  return knobs;
}

KnobRun Trace1(const VariantBase& base, std::string change, const std::vector<std::string>& more) {
  KnobRun out;
  out.change = std::move(change);
  // A key the model file sets may be overridden here: the row is about that key.
  std::vector<std::string> overrides = more;
  if (!more.empty()) overrides.insert(overrides.begin(), "override_model_config=true");
  try {
    const RunResult run = Run(WithOverrides(VariantRequest(base), overrides));
    const TraceTotals& totals = run.totals;
    out.mesh = run.trace.mesh;
    out.path = run.trace.path;
    out.peak_bytes = run.spmd.memory.peak_bytes();
    out.written_bytes = totals.collective_bytes_sent_per_device;
    out.implied_bytes = totals.implied_bytes_sent_per_device;
  } catch (const Error& e) {
    out.not_traced = e.what();
  }
  return out;
}

}  // namespace

std::vector<KnobRun> TraceKnobs(const VariantBase& base, const Trace& traced) {
  const RunSetup in = Prepare(VariantRequest(base));
  const MoeSetup& setup = in.setup;
  std::vector<KnobRun> out = {Trace1(base, "as given", {})};
  for (const auto& [label, overrides] : Knobs(setup, Ici(in.config, in.mesh), traced, base))
    out.push_back(Trace1(base, label, overrides));
  return out;
}

}  // namespace shardtrace
