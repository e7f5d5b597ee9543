#include "spmd/spmd_result.h"

#include "ir/trace.h"

namespace shardtrace {

const PartitionSpec* SpmdResult::SpecOf(const TensorRecord& t) const {
  if (t.partition_spec) return &*t.partition_spec;
  const TensorSpmd& s = tensor(t.id);
  return s.propagated_spec ? &*s.propagated_spec : nullptr;
}

}  // namespace shardtrace
