// Graphviz views of a Trace (the only file that uses Graphviz): DOT text written here, in a
// fixed order, and SVG laid out and rendered by cgraph + gvc in a contained child process
// (util/contained_run.h: Graphviz aborts or loops on some cluster graphs). One node
// per tensor record (weights as boxes, activations as ellipses, a double border where an
// explicit constraint or shard_map spec placed the tensor, green inside shard_map), one edge
// per op input -> output (labelled with the op or its einsum; collectives in red with their
// mesh axes), and nested clusters for moe.py's module and named scopes. Node ids come from
// tensor ids, so the same trace always gives the same graph.
#pragma once

#include <string>

#include "ir/trace.h"

namespace shardtrace {

// DOT source (no layout).
std::string TraceToDot(const Trace& trace);
// Laid out with the dot engine and rendered to SVG by the linked Graphviz library and its dot
// layout and core plugins, linked in and registered as builtins (no `dot` binary, config file
// or plugin directory needed), in a child process under a time and memory limit; Error when it
// fails.
std::string TraceToSvg(const Trace& trace);

}  // namespace shardtrace
