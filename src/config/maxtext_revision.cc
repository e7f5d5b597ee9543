#include "config/maxtext_revision.h"

namespace shardtrace {

MaxTextRevision RevisionOf(const Config& config) {
  if (config.Has("log_required_ragged_buffer_factor"))
    return {MoeSemantics::kRelease, "0.2.5", "the release's base.yml"};
  return {MoeSemantics::kSeed, "313890777", "a seed-era base.yml"};
}

}  // namespace shardtrace
