// The invariants a visualization's formal specification lists: properties of the traced
// path that always hold, each evaluated on the Trace at hand (and, for the routing masks,
// on the numeric captures of the run). Which ones apply follows from what the trace holds:
// routing facts give the token-count checks, dispatch/combine masks the capacity checks,
// the ragged all-to-all facts the send/receive balance. A violated invariant is reported,
// not thrown: the document then shows the bug instead of hiding it.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "numeric/array.h"
#include "trace/trace.h"

namespace shardtrace {

struct Invariant {
  std::string statement;  // "sum(tokens per expert) == B*S*K"
  std::string reason;     // why it always holds, one line
  std::string result;     // "holds: 32 == 4*4*2", "VIOLATED: ...", "not evaluated: ..."
  bool violated = false;
};

// `captures` (BlockRun::captures) may be null; the mask checks then say so.
std::vector<Invariant> TraceInvariants(const Trace& trace,
                                       const std::map<std::string, Array>* captures = nullptr);

}  // namespace shardtrace
