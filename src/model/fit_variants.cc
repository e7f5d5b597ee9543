#include "model/fit_variants.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <optional>
#include <string>

#include "config/run_inputs.h"
#include "util/error.h"

namespace shardtrace {

BatchProbe ProbeOf(const FitResult& fit) {
  // need: what the step asks of the HBM, so that it fits where need <= hbm (the headroom is
  // against the capacity, the compiler's share of the HBM on TPU).
  return {fit.fits, fit.target.hbm_bytes - fit.headroom_bytes,
          fit.memory.argument_size_in_bytes + fit.peak_gradient_bytes + fit.peak_cast_bytes +
              fit.gathered_bytes,
          fit.target.hbm_bytes};
}

namespace model_internal {
namespace {

using FitOnceFn = std::function<FitResult(const FitRequest&)>;

FitVariant RowOf(std::vector<std::string> overrides, const FitResult& f) {
  FitVariant row;
  row.overrides = std::move(overrides);
  row.fits = f.fits;
  row.peak_bytes = f.memory.peak_memory_in_bytes;
  row.headroom_bytes = f.headroom_bytes;
  return row;
}

// The user's request with `overrides`, fitted alone (no variants of its own).
FitRequest VariantRequest(const FitRequest& request, const std::vector<std::string>& overrides) {
  FitRequest v = request;
  v.variants = false;
  v.args = WithOverrides(request.args, overrides);
  return v;
}

FitVariant Tried(const FitRequest& request, std::vector<std::string> overrides,
                 const FitOnceFn& fit_once) {
  try {
    FitResult f = fit_once(VariantRequest(request, overrides));
    return RowOf(std::move(overrides), f);
  } catch (const Error& e) {
    FitVariant row;
    row.overrides = std::move(overrides);
    row.refused = e.what();
    return row;
  }
}

std::string BatchArg(double batch) { return fmt::format("per_device_batch_size={}", batch); }

// The largest per_device_batch_size that fits, searched from the user's (`fit`): downward where
// it does not fit, upward where it does. Its row: that batch; where it is the user's own, the
// next one up, which does not; where none fits, batch 1, the smallest miss. None where the
// user's batch is 1 or under and does not fit, or a probe is refused (a batch the mesh's data
// axes do not divide): the rows found before it stand.
std::optional<FitVariant> BatchRow(const FitRequest& request, const FitResult& fit, double user,
                                   const FitOnceFn& fit_once) {
  BatchSearch search(user, BatchSearch::Direction::kUp);
  std::map<double, FitVariant> probed;
  BatchProbe probe = ProbeOf(fit);
  while (search.Record(probe)) {
    const double batch = search.batch();
    std::optional<FitResult> f;
    try {
      f = fit_once(VariantRequest(request, {BatchArg(batch)}));
    } catch (const Error&) {
      break;
    }
    probe = ProbeOf(*f);
    probed.emplace(batch, RowOf({BatchArg(batch)}, *f));
  }
  const double answer = search.answer();
  if (answer != user) {
    const auto it = probed.find(answer);
    if (it == probed.end()) return std::nullopt;
    FitVariant row = it->second;
    row.note = row.fits ? "the largest batch that fits" : "the smallest batch, and none fits";
    return row;
  }
  // The user's batch stands: show the smallest miss above it, if the search reached it.
  const auto miss = std::find_if(probed.begin(), probed.end(),
                                 [&](const auto& p) { return p.first > user && !p.second.fits; });
  if (!fit.fits || miss == probed.end()) return std::nullopt;
  FitVariant row = miss->second;
  row.note = "the next batch up: the user's is the largest that fits";
  return row;
}

}  // namespace

std::vector<FitVariant> Variants(const FitRequest& request, const FitResult& fit,
                                 const FitOnceFn& fit_once) {
  std::vector<FitVariant> rows;
  if (fit.policy.name != "full") rows.push_back(Tried(request, {"remat_policy=full"}, fit_once));
  // The layer inputs, what a full policy still keeps for every layer, moved to the host.
  const bool inputs_offloaded = std::count(fit.policy.offloaded.begin(), fit.policy.offloaded.end(),
                                           "decoder_layer_input") > 0;
  if (fit.policy.name == "full") {
    rows.push_back(
        Tried(request, {"remat_policy=custom", "decoder_layer_input=offload"}, fit_once));
  } else if (fit.policy.name == "custom" && !inputs_offloaded) {
    rows.push_back(Tried(request, {"decoder_layer_input=offload"}, fit_once));
  }
  for (const auto& [key, value] : fit.settings) {
    if (key == "per_device_batch_size") {
      if (std::optional<FitVariant> row = BatchRow(request, fit, std::stod(value), fit_once)) {
        rows.push_back(std::move(*row));
      }
    }
    if (key == "weight_dtype" && value == "float32") {
      rows.push_back(Tried(request, {"weight_dtype=bfloat16"}, fit_once));
    }
    if (key == "opt_type" && value != "sgd")
      rows.push_back(Tried(request, {"opt_type=sgd"}, fit_once));
  }
  std::stable_sort(rows.begin(), rows.end(), [](const FitVariant& a, const FitVariant& b) {
    return a.headroom_bytes > b.headroom_bytes;
  });
  return rows;
}

}  // namespace model_internal
}  // namespace shardtrace
