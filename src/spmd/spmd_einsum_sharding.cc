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

// GSPMD's dot handler (xla/service/spmd/dot_handler.cc, PartitionDot) first tries the
// patterns where operands and the output already agree: both operands partitioned over all
// devices on the same batch dims; an operand and the output over all devices on the same
// batch or non-contracting dims; then grouping devices on dims partitioned the same number
// of ways in an operand and the output (batch, non-contracting) or in both operands
// (contracting). Only when none applies does it fall back to the output's sharding
// (PartitionBaseCase with may_reshard_without_detecting_match): an output partitioned over
// all devices on its batch dims has both operands resharded to it; on one operand's
// non-contracting dims, that operand is resharded to it and the other one gathered whole.
// Returns that plan when the output sharding propagation gave the einsum (`want`, the
// constraint that reads it) takes the fallback, nullopt otherwise.
std::optional<EinsumPlan> OutputLayoutFallback(const ParsedEinsum& eq,
                                               const std::vector<std::vector<Entry>>& target,
                                               const std::vector<Entry>& want, const Mesh& mesh) {
  const int64_t n = mesh.num_devices();
  if (n <= 1) return std::nullopt;
  auto dim = [&](int i, char c) { return static_cast<int>(eq.operands[i].find(c)); };
  auto in_output = [&](char c) { return eq.output.find(c) != std::string::npos; };
  // Letter classes: 'b' batch, 'l'/'r' non-contracting of operand 0/1, 'c' contracting.
  auto klass = [&](char c) {
    const bool a = dim(0, c) >= 0, b = dim(1, c) >= 0;
    if (a && b) return in_output(c) ? 'b' : 'c';
    if (!in_output(c)) return 'x';  // summed within one operand
    return a ? 'l' : 'r';
  };
  std::string letters = eq.operands[0] + eq.operands[1];
  std::sort(letters.begin(), letters.end());
  letters.erase(std::unique(letters.begin(), letters.end()), letters.end());
  auto operand_parts = [&](int i, char k) {
    int64_t p = 1;
    for (const char c : letters)
      if (klass(c) == k && dim(i, c) >= 0) p *= mesh.Size(target[i][dim(i, c)]);
    return p;
  };
  auto output_parts = [&](char k) {
    int64_t p = 1;
    for (size_t d = 0; d < eq.output.size(); ++d)
      if (klass(eq.output[d]) == k) p *= mesh.Size(want[d]);
    return p;
  };
  // Operand i and the output shard class k's letters alike (operand i's dims of other classes
  // follow, since n parts leave none for them).
  auto matches_output = [&](int i, char k) {
    for (size_t d = 0; d < eq.output.size(); ++d) {
      const char c = eq.output[d];
      if (klass(c) == k && target[i][dim(i, c)] != want[d]) return false;
    }
    return true;
  };
  const int64_t lb = operand_parts(0, 'b'), rb = operand_parts(1, 'b'), ob = output_parts('b');
  const int64_t lc = operand_parts(0, 'c'), rc = operand_parts(1, 'c');
  const int64_t ln = operand_parts(0, 'l'), rn = operand_parts(1, 'r');
  const int64_t oln = output_parts('l'), orn = output_parts('r');
  bool batch_alike = true;
  for (const char c : letters)
    if (klass(c) == 'b') batch_alike &= target[0][dim(0, c)] == target[1][dim(1, c)];
  // The base cases that need no fallback.
  if (lb == n && rb == n && batch_alike) return std::nullopt;
  if (ob == n && ((lb == n && matches_output(0, 'b')) || (rb == n && matches_output(1, 'b'))))
    return std::nullopt;
  if (lc == n && rc == n) return std::nullopt;
  if ((ln == n && oln == n && matches_output(0, 'l')) ||
      (rn == n && orn == n && matches_output(1, 'r')))
    return std::nullopt;
  // Grouping on dims partitioned alike.
  if (ob > 1 && (lb == ob || rb == ob)) return std::nullopt;
  if ((ln > 1 && ln == oln) || (rn > 1 && rn == orn)) return std::nullopt;
  for (size_t d = 0; d < eq.output.size(); ++d) {
    const char c = eq.output[d];
    const char k = klass(c);
    if (k != 'l' && k != 'r') continue;
    const int64_t p = mesh.Size(target[k == 'l' ? 0 : 1][dim(k == 'l' ? 0 : 1, c)]);
    if (p > 1 && p == mesh.Size(want[d])) return std::nullopt;
  }
  for (const char c : letters)
    if (klass(c) == 'c') {
      const int64_t p = mesh.Size(target[0][dim(0, c)]);
      if (p > 1 && p == mesh.Size(target[1][dim(1, c)])) return std::nullopt;
    }
  // The fallback: compute in the output's sharding.
  char k = 0;
  if (ob == n)
    k = 'b';
  else if (oln == n)
    k = 'l';
  else if (orn == n)
    k = 'r';
  else
    return std::nullopt;
  EinsumPlan plan;
  for (int i = 0; i < 2; ++i) {
    std::vector<Entry> e(eq.operands[i].size());
    for (size_t d = 0; d < eq.output.size(); ++d) {
      const char c = eq.output[d];
      if (klass(c) == k && dim(i, c) >= 0) e[dim(i, c)] = want[d];
    }
    plan.operands.emplace_back(e);
  }
  plan.output = PartitionSpec(want);
  return plan;
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
  if (constrained_output) {
    std::vector<Entry> want;
    const PartitionSpec spec = WithRank(*constrained_output, eq.output.size());
    for (const Entry& e : spec.entries()) want.push_back(Effective(e, mesh));
    if (std::optional<EinsumPlan> plan = OutputLayoutFallback(eq, target, want, mesh)) return *plan;
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
