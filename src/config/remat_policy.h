// The remat policy MaxText applies around a decoder layer, as a value the step model reads:
// which checkpoint names jax.checkpoint keeps on the device and which it offloads to the
// host (MaxText 0.2.5 nnx_decoders.py get_remat_policy/minimal_policy), or that the layer is
// not wrapped at all (`remat_policy: none`: JAX keeps every residual the backward reads).
// `custom` takes its lists from the per-tensor keys (moe_mlpwi_0, moe_x_sorted, ...: 'device'
// keeps, 'offload' moves to pinned_host, 'remat' recomputes), as pyconfig builds
// tensors_on_device and tensors_to_offload. Only names a MoE or MLP block can carry matter
// here; the attention names are listed because the policies list them.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "config/config.h"

namespace shardtrace {

struct RematPolicy {
  std::string name;  // the remat_policy value ("full", "minimal", ..., "none")
  // false for remat_policy=none: no jax.checkpoint, every residual is kept.
  bool wrapped = true;
  std::vector<std::string> saved;      // names kept on the device
  std::vector<std::string> offloaded;  // names moved to pinned_host
  // What the policy means, in one line ("saves only these names: mlpwi_0, ...").
  std::string summary;

  bool operator==(const RematPolicy&) const = default;
};

// The policy `config` selects. Throws Error naming remat_policy for a value MaxText's
// get_remat_policy would refuse, and a per-tensor key whose value is not device, offload
// or remat (pyconfig's "Invalid value chosen for tensor").
RematPolicy RematPolicyOf(const Config& config);

// remat_policy and the per-tensor keys a custom policy reads (decoder_layer_input, mlpwo, ...):
// what only the step's memory depends on, never the traced forward.
bool IsRematKey(std::string_view key);

}  // namespace shardtrace
