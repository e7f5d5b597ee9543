// Text of a Trace Fact's values for the markdown emitters: a scalar as a number, a vector
// as `[1, 2, 3]`, a matrix as rows `[[1, 2], [3, 4]]`. Integral values print without a
// decimal point, others with 6 significant digits, so the text is stable across runs.
#pragma once

#include <string>

#include "trace/trace.h"

namespace shardtrace {

std::string FactValueText(double value);
std::string FactValuesText(const Fact& fact);

}  // namespace shardtrace
