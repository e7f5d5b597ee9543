// Which MaxText revision's moe.py semantics a config follows. shardtrace models the seed
// revision (313890777) and the PyPI release maxtext 0.2.5; they differ in a few computed values
// (the load-balance loss normalisation) and in the names MaxText's debug_sharding dump gives
// some constraints. The revision is read off the base.yml that was loaded: only the release's
// has `log_required_ragged_buffer_factor` (its moe.py reads it), so the embedded seed base.yml,
// any seed-era checkout and the repository snapshot e591f30 (testdata/maxtext-configs/, whose
// dumps keep the seed's names) follow the seed, and the release's base.yml
// (testdata/maxtext/configs/) follows the release.
#pragma once

#include <string>

#include "config/config.h"

namespace shardtrace {

enum class MoeSemantics { kSeed, kRelease };

struct MaxTextRevision {
  MoeSemantics semantics;
  std::string name;  // "313890777" or "0.2.5"
  std::string why;   // one line: how the revision was decided
};

MaxTextRevision RevisionOf(const Config& config);

}  // namespace shardtrace
