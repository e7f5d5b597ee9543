// The Mermaid `flowchart` of a Trace: the same flow as the ASCII diagram (ascii_flow.h) in
// a form GitHub renders. Each stage (a run of records in one scope) is a subgraph titled
// by its scope path; each tensor (a folded chain of casts on one name counts once) is a
// node labelled `name: weight|act [dims] dtype`; a tensor an explicit statement placed is
// a double-bordered `[[...]]` node that also names the statement and its PartitionSpec;
// a collective is its own stadium node `(["⇄ all_gather over expert"])` between the
// tensor it reads and the one it makes; edges follow the ops' inputs (data dependencies,
// not program order). `shardtrace trace --format mermaid` prints it for any config, and
// every visualization page embeds it. Only formats what the Trace recorded.
#pragma once

#include <string>

#include "trace/trace.h"

namespace shardtrace {

// The diagram text, starting with `flowchart TD` and ending with a newline (no ``` fence).
// Deterministic; labels escape `"` as `#quot;` so any tensor or op name is valid Mermaid.
std::string MermaidFlow(const Trace& trace);

}  // namespace shardtrace
