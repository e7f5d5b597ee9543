#include "spmd/spmd_einsum_sharding.h"

#include <algorithm>
#include <map>

#include "shard/sharding.h"
#include "spmd/spmd_reshard.h"
#include "util/error.h"

namespace shardtrace {
namespace {

using Entry = PartitionSpec::Entry;

bool Uses(const std::vector<Entry>& entries, const std::string& axis, int except_dim = -1) {
  for (size_t d = 0; d < entries.size(); ++d)
    if (static_cast<int>(d) != except_dim &&
        std::find(entries[d].begin(), entries[d].end(), axis) != entries[d].end())
      return true;
  return false;
}

Entry Effective(const Entry& e, const Mesh& mesh) {
  Entry out;
  for (const std::string& a : e)
    if (mesh.Size(a) > 1) out.push_back(a);
  return out;
}

}  // namespace

EinsumPlan PlanEinsum(const ParsedEinsum& eq, const std::vector<Shape>& shapes,
                      const std::vector<DType>& dtypes, const std::vector<PartitionSpec>& specs,
                      DType out_dtype, const Mesh& mesh,
                      const std::optional<PartitionSpec>& constrained_output) {
  SHARDTRACE_CHECK(eq.operands.size() == 2 && shapes.size() == 2 && specs.size() == 2);
  std::vector<std::vector<Entry>> target(2);
  for (int i = 0; i < 2; ++i) {
    const PartitionSpec s = WithRank(specs[i], shapes[i].size());
    for (const Entry& e : s.entries()) target[i].push_back(Effective(e, mesh));
  }
  auto dim = [&](int i, char c) {
    return static_cast<int>(eq.operands[i].find(c));  // npos -> -1
  };
  auto local_bytes = [&](int i) {
    std::vector<Entry> e = target[i];
    return TensorBytes(LocalShapeOf(shapes[i], PartitionSpec(e), mesh), dtypes[i]);
  };
  auto size_of = [&](char c) {
    for (int i = 0; i < 2; ++i)
      if (dim(i, c) >= 0) return shapes[i][dim(i, c)];
    return int64_t{1};
  };
  // The output spec the operands currently imply (first operand wins per letter).
  auto output_entries = [&]() {
    std::vector<Entry> out;
    for (const char c : eq.output) {
      Entry e;
      for (int i = 0; i < 2 && e.empty(); ++i)
        if (dim(i, c) >= 0) e = target[i][dim(i, c)];
      out.push_back(e);
    }
    return out;
  };
  auto output_local_bytes = [&]() {
    Shape shape;
    for (const char c : eq.output) shape.push_back(size_of(c));
    return TensorBytes(LocalShapeOf(shape, PartitionSpec(output_entries()), mesh), out_dtype);
  };
  auto smaller = [&]() { return local_bytes(0) <= local_bytes(1) ? 0 : 1; };

  // Dims in both operands: batch (kept) and contracted (summed).
  for (const char c : eq.operands[0]) {
    const int d0 = dim(0, c), d1 = dim(1, c);
    if (d1 < 0) continue;
    Entry& a = target[0][d0];
    Entry& b = target[1][d1];
    if (a == b) continue;
    const bool contracted = eq.output.find(c) == std::string::npos;
    if (a.empty() || b.empty()) {
      const int sharded = a.empty() ? 1 : 0, other = 1 - sharded;
      const int ds = sharded == 0 ? d0 : d1, dother = sharded == 0 ? d1 : d0;
      const Entry axes = target[sharded][ds];
      bool can_slice = true;
      for (const std::string& x : axes) can_slice &= !Uses(target[other], x);
      if (!contracted) {
        if (can_slice)
          target[other][dother] = axes;
        else
          target[sharded][ds].clear();
        continue;
      }
      // Contracted, sharded on one side: gather it, or slice the other side and reduce.
      const int64_t n = mesh.Size(axes);
      const int64_t gather_cost = (n - 1) * local_bytes(sharded);
      const int64_t reduce_cost = 2 * (n - 1) * output_local_bytes() / n;
      // Ties go to the reduction: slicing is free and the output is usually what a
      // constraint reshards next anyway.
      if (can_slice && reduce_cost <= gather_cost)
        target[other][dother] = axes;
      else
        target[sharded][ds].clear();
      continue;
    }
    // Both sharded, differently: the smaller operand follows the larger when it can.
    const int follower = smaller(), leader = 1 - follower;
    const int dl = leader == 0 ? d0 : d1, df = follower == 0 ? d0 : d1;
    bool can_follow = true;
    for (const std::string& x : target[leader][dl]) can_follow &= !Uses(target[follower], x, df);
    if (can_follow) {
      target[follower][df] = target[leader][dl];
    } else {
      target[0][d0].clear();
      target[1][d1].clear();
    }
  }

  // A mesh axis shards at most one output dim: gather it from the smaller operand's dim.
  for (bool clash = true; clash;) {
    clash = false;
    const std::vector<Entry> out = output_entries();
    std::map<std::string, std::vector<char>> letters;
    for (size_t k = 0; k < out.size(); ++k)
      for (const std::string& a : out[k]) letters[a].push_back(eq.output[k]);
    for (const auto& [axis, cs] : letters) {
      if (cs.size() < 2) continue;
      clash = true;
      // The letter a constraint on the output shards on this axis keeps it (XLA gathers the
      // other operand, e.g. FSDP's wo rather than the batch-sharded activation).
      char kept = 0;
      if (constrained_output) {
        const PartitionSpec want = WithRank(*constrained_output, eq.output.size());
        for (const char c : cs) {
          const Entry& e = want.entries()[eq.output.find(c)];
          if (std::find(e.begin(), e.end(), axis) != e.end()) kept = c;
        }
      }
      // Among the operand dims carrying the axis on the other clashing letters, drop it
      // where the operand is smaller.
      int best_i = -1, best_d = -1;
      int64_t best_bytes = 0;
      for (const char c : cs)
        for (int i = 0; i < 2 && c != kept; ++i) {
          const int d = dim(i, c);
          if (d < 0) continue;
          Entry& e = target[i][d];
          if (std::find(e.begin(), e.end(), axis) == e.end()) continue;
          const int64_t bytes = local_bytes(i);
          // Ties go to the later operand: moe.py writes kernels second.
          if (best_i < 0 || bytes <= best_bytes) best_i = i, best_d = d, best_bytes = bytes;
        }
      Entry& e = target[best_i][best_d];
      e.erase(std::find(e.begin(), e.end(), axis));
      // A batch letter must stay consistent between the operands.
      const char c = eq.operands[best_i][best_d];
      const int other_d = dim(1 - best_i, c);
      if (other_d >= 0) {
        Entry& o = target[1 - best_i][other_d];
        const auto it = std::find(o.begin(), o.end(), axis);
        if (it != o.end()) o.erase(it);
      }
      break;
    }
  }

  EinsumPlan plan;
  for (int i = 0; i < 2; ++i) plan.operands.emplace_back(target[i]);
  plan.output = PartitionSpec(output_entries());
  for (const char c : eq.contracted)
    for (int i = 0; i < 2; ++i) {
      const int d = dim(i, c);
      if (d < 0) continue;
      for (const std::string& a : target[i][d])
        if (std::find(plan.partial.begin(), plan.partial.end(), a) == plan.partial.end())
          plan.partial.push_back(a);
    }
  return plan;
}

}  // namespace shardtrace
