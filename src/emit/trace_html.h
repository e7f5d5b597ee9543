// A Trace as the HTML report's sortable, filterable tables (emit/html_report.h): one row per
// tensor record (name, kind, scope, dtype, global shape, logical axes, the sharding it has and
// where that came from, per-device shape and bytes) and one per collective, those moe.py
// writes and those XLA's SPMD partitioner inserts (spmd/), with the bytes each device sends.
// The same figures as `trace --format table`, read from the trace and its SpmdResult.
#pragma once

#include "emit/html_report.h"
#include "ir/trace.h"
#include "spmd/spmd_result.h"

namespace shardtrace {

HtmlTable TensorHtmlTable(const Trace& trace, const SpmdResult& spmd);
HtmlTable CollectiveHtmlTable(const Trace& trace, const SpmdResult& spmd);

}  // namespace shardtrace
