// Config keys that MaxText knows but a given base.yml may not list. MaxText's pydantic
// model (types.py) defines some keys with defaults outside base.yml (emb_dim,
// prefuse_moe_weights, ...), and the seed-era and current-main base.yml files each lack
// keys the other has (tensor_transpose knobs vs. num_moe_token_chunks, ...). Filling
// the missing ones from this table lets either era's base.yml load, lets a user set a
// HEAD-only knob on the seed base, and gives every key an expected type for validation.
// Derived-only keys are computed by pyconfig and may not be set by the user.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "config/config.h"
#include "config/yaml_value.h"

namespace shardtrace::config_internal {

// Defaults for keys absent from the loaded base.yml, in table order: the MaxText
// defaults outside base.yml, then the seed-era value (or the HEAD value for HEAD-only
// keys) of every key in maxtext-facts.md section 1.4. `cache`: parsed once there when given.
std::vector<YamlEntry> FallbackDefaults(ParsedYamlCache* cache = nullptr);

// Keys whose MaxText type is a union the base.yml default cannot show (types.py declares
// image_size_for_vit as an int or a [height, width] list): any value is accepted.
bool IsUntypedKey(std::string_view key);

// Keys pyconfig always computes (emb_dim, mlp_dim, moe_mlp_dim, heads, layers,
// using_pipeline_parallelism); setting one is an error naming its source key.
bool IsDerivedOnlyKey(std::string_view key);
// "base_emb_dim" for "emb_dim": the key to set instead.
std::string DerivedSourceKey(std::string_view key);

}  // namespace shardtrace::config_internal
