// PartitionSpec: per tensor dimension, the mesh axes it is split over (major first).
// Printed exactly as MaxText's sharding dumps print jax PartitionSpecs:
//   P(('fsdp', 'expert'), None, None)   P('expert', 'fsdp', None)   P(None,)   P()
// and, via ToTupleString, as the spec tuple of MaxText's debug log:
//   (('fsdp', 'expert'), None, None)    (None,)
#pragma once

#include <string>
#include <vector>

namespace shardtrace {

class PartitionSpec {
 public:
  using Entry = std::vector<std::string>;  // empty: replicated (None)

  PartitionSpec() = default;
  explicit PartitionSpec(std::vector<Entry> entries) : entries_(std::move(entries)) {}
  static PartitionSpec Replicated(size_t rank) { return PartitionSpec(std::vector<Entry>(rank)); }

  size_t rank() const { return entries_.size(); }
  const std::vector<Entry>& entries() const { return entries_; }
  const Entry& operator[](size_t dim) const { return entries_[dim]; }
  bool IsReplicated() const;
  // Every mesh axis used, in dim order.
  std::vector<std::string> UsedAxes() const;

  std::string ToString() const;       // P(...)
  std::string ToTupleString() const;  // (...)
  // One entry as printed inside P(...): None, 'a' or ('a', 'b').
  static std::string EntryToString(const Entry& entry);

  bool operator==(const PartitionSpec&) const = default;

 private:
  std::vector<Entry> entries_;
};

}  // namespace shardtrace
