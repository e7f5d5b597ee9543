#include "shard/partition_spec.h"

#include <fmt/format.h>

namespace shardtrace {

bool PartitionSpec::IsReplicated() const {
  for (const Entry& e : entries_)
    if (!e.empty()) return false;
  return true;
}

std::vector<std::string> PartitionSpec::UsedAxes() const {
  std::vector<std::string> axes;
  for (const Entry& e : entries_) axes.insert(axes.end(), e.begin(), e.end());
  return axes;
}

std::string PartitionSpec::EntryToString(const Entry& entry) {
  if (entry.empty()) return "None";
  if (entry.size() == 1) return fmt::format("'{}'", entry[0]);
  std::string out = "(";
  for (size_t i = 0; i < entry.size(); ++i) out += fmt::format("{}'{}'", i ? ", " : "", entry[i]);
  return out + ")";
}

std::string PartitionSpec::ToTupleString() const {
  std::string out = "(";
  for (size_t i = 0; i < entries_.size(); ++i) out += (i ? ", " : "") + EntryToString(entries_[i]);
  // Python prints a 1-tuple with a trailing comma.
  if (entries_.size() == 1) out += ",";
  return out + ")";
}

std::string PartitionSpec::ToString() const {
  std::string out = "P";  // appended, not "P" + ...: g++ 12 -O2 warns (-Wrestrict) on that
  return out.append(ToTupleString());
}

}  // namespace shardtrace
