// memory_analysis()'s field names, written once for every JSON output that carries a step's
// memory (fit's and each of plan's configs), so the names MaxText's compiled step uses cannot
// drift between them. Internal to the emit room (it includes nlohmann/json).
#pragma once

#include <nlohmann/json.hpp>

#include "model/whole_step.h"

namespace shardtrace {

// Sets argument_size_in_bytes ... peak_memory_in_bytes on `j`.
void AddMemoryAnalysis(nlohmann::ordered_json& j, const FitMemory& m);

}  // namespace shardtrace
