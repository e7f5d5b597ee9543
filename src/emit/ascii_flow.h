// The ASCII box diagram of a Trace, drawn the way the visualization conventions
// (../shared/seeds/visualization-conventions.md) ask: one `┌─┐` box per scope, nested by
// the '/'-separated scope path, holding the scope's tensors in program order with `▼` flow
// arrows between them. A tensor whose sharding an explicit statement fixed (kernel_axes,
// maybe_shard_with_logical/pspec, shard_map in/out specs) sits in a double-line `╔═╗` box
// with its logical axes, PartitionSpec and per-device shape; einsum and gmm results show
// their equation, collectives their axes and bytes, conditional tensors `(if <condition>)`.
// It only formats what the Trace recorded: nothing here resolves a sharding.
#pragma once

#include <string>

#include "trace/trace.h"

namespace shardtrace {

// Boxes are rectangular: every line between a box's top and bottom edge has the same
// display width. Consecutive unconstrained records of one name, shape and scope (a cast
// after a cast) collapse into one line noting `(xN ops)`, so large traces stay readable.
// Boxes follow program order: a parent's box stays open around its children's boxes, and
// a scope entered again after a sibling scope gets a second box rather than moving records
// out of order. Ends with a newline.
std::string AsciiFlow(const Trace& trace);

}  // namespace shardtrace
