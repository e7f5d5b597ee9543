// A numeric fact a traced path establishes beside its tensors: the capacity and its formula's
// inputs, tokens per expert, the ragged all-to-all's send matrix, a buffer's fill. Each fact
// says what it is with a FactKind, so invariants and renderers select facts by kind (never
// by a name string) and word them themselves (ir/fact_text.h): the tracer records numbers
// and the inputs they came from, no prose.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "numeric/array.h"

namespace shardtrace {

enum class FactKind {
  kTokensPerExpert,         // [E] routed choices per expert, whole batch
  kExpertCapacity,          // scalar C; inputs: tokens, top_k, num_experts, capacity_factor
  kTokensDroppedPerExpert,  // [E]; inputs: choices, capacity
  kRaggedBufferRows,        // scalar; get_ragged_buffer_size's inputs
  kRaggedBufferFill,        // [device] rows received; inputs: buffer_rows
  kGroupSizesPerDevice,     // [device, local expert] rows each gmm group gets
  kLoadImbalance,           // scalar max/mean rows per device
  kRowsSent,                // [device, peer] of `subject`'s ragged_all_to_all
  kRowsDropped,             // [device] rows that did not fit; inputs: buffer_rows
  kRowsMissing,             // [device] send_sizes past the operand's rows
  kRecvSizesMismatched,     // [device] recv_sizes disagreeing with the senders
};

// "tokens_per_expert", "expert_capacity", ...: the stable key JSON output and diffs use.
std::string ToString(FactKind kind);

// One named input of the formula that produced a fact ("capacity_factor" = 1.5).
struct FactInput {
  std::string name;  // the MaxText name of the value where there is one
  double value = 0;
};

struct Fact {
  FactKind kind = FactKind::kTokensPerExpert;
  std::string subject;  // the tensor a per-collective fact is about ("x"); else empty
  std::string scope;
  Shape shape;                 // empty for a scalar
  std::vector<double> values;  // row-major
  std::vector<FactInput> inputs;

  // The input named `name`; a fact recorded without it is a bug (std::logic_error).
  double Input(std::string_view name) const;
};

}  // namespace shardtrace
