// What `shardtrace config` prints: the files loaded and the overrides, the MaxText revision
// and why, the mesh, the block's dims, the path RoutedMoE takes and why, and the config keys
// moe.py reads grouped as a reviewer scans them; as aligned text or JSON.
#pragma once

#include <string>
#include <vector>

#include "run/run.h"

namespace shardtrace {

std::string ConfigToText(const RunSetup& in, const std::vector<std::string>& overrides);
std::string ConfigToJson(const RunSetup& in, const std::vector<std::string>& overrides);

}  // namespace shardtrace
