#include "spmd/step_cotangent.h"

#include <algorithm>

#include "spmd/spmd_reshard.h"

namespace shardtrace {
namespace {

using Entry = PartitionSpec::Entry;

int64_t ElementsOf(const Shape& s) {
  int64_t n = 1;
  for (const int64_t d : s) n *= d;
  return n;
}

// `spec`'s entries at `rank`, without the mesh axes of size 1.
std::vector<Entry> Effective(const PartitionSpec& spec, size_t rank, const Mesh& mesh) {
  std::vector<Entry> out;
  const PartitionSpec padded = WithRank(spec, rank);
  for (const Entry& e : padded.entries()) {
    Entry kept;
    for (const std::string& a : e)
      if (mesh.Size(a) > 1) kept.push_back(a);
    out.push_back(kept);
  }
  return out;
}

bool Has(const Entry& e, const std::string& a) {
  return std::find(e.begin(), e.end(), a) != e.end();
}

// `e` cut at its first axis in `used` (a major axis moving away takes the minor ones along).
Entry Without(const Entry& e, const std::vector<std::string>& used) {
  Entry out;
  for (const std::string& a : e) {
    if (std::find(used.begin(), used.end(), a) != used.end()) break;
    out.push_back(a);
  }
  return out;
}

int64_t Parts(const Entry& e, const Mesh& mesh) {
  int64_t n = 1;
  for (const std::string& a : e) n *= mesh.Size(a);
  return n;
}

}  // namespace

CotangentEinsumPlan PlanCotangentEinsum(const CotangentOperand& d_out,
                                        const CotangentOperand& other, const std::string& x_letters,
                                        const Mesh& mesh) {
  const CotangentOperand* ops[2] = {&d_out, &other};
  const int64_t size[2] = {ElementsOf(d_out.shape), ElementsOf(other.shape)};
  std::vector<Entry> spec[2];
  for (int i = 0; i < 2; ++i) spec[i] = Effective(ops[i]->spec, ops[i]->letters.size(), mesh);
  auto entry = [&](int i, char c) {
    const size_t k = ops[i]->letters.find(c);
    return k == std::string::npos ? Entry{} : spec[i][k];
  };
  // Each dim of d_x proposes the axes of the operand carrying its letter (the larger one's).
  const size_t n = x_letters.size();
  std::vector<Entry> want(n);
  std::vector<int> source(n, -1);
  for (size_t d = 0; d < n; ++d)
    for (int i = 0; i < 2; ++i) {
      const Entry e = entry(i, x_letters[d]);
      if (e.empty()) continue;
      if (source[d] < 0 || size[i] > size[source[d]]) want[d] = e, source[d] = i;
    }
  // A mesh axis wanted by two dims stays with the larger source tensor, the cotangent on a tie.
  auto beats = [&](size_t a, size_t b) {
    if (size[source[a]] != size[source[b]]) return size[source[a]] > size[source[b]];
    if (source[a] != source[b]) return source[a] < source[b];
    return a < b;
  };
  std::vector<Entry> result(n);
  for (size_t d = 0; d < n; ++d)
    for (const std::string& a : want[d]) {
      bool lost = false;
      for (size_t o = 0; o < n && !lost; ++o) lost = o != d && Has(want[o], a) && beats(o, d);
      if (lost) break;
      result[d].push_back(a);
    }
  CotangentEinsumPlan plan;
  plan.result = PartitionSpec(result);
  const std::vector<std::string> used = plan.result.UsedAxes();
  // The operands as read: like the result on the letters it keeps; their own axes, less the
  // result's, on the contracted ones.
  std::vector<Entry> read[2];
  for (int i = 0; i < 2; ++i)
    for (size_t k = 0; k < ops[i]->letters.size(); ++k) {
      const size_t d = x_letters.find(ops[i]->letters[k]);
      read[i].push_back(d != std::string::npos ? result[d] : Without(spec[i][k], used));
    }
  // A contracted letter both operands carry: the less sharded side is sliced like the other
  // (free) where its sharding is a prefix of the other's; two incompatible ones gather both.
  for (size_t k = 0; k < d_out.letters.size(); ++k) {
    const char c = d_out.letters[k];
    const size_t j = other.letters.find(c);
    if (x_letters.find(c) != std::string::npos || j == std::string::npos) continue;
    Entry& a = read[0][k];
    Entry& b = read[1][j];
    if (a == b) continue;
    // The shorter sharding a prefix of the longer: slice the shorter side further (free) if
    // it uses none of the extra axes elsewhere.
    const bool a_short = a.size() < b.size();
    Entry& shorter = a_short ? a : b;
    const Entry& longer = a_short ? b : a;
    const int into = a_short ? 0 : 1;
    bool free = std::equal(shorter.begin(), shorter.end(), longer.begin());
    for (size_t e = 0; free && e < read[into].size(); ++e)
      for (size_t x = shorter.size(); x < longer.size(); ++x)
        free = free && !Has(read[into][e], longer[x]);
    if (free) {
      shorter = longer;
    } else {
      a.clear();
      b.clear();
    }
  }
  for (int i = 0; i < 2; ++i)
    for (size_t k = 0; k < ops[i]->letters.size(); ++k) {
      if (x_letters.find(ops[i]->letters[k]) != std::string::npos) continue;
      for (const std::string& a : read[i][k])
        if (std::find(plan.partial.begin(), plan.partial.end(), a) == plan.partial.end())
          plan.partial.push_back(a);
    }
  plan.d_out = PartitionSpec(read[0]);
  plan.other = PartitionSpec(read[1]);
  return plan;
}

PartitionSpec ElementwiseSharding(const PartitionSpec& first, const PartitionSpec& second,
                                  const Mesh& mesh) {
  const size_t n = std::max(first.rank(), second.rank());
  const std::vector<Entry> a = Effective(first, n, mesh), b = Effective(second, n, mesh);
  // Per dim the longer of two compatible shardings (one a prefix of the other), else their
  // common prefix; `source` is the operand it came from.
  std::vector<Entry> want(n);
  std::vector<int> source(n, 0);
  for (size_t d = 0; d < n; ++d) {
    size_t k = 0;
    while (k < a[d].size() && k < b[d].size() && a[d][k] == b[d][k]) ++k;
    if (k == a[d].size() || k == b[d].size()) {
      const bool second_longer = b[d].size() > a[d].size();
      want[d] = second_longer ? b[d] : a[d];
      source[d] = second_longer ? 1 : 0;
    } else {
      want[d] = Entry(a[d].begin(), a[d].begin() + static_cast<std::ptrdiff_t>(k));
    }
  }
  // An axis two dims want goes to the more sharded dim, then to the first operand's.
  std::vector<size_t> order(n);
  for (size_t d = 0; d < n; ++d) order[d] = d;
  std::stable_sort(order.begin(), order.end(), [&](size_t x, size_t y) {
    const int64_t px = Parts(want[x], mesh), py = Parts(want[y], mesh);
    if (px != py) return px > py;
    return source[x] < source[y];
  });
  std::vector<std::string> taken;
  std::vector<Entry> out(n);
  for (const size_t d : order) {
    out[d] = Without(want[d], taken);
    taken.insert(taken.end(), out[d].begin(), out[d].end());
  }
  return PartitionSpec(out);
}

PartitionSpec EffectiveSpec(const PartitionSpec& spec, const Mesh& mesh) {
  return PartitionSpec(Effective(spec, spec.rank(), mesh));
}

PartitionSpec StepOutputRead(const ParsedEinsum& eq, size_t k, const PartitionSpec& computed,
                             const PartitionSpec& want) {
  const std::string& mine = eq.operands[k];
  const std::string& theirs = eq.operands[1 - k];
  const std::vector<Entry>& own = computed.entries();
  std::vector<Entry> read(own.size());
  std::vector<std::string> used;
  auto batch = [&](char c) {
    return eq.output.find(c) != std::string::npos && theirs.find(c) != std::string::npos;
  };
  for (size_t d = 0; d < own.size() && d < mine.size(); ++d) {
    const size_t o = eq.output.find(mine[d]);
    if (!batch(mine[d]) || o >= want.rank()) continue;
    read[d] = want[o];
    used.insert(used.end(), want[o].begin(), want[o].end());
  }
  for (size_t d = 0; d < own.size() && d < mine.size(); ++d)
    if (!batch(mine[d])) read[d] = Without(own[d], used);
  return PartitionSpec(read);
}

}  // namespace shardtrace
