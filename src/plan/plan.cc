#include "plan/plan.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <map>
#include <optional>
#include <set>

#include "config/config.h"
#include "config/remat_policy.h"
#include "config/run_inputs.h"
#include "model/batch_search.h"
#include "model/block_cache.h"
#include "model/fit_variants.h"
#include "util/checked.h"
#include "util/error.h"
#include "util/progress.h"
#include "util/thread_pool.h"

namespace shardtrace {
namespace {

// The ICI axes plan varies by default, and the remat policies.
constexpr const char* kDefaultAxes[] = {"data", "fsdp", "tensor", "expert"};
// The axes plan splits the slices over (of those it searches).
constexpr const char* kDcnAxes[] = {"data", "fsdp", "expert"};
// Every policy MaxText's get_remat_policy offers without quantization (the release's
// layers/nnx_decoders.py; config/remat_policy.h models each), cheapest in memory first.
constexpr const char* kDefaultRemat[] = {"full",
                                         "save_out_proj",
                                         "save_qkv_proj",
                                         "qkv_proj_offloaded",
                                         "save_dot_except_mlp",
                                         "save_dot_with_context_except_mlp",
                                         "save_dot_except_mlpwi",
                                         "minimal",
                                         "minimal_with_context",
                                         "minimal_offloaded"};
// And the offloading policy MaxText's published MoE recipes run (testdata/published_runs.json):
// custom, with each layer's input moved to the host.
constexpr const char* kOffloadRemat[] = {"remat_policy=custom", "decoder_layer_input=offload"};

std::string IciKey(const std::string& axis) {
  return axis == "stage" ? "ici_pipeline_parallelism" : "ici_" + axis + "_parallelism";
}

// Every way to write `n` as an ordered product of `k` factors.
void Factorizations(int64_t n, size_t k, std::vector<int64_t>& current,
                    std::vector<std::vector<int64_t>>& out) {
  if (current.size() + 1 == k) {
    current.push_back(n);
    out.push_back(current);
    current.pop_back();
    return;
  }
  for (int64_t d = 1; d <= n; ++d) {
    if (n % d) continue;
    current.push_back(d);
    Factorizations(n / d, k, current, out);
    current.pop_back();
  }
}

bool UserSets(const std::vector<std::string>& overrides, const std::string& key) {
  for (const std::string& o : overrides) {
    if (o.rfind(key + "=", 0) == 0) return true;
  }
  return false;
}

// Pareto front: a fitting config no other beats on both headroom and step time.
void MarkPareto(std::vector<PlannedConfig>& configs) {
  for (PlannedConfig& a : configs) {
    a.pareto = std::none_of(configs.begin(), configs.end(), [&](const PlannedConfig& b) {
      return (b.headroom_bytes >= a.headroom_bytes && b.time.step_seconds < a.time.step_seconds) ||
             (b.headroom_bytes > a.headroom_bytes && b.time.step_seconds <= a.time.step_seconds);
    });
  }
}

}  // namespace

PlanResult Plan(const PlanRequest& request) {
  const auto start = std::chrono::steady_clock::now();
  PlanResult result;
  result.user_args = request.args;
  if (request.top < 1 || request.top > 1000) Fail("--top is {}, expected 1 to 1000", request.top);
  if (request.max_configs < 1 || request.max_configs > 1000000) {
    Fail("--max-configs is {}, expected 1 to 1000000", request.max_configs);
  }
  const ConfigSource source = SplitArgs(request.args);
  const Config user = Config::Load(source, RevisionArg(request.args));
  result.warnings = user.warnings();

  // The target, as fit resolves it (one fit of the user's own config would do the same work;
  // this reads only the topology).
  FitRequest probe;
  probe.args = request.args;
  probe.hardware = request.hardware;
  // Every config loads the same base.yml and model file: parsed once for the whole search.
  ParsedYamlCache yaml_cache;
  probe.yaml_cache = &yaml_cache;
  probe.tables = std::make_shared<const FitTables>(LoadFitTables(request.hardware));
  const HardwareTable& table = probe.tables->hardware;
  if (!user.Has("compile_topology") || user.Str("compile_topology").empty()) {
    Fail("plan needs compile_topology=NAME (e.g. compile_topology=v5p-256)");
  }
  const int64_t slices = user.Has("compile_topology_num_slices") &&
                                 user.Int("compile_topology_num_slices") > 0
                             ? user.Int("compile_topology_num_slices")
                             : 1;
  result.target = ResolveTopology(table, user.Str("compile_topology"), slices);
  const int64_t per_slice = result.target.devices_per_slice;

  // The axes to vary: the defaults the mesh has and the user does not fix; --vary of an ICI
  // key takes that axis out of the factorization.
  std::map<std::string, std::vector<std::string>> vary;
  for (const auto& [key, values] : request.vary) {
    if (key.empty() || values.empty()) Fail("--vary {}: expected KEY=v1,v2,...", key);
    if (!user.Has(key)) Fail("--vary {}: not a key of the config", key);
    if (vary.count(key)) Fail("--vary {} given twice", key);
    std::set<std::string> seen;
    for (const std::string& v : values) {
      if (v.empty() || !seen.insert(v).second) {
        Fail("--vary {}: value '{}' is empty or repeated, expected distinct values", key, v);
      }
    }
    vary[key] = values;
  }
  // The axes to factorize over: --axes names them (each must be a mesh axis), else the defaults.
  std::vector<std::string> searched(std::begin(kDefaultAxes), std::end(kDefaultAxes));
  if (request.axes.size() == 1 && request.axes[0] == "all") {
    searched = user.mesh_axes();
  } else if (!request.axes.empty()) {
    searched = request.axes;
    for (const std::string& axis : searched) {
      if (std::find(user.mesh_axes().begin(), user.mesh_axes().end(), axis) ==
          user.mesh_axes().end()) {
        Fail("--axes {}: not an axis of mesh_axes [{}]", axis, fmt::join(user.mesh_axes(), ", "));
      }
      if (std::count(searched.begin(), searched.end(), axis) > 1) Fail("--axes {} given twice", axis);
    }
  }
  std::vector<std::string> axes;
  int64_t fixed = 1;
  for (const std::string& axis : user.mesh_axes()) {
    const std::string key = IciKey(axis);
    const bool default_axis = std::find(searched.begin(), searched.end(), axis) != searched.end();
    if (default_axis && !UserSets(source.overrides, key) && !vary.count(key)) {
      axes.push_back(axis);
    } else if (UserSets(source.overrides, key) && user.Int(key) > 0) {
      fixed = CheckedMul(fixed, user.Int(key), "fixed parallelism");
    }
  }
  // The settings: one dimension per --vary key, each value one override; and, unless the
  // user fixes or varies it, the remat policy, whose offloading value is two overrides.
  std::vector<std::vector<std::vector<std::string>>> dimensions;
  for (const auto& [key, values] : vary) {
    std::vector<std::vector<std::string>> dimension;
    for (const std::string& v : values) dimension.push_back({key + "=" + v});
    dimensions.push_back(std::move(dimension));
  }
  if (!vary.count("remat_policy") && !UserSets(source.overrides, "remat_policy")) {
    std::vector<std::vector<std::string>> remat;
    for (const char* policy : kDefaultRemat) remat.push_back({fmt::format("remat_policy={}", policy)});
    if (user.Has("decoder_layer_input")) {
      remat.push_back({std::begin(kOffloadRemat), std::end(kOffloadRemat)});
    }
    dimensions.push_back(std::move(remat));
  }
  // The MoE layer's implementation, for a model with experts: the sparse path (ragged_dot or
  // megablox, tokens sorted by expert) against the dense one (every expert's einsum over
  // dispatched tokens), unless set.
  if (user.Has("sparse_matmul") && user.Has("num_experts") && user.Int("num_experts") > 1 &&
      !vary.count("sparse_matmul") && !UserSets(source.overrides, "sparse_matmul")) {
    dimensions.push_back({{"sparse_matmul=true"}, {"sparse_matmul=false"}});
  }
  // Across slices: every factorization of the slices over the searched axes MaxText shards over
  // DCN (data, fsdp, expert: base.yml calls DCN tensor and sequence parallelism "never
  // recommended", and fit refuses pipeline stages), unless a dcn_*_parallelism is the user's.
  const auto is_dcn_key = [](const std::string& key) {
    return key.rfind("dcn_", 0) == 0 && key.ends_with("_parallelism");
  };
  bool user_dcn = std::any_of(vary.begin(), vary.end(), [&](const auto& v) { return is_dcn_key(v.first); });
  for (const std::string& o : source.overrides) user_dcn |= is_dcn_key(o.substr(0, o.find('=')));
  if (slices > 1 && !user_dcn) {
    std::vector<std::string> dcn_axes;
    for (const char* axis : kDcnAxes) {
      if (std::find(searched.begin(), searched.end(), axis) != searched.end() &&
          user.Has(fmt::format("dcn_{}_parallelism", axis))) {
        dcn_axes.push_back(axis);
      }
    }
    std::vector<std::vector<int64_t>> splits;
    std::vector<int64_t> current;
    if (!dcn_axes.empty()) Factorizations(slices, dcn_axes.size(), current, splits);
    std::vector<std::vector<std::string>> dimension;
    for (const std::vector<int64_t>& split : splits) {
      std::vector<std::string> o;
      for (size_t i = 0; i < dcn_axes.size(); ++i) {
        o.push_back(fmt::format("dcn_{}_parallelism={}", dcn_axes[i], split[i]));
      }
      dimension.push_back(std::move(o));
    }
    if (!dimension.empty()) dimensions.push_back(std::move(dimension));
  }

  // The whole space, counted before anything runs.
  std::vector<std::vector<std::string>> candidates = {{}};
  for (const auto& dimension : dimensions) {
    std::vector<std::vector<std::string>> next;
    for (const auto& c : candidates) {
      for (const std::vector<std::string>& v : dimension) {
        auto o = c;
        o.insert(o.end(), v.begin(), v.end());
        next.push_back(std::move(o));
      }
      if (static_cast<int64_t>(next.size()) > request.max_configs) break;
    }
    candidates = std::move(next);
  }
  std::vector<std::vector<int64_t>> meshes;
  if (!axes.empty()) {
    std::vector<int64_t> current;
    if (per_slice % fixed != 0) {
      Fail("the fixed ici_*_parallelism values multiply to {}, which does not divide the {} "
           "devices of a {} slice", fixed, per_slice, result.target.topology);
    }
    Factorizations(per_slice / fixed, axes.size(), current, meshes);
  } else {
    meshes.push_back({});
  }
  const int64_t total = CheckedMul(static_cast<int64_t>(meshes.size()),
                                   static_cast<int64_t>(candidates.size()), "plan's space");
  if (total > request.max_configs) {
    Fail("plan's space has {} configs ({} meshes x {} settings), more than --max-configs {}; fix "
         "some keys (ici_*_parallelism=, remat_policy=) or narrow --vary",
         total, meshes.size(), candidates.size(), request.max_configs);
  }
  std::vector<std::vector<std::string>> configs;
  for (const auto& mesh : meshes) {
    std::vector<std::string> o;
    for (size_t i = 0; i < axes.size(); ++i) o.push_back(fmt::format("{}={}", IciKey(axes[i]), mesh[i]));
    for (const auto& c : candidates) {
      auto all = o;
      all.insert(all.end(), c.begin(), c.end());
      configs.push_back(std::move(all));
    }
  }

  // Every config in this process, over the cores.
  struct Outcome {
    bool ok = false;
    PlannedConfig planned;
    std::string reason;
    std::string model_name, revision;
  };
  std::vector<Outcome> outcomes(configs.size());
  ThreadPool pool(request.threads);
  // Without a per_device_batch_size of the user's, each config stands at the largest batch that
  // fits at or below the user's (base.yml's), found from the bytes each fit reports
  // (model/batch_search.h).
  const bool search_batch = !UserSets(source.overrides, "per_device_batch_size") &&
                            !vary.count("per_device_batch_size");
  const auto FitConfig = [&](size_t i, BlockCache& block_cache) {
    Outcome& out = outcomes[i];
    std::vector<std::string> overrides = configs[i];
    BatchSearch search(user.Float("per_device_batch_size"));
    while (true) {
      FitRequest fit_request = probe;
      fit_request.variants = false;
      fit_request.block_cache = &block_cache;
      fit_request.args = WithOverrides(request.args, overrides);
      try {
        const FitResult fit = Fit(fit_request);
        // A fitting batch stands once found; another tried later replaces it only if it fits
        // too.
        if (fit.fits || !out.planned.fits) {
          out.ok = true;
          out.model_name = fit.model_name;
          out.revision = fit.revision;
          PlannedConfig& p = out.planned;
          p.overrides = overrides;
          p.mesh = fit.mesh.ToString();
          p.fits = fit.fits;
          p.memory = fit.memory;
          p.hbm_bytes = fit.target.hbm_bytes;
          p.headroom_bytes = fit.headroom_bytes;
          p.near_line = fit.near_line;
          p.unmodelled = fit.unmodelled;
          p.time = EstimateStepTime(fit);
        }
        if (!search_batch) break;
        const BatchProbe probe_result = ProbeOf(fit);
        if (!search.Record(probe_result)) break;
      } catch (const Error& e) {
        // A batch MaxText refuses (one the data axes do not divide): the last batch that ran
        // stands.
        if (!out.ok) {
          out.planned.overrides = overrides;
          out.reason = e.what();
        }
        break;
      }
      overrides =
          WithOverrides(configs[i], {fmt::format("per_device_batch_size={}", search.batch())});
    }
  };
  // Configs that differ only in their remat policy share their blocks' forward runs
  // (model/block_cache.h): each group runs on one worker, in order, with a cache of its own.
  std::vector<std::vector<size_t>> groups;
  {
    std::map<std::vector<std::string>, size_t> group_of;
    for (size_t i = 0; i < configs.size(); ++i) {
      std::vector<std::string> key;
      for (const std::string& o : configs[i]) {
        if (!IsRematKey(o.substr(0, o.find('=')))) key.push_back(o);
      }
      const auto [it, fresh] = group_of.try_emplace(std::move(key), groups.size());
      if (fresh) groups.emplace_back();
      groups[it->second].push_back(i);
    }
  }
  std::atomic<int64_t> done = 0;
  pool.ParallelFor(static_cast<int64_t>(groups.size()), [&](int64_t g) {
    BlockCache block_cache;
    for (const size_t i : groups[static_cast<size_t>(g)]) {
      FitConfig(i, block_cache);
      if (request.progress) {
        request.progress->Update(fmt::format("plan: config {} of {}", ++done, configs.size()));
      }
    }
  });
  for (Outcome& o : outcomes) {
    ++result.evaluated;
    if (!o.ok) {
      result.excluded.push_back({o.planned.overrides, o.reason});
      continue;
    }
    result.model_name = o.model_name;
    result.revision = o.revision;
    (o.planned.fits ? result.fits : result.near).push_back(std::move(o.planned));
  }
  // Fastest = the most tokens per second per device: a smaller batch has a shorter step but
  // does less in it.
  std::stable_sort(result.fits.begin(), result.fits.end(), [](const auto& a, const auto& b) {
    return a.time.tokens_per_second_per_device > b.time.tokens_per_second_per_device;
  });
  MarkPareto(result.fits);
  std::stable_sort(result.near.begin(), result.near.end(), [](const auto& a, const auto& b) {
    return a.headroom_bytes > b.headroom_bytes;
  });
  result.assumptions = {StepTimeAssumptions(),
                        "space: every factorization of the slice's devices over the ICI axes " +
                            fmt::format("{}", fmt::join(searched, ", ")) +
                            " (those not fixed) x remat_policy over MaxText's "
                        "policies (full, save_out_proj, save_qkv_proj, qkv_proj_offloaded, "
                        "save_dot_except_mlp, save_dot_with_context_except_mlp, "
                        "save_dot_except_mlpwi, minimal, minimal_with_context, minimal_offloaded) "
                        "and custom with decoder_layer_input offloaded (unless fixed) x "
                        "sparse_matmul true and false (a model with experts, unless fixed) x, "
                        "across slices, every split of the slices over DCN data, fsdp and expert "
                        "(of the searched axes, unless a dcn_*_parallelism is yours) x each "
                        "--vary; without a per_device_batch_size of yours, the largest that fits "
                        "at or below base.yml's, searched from the bytes each fit reports; left "
                        "out unless given with --axes or --vary: the other ICI axes, the other "
                        "DCN axes, capacity_factor, "
                        "use_ring_of_experts, shard_exp_on_fsdp, "
                        "moe_fsdp_use_two_stage_all_gather, megablox"};
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

}  // namespace shardtrace
