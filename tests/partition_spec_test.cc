// Tests for PartitionSpec printing: P(...) as MaxText's sharding dumps print jax
// PartitionSpecs, and the bare tuple of MaxText's debug_sharding log (facts 2.6).
#include "shard/partition_spec.h"

#include <catch2/catch.hpp>
#include <string>
#include <vector>

namespace shardtrace {
namespace {

using Entries = std::vector<PartitionSpec::Entry>;

TEST_CASE("An empty PartitionSpec prints as P()", "[shard][partition_spec]") {
  const PartitionSpec spec;
  CHECK(spec.ToString() == "P()");
  CHECK(spec.ToTupleString() == "()");
  CHECK(spec.rank() == 0);
  CHECK(spec.IsReplicated());
}

TEST_CASE("A one-dim replicated spec prints with Python's trailing comma",
          "[shard][partition_spec]") {
  const PartitionSpec spec = PartitionSpec::Replicated(1);
  CHECK(spec.ToString() == "P(None,)");
  CHECK(spec.ToTupleString() == "(None,)");
  CHECK(PartitionSpec(Entries{{"expert"}}).ToString() == "P('expert',)");
  CHECK(PartitionSpec(Entries{{"fsdp", "expert"}}).ToTupleString() == "(('fsdp', 'expert'),)");
}

TEST_CASE("A single-axis entry prints as a bare string and an empty one as None",
          "[shard][partition_spec]") {
  const PartitionSpec spec(Entries{{"expert"}, {}});
  CHECK(spec.ToString() == "P('expert', None)");
  CHECK(spec.ToTupleString() == "('expert', None)");
  CHECK_FALSE(spec.IsReplicated());
}

TEST_CASE("A multi-axis entry prints as a tuple in major-first order", "[shard][partition_spec]") {
  const PartitionSpec spec(Entries{{"fsdp", "expert"}, {}, {}});
  CHECK(spec.ToString() == "P(('fsdp', 'expert'), None, None)");
  CHECK(spec.ToTupleString() == "(('fsdp', 'expert'), None, None)");
  CHECK(PartitionSpec(Entries{{"expert", "fsdp"}, {}, {}}).ToString() ==
        "P(('expert', 'fsdp'), None, None)");
}

TEST_CASE("Mixed specs print like jax", "[shard][partition_spec]") {
  CHECK(PartitionSpec(Entries{{"expert"}, {"fsdp"}, {}}).ToString() == "P('expert', 'fsdp', None)");
  CHECK(PartitionSpec(Entries{{}, {"fsdp_transpose", "tensor"}, {"fsdp"}}).ToString() ==
        "P(None, ('fsdp_transpose', 'tensor'), 'fsdp')");
  CHECK(PartitionSpec::Replicated(3).ToTupleString() == "(None, None, None)");
}

TEST_CASE("EntryToString prints one entry as inside P(...)", "[shard][partition_spec]") {
  CHECK(PartitionSpec::EntryToString({}) == "None");
  CHECK(PartitionSpec::EntryToString({"expert"}) == "'expert'");
  CHECK(PartitionSpec::EntryToString({"fsdp", "tensor_transpose", "context"}) ==
        "('fsdp', 'tensor_transpose', 'context')");
}

TEST_CASE("UsedAxes lists every mesh axis in dim order", "[shard][partition_spec]") {
  const PartitionSpec spec(Entries{{"expert"}, {}, {"fsdp", "tensor"}});
  CHECK(spec.UsedAxes() == std::vector<std::string>{"expert", "fsdp", "tensor"});
  CHECK(PartitionSpec::Replicated(2).UsedAxes().empty());
  CHECK(PartitionSpec::Replicated(2).IsReplicated());
  CHECK(spec == PartitionSpec(Entries{{"expert"}, {}, {"fsdp", "tensor"}}));
  CHECK_FALSE(spec == PartitionSpec(Entries{{"expert"}, {}, {"tensor", "fsdp"}}));
}

}  // namespace
}  // namespace shardtrace
