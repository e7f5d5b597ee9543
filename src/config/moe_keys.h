// Every MoE key of MaxText's base.yml (the release's, 0.2.5, which has all the seed's and
// main's too) with what shardtrace does with it: modelled (the trace follows it),
// forward-neutral (it changes only the backward pass, remat, logging, evaluation or which TPU
// kernel runs the same computation: the trace says so in a note), or not modelled (set away
// from its default, every command refuses the config naming the key). A key set away from
// its default is never silently ignored. docs/maxtext-keys.md is this table, checked by a
// test against MoeKeyTableMarkdown().
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "config/maxtext_revision.h"

namespace shardtrace {

class Config;

enum class MoeKeyStatus { kModelled, kForwardNeutral, kNotModelled };

struct MoeKeyEntry {
  std::string_view key;
  // The default as Config values print it (ConfigValue::ToString: False, 0, '', 'remat').
  std::string_view default_value;
  MoeKeyStatus status;
  // Modelled: how the trace changes; forward-neutral: the note's reason; not modelled: what
  // the key does in MaxText that shardtrace does not follow.
  std::string_view what;
  // A value away from the default (tests set it; docs show it).
  std::string_view example;
  // Further key=value overrides under which `example` shows in a trace (a key that matters
  // only with another one), space-separated; empty: none needed.
  std::string_view needs = "";
  // The oldest revision whose moe.py reads the key. Under an older one (a base.yml that has
  // the key, run with --maxtext-revision naming the older revision) a value away from the
  // default is refused: that moe.py would not follow it.
  RevisionId since = RevisionId::kSeed;
};

const std::vector<MoeKeyEntry>& MoeKeyTable();

std::string_view ToString(MoeKeyStatus status);  // modelled | forward-neutral | not modelled

// Walks the table over `config`: a not-modelled key away from its default is an Error naming
// it; forward-neutral keys away from theirs return one note each ("moe_x_sorted='device':
// changes only what the backward pass saves").
std::vector<std::string> AccountMoeKeys(const Config& config);

// The table as docs/maxtext-keys.md holds it.
std::string MoeKeyTableMarkdown();

}  // namespace shardtrace
