#include "numeric/tape.h"

#include <utility>

#include "numeric/op_support.h"
#include "util/error.h"

namespace shardtrace {

void Tape::Record(std::vector<int> inputs, std::vector<int> outputs, Rule rule, std::string what) {
  for (const int id : outputs) tracked_.insert(id);
  records_.push_back({std::move(inputs), std::move(outputs), std::move(rule), std::move(what)});
}

Shards AddCotangents(const Shards& a, const Shards& b) {
  if (a.empty()) return b;
  if (b.empty()) return a;
  SHARDTRACE_CHECK(a.size() == b.size());
  Shards sum(a.size());
  for (size_t d = 0; d < a.size(); ++d) {
    if (!b[d].numeric()) {
      sum[d] = a[d];
    } else if (!a[d].numeric()) {
      sum[d] = b[d];
    } else {
      SHARDTRACE_CHECK(a[d].shape == b[d].shape);
      std::vector<float> values = a[d].values();
      const std::vector<float>& add = b[d].values();
      for (size_t i = 0; i < values.size(); ++i) values[i] += add[i];
      op_support::ConvertAll(a[d].dtype, values);
      sum[d] = Array::FromData(a[d].shape, a[d].dtype, std::move(values));
    }
  }
  return sum;
}

std::map<int, Shards> Tape::Backward(std::map<int, Shards> seeds,
                                     const std::vector<int>& wanted) const {
  std::map<int, Shards> cotangents = std::move(seeds);
  const std::set<int> keep(wanted.begin(), wanted.end());
  for (auto record = records_.rbegin(); record != records_.rend(); ++record) {
    std::vector<Shards> outs;
    bool any = false;
    for (const int id : record->outputs) {
      const auto found = cotangents.find(id);
      if (found == cotangents.end()) {
        outs.emplace_back();
        continue;
      }
      any = true;
      // An output is read by nothing recorded before its op: its cotangent is complete here
      // and no longer needed (memory follows what the reverse pass still has to read).
      outs.push_back(keep.contains(id) ? found->second : std::move(found->second));
      if (!keep.contains(id)) cotangents.erase(found);
    }
    if (!any) continue;
    if (!record->rule)
      throw std::logic_error("no derivative rule for " + record->what +
                             ", which a cotangent reached");
    std::vector<Shards> ins = record->rule(outs);
    SHARDTRACE_CHECK(ins.size() == record->inputs.size());
    for (size_t i = 0; i < ins.size(); ++i) {
      if (ins[i].empty()) continue;
      Shards& slot = cotangents[record->inputs[i]];
      slot = AddCotangents(slot, ins[i]);
    }
  }
  std::map<int, Shards> result;
  for (const int id : wanted)
    if (const auto found = cotangents.find(id); found != cotangents.end())
      result.emplace(id, std::move(found->second));
  return result;
}

}  // namespace shardtrace
