// The words and numbers of a Trace Fact, for every emitter: its name ("tokens per expert
// (routed choices, whole batch)", "x: rows sent [device, peer]"), its note (the formula with
// its inputs filled in), and its values: a scalar as a number, a vector as `[1, 2, 3]`, a
// matrix as rows `[[1, 2], [3, 4]]`. Integral values print without a decimal point, others
// with 6 significant digits, so the text is stable across runs.
#pragma once

#include <string>

#include "ir/trace.h"

namespace shardtrace {

std::string FactName(const Fact& fact);
std::string FactNote(const Fact& fact);  // "" when the kind has none
std::string FactValueText(double value);
std::string FactValuesText(const Fact& fact);

}  // namespace shardtrace
