#include "spmd/all_reduce_combiner.h"

#include <fmt/format.h>

#include <algorithm>

namespace shardtrace {
namespace {

// Every tensor computed from `start` (itself included), through the trace's ops.
std::vector<bool> Downstream(const Trace& trace, const std::vector<std::vector<int>>& readers,
                             int start) {
  std::vector<bool> seen(trace.tensors.size(), false);
  std::vector<int> stack = {start};
  seen[static_cast<size_t>(start)] = true;
  while (!stack.empty()) {
    const int t = stack.back();
    stack.pop_back();
    for (const int op : readers[static_cast<size_t>(t)])
      for (const int out : trace.ops[static_cast<size_t>(op)].outputs)
        if (!seen[static_cast<size_t>(out)]) {
          seen[static_cast<size_t>(out)] = true;
          stack.push_back(out);
        }
  }
  return seen;
}

}  // namespace

void CombineAllReduces(const Trace& trace, std::vector<std::vector<ImpliedCollective>>& implied) {
  std::vector<std::vector<int>> readers(trace.tensors.size());
  for (const OpRecord& op : trace.ops)
    for (const int in : op.inputs) readers[static_cast<size_t>(in)].push_back(op.id);
  struct Member {
    ImpliedCollective* collective;
    std::vector<bool> downstream;
  };
  std::vector<std::vector<Member>> groups;
  for (std::vector<ImpliedCollective>& at : implied)
    for (ImpliedCollective& c : at) {
      if (c.kind != CollectiveKind::kPsum || c.tensor < 0) continue;
      Member m{&c, Downstream(trace, readers, c.tensor)};
      const auto independent = [&](const Member& other) {
        return !other.downstream[static_cast<size_t>(c.tensor)] &&
               !m.downstream[static_cast<size_t>(other.collective->tensor)];
      };
      auto fits = [&](const std::vector<Member>& g) {
        return g.front().collective->axes == c.axes &&
               g.front().collective->participants == c.participants &&
               std::all_of(g.begin(), g.end(), independent);
      };
      const auto it = std::find_if(groups.begin(), groups.end(), fits);
      if (it == groups.end())
        groups.push_back({std::move(m)});
      else
        it->push_back(std::move(m));
    }
  int next = 0;
  for (const std::vector<Member>& g : groups) {
    if (g.size() < 2) continue;
    for (const Member& m : g) {
      m.collective->combined_group = next;
      m.collective->reason +=
          fmt::format(" (sent with {} other{} in one all-reduce: XLA's combiner)", g.size() - 1,
                      g.size() == 2 ? "" : "s");
    }
    ++next;
  }
}

}  // namespace shardtrace
