// The flow of a trace on one screen: one `┌─┐` box per phase (flow_phases.h: inputs and
// weights, routing, dispatch, experts, combine, shared experts) naming the scopes it runs
// in, the tensors it hands to later phases (`→ name: act [dims] dtype`, with `╔P(...)╗` when
// an explicit statement fixed that tensor's sharding) and the collectives it runs (`⇄`
// written in moe.py, `⇄ xla` inserted by XLA, with the bytes each device sends). The full
// ASCII flow (ascii_flow.h) shows every tensor; this is its outline, within `max_width`
// columns. Only formats what the Trace and its SPMD result recorded.
#pragma once

#include <cstddef>
#include <string>

#include "ir/trace.h"
#include "spmd/spmd_result.h"

namespace shardtrace {

std::string FlowOverview(const Trace& trace, const SpmdResult& spmd, size_t max_width = 100);

}  // namespace shardtrace
