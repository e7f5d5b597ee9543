#include "emit/maxtext_dump.h"

#include <nlohmann/json.hpp>

namespace shardtrace {

std::string DumpToMaxtextJson(const std::vector<DumpEntry>& entries,
                              const std::string& maxtext_revision) {
  using Json = nlohmann::ordered_json;
  Json list = Json::array();
  for (const DumpEntry& e : entries) {
    Json value;
    value["logic_axes"] = e.logical;
    value["PartitionSpec"] = e.spec.ToString();
    Json entry;
    entry[e.description + ": " + e.type] = value;
    list.push_back(entry);
  }
  Json root;
  root["Activation Sharding Dump"] = list;
  if (!maxtext_revision.empty()) root["shardtrace"]["maxtext_revision"] = maxtext_revision;
  return root.dump(2) + "\n";
}

}  // namespace shardtrace
