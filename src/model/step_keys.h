// The keys of MaxText's base.yml that change the whole training step outside the decoder's
// layers, and what fit does with each set away from its default: refuse the config naming the
// key (the step MaxText builds then is not the one fit composes: microbatches, quantized
// operands, state on the host, a tiled loss, another model beside it), or say in a note that
// fit counts nothing for it. The MoE block's own keys are config/moe_keys.h's. A key set away
// from its default is never silently ignored; docs/fit-keys.md is this table, checked by a test
// against StepKeyTableMarkdown().
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace shardtrace {

class Config;

enum class StepKeyStatus {
  kRefused,  // fit fails naming the key: the step would be another one
  kNoted,    // fit counts nothing for it, and says so beside the verdict's assumptions
};

struct StepKeyEntry {
  std::string_view key;
  // The default as Config values print it (ConfigValue::ToString: False, 0, 0.0, '', []).
  std::string_view default_value;
  StepKeyStatus status;
  // What the key does in MaxText's train step (refused), or why fit's figures stand (noted).
  std::string_view what;
  // A value away from the default (tests set it; docs show it).
  std::string_view example;
  // Further key=value overrides MaxText's config needs beside `example`, space-separated;
  // empty: none.
  std::string_view needs = "";
};

const std::vector<StepKeyEntry>& StepKeyTable();

std::string_view ToString(StepKeyStatus status);  // refused | noted

// Walks the table over `config`: a refused key away from its default is an Error naming it;
// a noted key away from its default gives one note ("dropout_rate=0.1: ...").
std::vector<std::string> AccountStepKeys(const Config& config);

// The table as docs/fit-keys.md holds it.
std::string StepKeyTableMarkdown();

}  // namespace shardtrace
