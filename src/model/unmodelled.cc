#include "model/unmodelled.h"

namespace shardtrace {

std::string_view ToString(Unmodelled u) {
  switch (u) {
    case Unmodelled::kOffloadStaging:
      return "offload_staging";
    case Unmodelled::kRaggedBiasRows:
      return "ragged_bias_rows";
  }
  return "";
}

std::string_view ShortLabel(Unmodelled u) {
  switch (u) {
    case Unmodelled::kOffloadStaging:
      return "offloads several names";
    case Unmodelled::kRaggedBiasRows:
      return "biases on the ragged path";
  }
  return "";
}

std::string_view Explanation(Unmodelled u) {
  switch (u) {
    case Unmodelled::kOffloadStaging:
      return "the policy offloads several names, whose stacks TPU's compiler has staged whole "
             "in HBM to change their layout (Mixtral 8x7B dropping on v6e-256 ran out of HBM "
             "where fit says it fits): not modelled, compile to be sure";
    case Unmodelled::kRaggedBiasRows:
      return "the experts' biases on the expert-parallel ragged path, where TPU's compiler holds "
             "more of the ragged buffer's rows than fit counts (gpt-oss-20b at expert 4: its "
             "temp 25-27% over fit's): not modelled, compile to be sure";
  }
  return "";
}

}  // namespace shardtrace
