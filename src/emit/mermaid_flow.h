// The Mermaid `flowchart` of a Trace: the same flow as the ASCII diagram (ascii_flow.h) in
// a form GitHub renders, kept small enough to read there. Each stage (a run of records in
// one scope) is a subgraph titled by its scope path. Each tensor is one node labelled
// `name: weight|act [dims] dtype`; the records that only restate it (dtype casts, checkpoint
// names, its sharding constraint, a chain of elementwise ops on one name) fold into that
// label (`inputs: act [B=4,S=4,M=16] f32→bf16`, `wi_0 → w0_kernel: weight ...`) instead of
// drawing nodes of their own. A tensor an explicit statement placed is a double-bordered
// `[[...]]` node that also names the statement and its PartitionSpec (the only nodes that
// show a spec). A collective the code writes is its own stadium node
// `(["⇄ all_gather over expert"])` between the tensor it reads and the one it makes; one XLA
// implies sits on the way from the operand it moves to the op's result, or, when it reduces
// that result in place, from the op's operands to the result, so the graph has no cycle.
// Edges follow the ops' inputs (data dependencies, not program order). A loop whose
// iterations the trace records as alike (Trace::loop_iterations) is drawn once inside a
// subgraph giving the count, and plain sibling tensors made from the same nodes for the same
// readers (get_all_to_all_params' offsets and sizes) share one node.
// `shardtrace trace --format mermaid` prints it for any config, and every visualization
// page embeds it. Only formats what the Trace recorded.
#pragma once

#include <string>
#include <vector>

#include "emit/flow_phases.h"
#include "ir/trace.h"
#include "spmd/spmd_result.h"

namespace shardtrace {

// The diagram text, starting with `flowchart TD` and ending with a newline (no ``` fence).
// Deterministic; labels escape `"` as `#quot;` so any tensor or op name is valid Mermaid.
std::string MermaidFlow(const Trace& trace, const SpmdResult& spmd);

// The same flow as one graph per phase (flow_phases.h), a phase of more than 9 nodes cut
// into pieces at stage boundaries, each laid out small enough to read inline: the nodes of
// the part in their stages' subgraphs (titled with the scope's last two segments), and a
// small dashed node `↑ name` for each node of another part an edge comes from. Node and
// subgraph ids are those of the whole graph.
struct MermaidPart {
  FlowPhase phase;
  int piece = 0;     // 1..pieces when the phase is cut into pieces, else 0
  int pieces = 1;
  std::string text;  // an init line keeping subgraph titles clear, `flowchart TD`, ...
};
std::vector<MermaidPart> MermaidFlowParts(const Trace& trace, const SpmdResult& spmd);

}  // namespace shardtrace
