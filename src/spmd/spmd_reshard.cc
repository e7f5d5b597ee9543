#include "spmd/spmd_reshard.h"

#include <algorithm>
#include <map>

#include "shard/sharding.h"

namespace shardtrace {
namespace {

using Entries = std::vector<PartitionSpec::Entry>;

bool Contains(const std::vector<std::string>& v, const std::string& x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

// The dim of `entries` that uses mesh axis `axis`, or -1.
int DimOf(const Entries& entries, const std::string& axis) {
  for (size_t d = 0; d < entries.size(); ++d)
    if (Contains(entries[d], axis)) return static_cast<int>(d);
  return -1;
}

// Drops mesh axes of size 1 (they shard nothing).
Entries Effective(const PartitionSpec& spec, const Mesh& mesh) {
  Entries out;
  for (const PartitionSpec::Entry& e : spec.entries()) {
    PartitionSpec::Entry kept;
    for (const std::string& a : e)
      if (mesh.Size(a) > 1) kept.push_back(a);
    out.push_back(kept);
  }
  return out;
}

// Inserts `axis` into `entry` where `target` puts it relative to the axes already there.
// Returns true when it lands minor-most (the device's new block lies inside its old one).
bool InsertOrdered(PartitionSpec::Entry& entry, const std::string& axis,
                   const PartitionSpec::Entry& target) {
  const auto rank = [&](const std::string& a) {
    return std::find(target.begin(), target.end(), a) - target.begin();
  };
  auto pos = entry.begin();
  while (pos != entry.end() && rank(*pos) < rank(axis)) ++pos;
  const bool minor = pos == entry.end();
  entry.insert(pos, axis);
  return minor;
}

}  // namespace

PartitionSpec WithRank(const PartitionSpec& spec, size_t rank) {
  Entries entries = spec.entries();
  entries.resize(rank);
  return PartitionSpec(entries);
}

Shape LocalShapeOf(const Shape& shape, const PartitionSpec& spec, const Mesh& mesh) {
  Shape local = shape;
  for (size_t d = 0; d < shape.size() && d < spec.rank(); ++d) {
    const int64_t parts = mesh.Size(spec[d]);
    if (parts > 1) local[d] = (shape[d] + parts - 1) / parts;
  }
  return local;
}

std::vector<ImpliedCollective> PlanReshard(const Shape& shape, DType dtype, const ShardState& from,
                                           const PartitionSpec& to_in, const Mesh& mesh,
                                           bool regroup) {
  const Entries to = Effective(WithRank(to_in, shape.size()), mesh);
  Entries cur = Effective(WithRank(from.spec, shape.size()), mesh);
  std::vector<ImpliedCollective> out;
  // Appends one collective and applies it to `cur`.
  auto emit = [&](CollectiveKind kind, const std::vector<std::string>& axes, const Entries& next,
                  int64_t group = 0) {
    // A permute's blocks travel in cycles over the old axis's size (2: pairs of devices);
    // `group` overrides the devices per group (a gather over part of an axis).
    const int64_t n = group > 0 ? group
                      : kind == CollectiveKind::kCollectivePermute ? mesh.Size(axes.front())
                                                                   : mesh.Size(axes);
    const Shape before = LocalShapeOf(shape, PartitionSpec(cur), mesh);
    const int64_t bytes = TensorBytes(before, dtype);
    ImpliedCollective c;
    c.kind = kind;
    c.axes = axes;
    c.participants = n;
    c.groups = mesh.num_devices() / std::max<int64_t>(n, 1);
    switch (kind) {
      case CollectiveKind::kAllGather:
        c.bytes_per_device = (n - 1) * bytes;
        break;
      case CollectiveKind::kPsum:
        c.bytes_per_device = 2 * (n - 1) * bytes / n;
        break;
      case CollectiveKind::kPsumScatter:
      case CollectiveKind::kAllToAll:
      // Never emitted here (only moe.py writes a ragged all-to-all); its bound is an all-to-all's.
      case CollectiveKind::kRaggedAllToAll:
        c.bytes_per_device = (n - 1) * bytes / n;
        break;
      case CollectiveKind::kSlice:
        c.bytes_per_device = 0;
        break;
      case CollectiveKind::kCollectivePermute:  // each device receives its new block
        c.bytes_per_device = TensorBytes(LocalShapeOf(shape, PartitionSpec(next), mesh), dtype);
        break;
    }
    c.from = PartitionSpec(cur);
    c.to = PartitionSpec(next);
    c.local_before = before;
    c.local_after = LocalShapeOf(shape, c.to, mesh);
    cur = next;
    out.push_back(std::move(c));
  };

  // 1. Partial sums: reduce-scatter into the dim the target shards on the axis, else
  //    all-reduce. One collective per target dim (XLA combines the axes of one dim). A
  //    reduce-scatter splits each device's block, so it serves only an axis the target puts
  //    minor to the dim's current axes; one it puts major (the gate kernel's gradient computed
  //    on P('tensor', None), partial over 'expert', into P('expert', None) with EP=2 x TP=2)
  //    is all-reduced, and the block then moves to its owner (a collective-permute below, as
  //    in the compiled step's HLO).
  std::map<int, std::vector<std::string>> scatter;
  std::vector<std::string> reduce;
  for (const std::string& axis : from.partial) {
    if (mesh.Size(axis) <= 1) continue;
    const int d = DimOf(to, axis);
    PartitionSpec::Entry probe = d >= 0 ? cur[d] : PartitionSpec::Entry{};
    if (d >= 0 && DimOf(cur, axis) < 0 && InsertOrdered(probe, axis, to[d]))
      scatter[d].push_back(axis);
    else
      reduce.push_back(axis);
  }
  for (auto& [d, axes] : scatter) {
    Entries next = cur;
    for (const std::string& a : axes) InsertOrdered(next[d], a, to[d]);
    emit(CollectiveKind::kPsumScatter, axes, next);
  }
  if (!reduce.empty()) emit(CollectiveKind::kPsum, reduce, cur);

  // 2p. A dim held on one mesh axis that the target holds on another axis of the same size
  //     or a multiple of it, neither used elsewhere: device (.., i on the old axis, j on the
  //     new, ..) needs block j, which lies inside the block the devices with i = j / (new
  //     size / old size) hold, so XLA sends each new block whole to its owner (a
  //     collective-permute: the gate kernel P('fsdp', None) meeting an input whose M is on
  //     'tensor' in the fsdp=2 x tensor=2 cases' HLO; its gradient, computed on
  //     P('tensor', None), sent back to P('fsdp', None) as [4,8] blocks with fsdp=4 x
  //     tensor=2), not gather and slice.
  for (size_t d = 0; d < to.size(); ++d) {
    if (cur[d].size() != 1 || to[d].size() != 1 || cur[d] == to[d]) continue;
    const std::string& old_axis = cur[d][0];
    const std::string& new_axis = to[d][0];
    if (mesh.Size(new_axis) % mesh.Size(old_axis) != 0 || DimOf(to, old_axis) >= 0 ||
        DimOf(cur, new_axis) >= 0)
      continue;
    Entries next = cur;
    next[d] = to[d];
    emit(CollectiveKind::kCollectivePermute, {old_axis, new_axis}, next);
  }

  // 2q. The same with the old axis a multiple r of the new one: device (.., i, j, ..) needs
  //     new block j, made of old blocks j*r .. j*r+r-1. XLA moves old blocks between devices
  //     (a collective-permute in pairs) so that r devices that need the same new block hold
  //     its r old blocks, then all-gathers over those r (the gate kernel's gradient computed on
  //     P('tensor', None), sent to P('expert', None) with EP=2 x TP=4: a [4,8] permute, then a
  //     [8,8] all-gather over 2 devices), not a gather of the whole dim. Only with
  //     `regroup`: the forward cases' gate kernel, P('fsdp', None) with fsdp=4 meeting an
  //     input whose M is on 'tensor' (2), is gathered whole (2a).
  for (size_t d = 0; regroup && d < to.size(); ++d) {
    if (cur[d].size() != 1 || to[d].size() != 1 || cur[d] == to[d]) continue;
    const std::string old_axis = cur[d][0];
    const std::string& new_axis = to[d][0];
    const int64_t k = mesh.Size(old_axis), m = mesh.Size(new_axis);
    if (k <= m || k % m != 0 || DimOf(to, old_axis) >= 0 || DimOf(cur, new_axis) >= 0) continue;
    emit(CollectiveKind::kCollectivePermute, {old_axis, new_axis}, cur, 2);
    Entries next = cur;
    next[d] = to[d];
    emit(CollectiveKind::kAllGather, {old_axis}, next, k / m);
  }

  // 2a. A dim whose new axis would land major to axes the target drops anyway: XLA gathers
  //     those first and then slices the new axis for free (the compiled HLO of fsdp x
  //     tensor cases all-gathers the gate kernel whole rather than re-tiling it).
  for (size_t d = 0; d < to.size(); ++d) {
    bool retile = false;
    for (const std::string& axis : to[d])
      if (DimOf(cur, axis) < 0) {
        PartitionSpec::Entry probe = cur[d];
        retile |= !InsertOrdered(probe, axis, to[d]);
      }
    std::vector<std::string> dropped;
    for (const std::string& axis : cur[d])
      if (DimOf(to, axis) < 0) dropped.push_back(axis);
    if (!retile || dropped.empty()) continue;
    Entries next = cur;
    for (const std::string& a : dropped)
      next[d].erase(std::find(next[d].begin(), next[d].end(), a));
    emit(CollectiveKind::kAllGather, dropped, next);
  }

  // 2. Axes the target adds to a dim that no dim uses yet: each device keeps a sub-block
  //    (a free slice) when the axis lands minor-most; otherwise blocks change owners.
  std::map<int, std::vector<std::string>> slices, retiles;
  for (size_t d = 0; d < to.size(); ++d)
    for (const std::string& axis : to[d])
      if (DimOf(cur, axis) < 0) {
        PartitionSpec::Entry probe = cur[d];
        for (const std::string& s : slices[static_cast<int>(d)]) probe.push_back(s);
        (InsertOrdered(probe, axis, to[d]) ? slices : retiles)[static_cast<int>(d)].push_back(axis);
      }
  for (auto& [d, axes] : slices) {
    if (axes.empty()) continue;
    Entries next = cur;
    for (const std::string& a : axes) InsertOrdered(next[d], a, to[d]);
    emit(CollectiveKind::kSlice, axes, next);
  }
  for (auto& [d, axes] : retiles) {
    if (axes.empty()) continue;
    Entries next = cur;
    for (const std::string& a : axes) InsertOrdered(next[d], a, to[d]);
    emit(CollectiveKind::kAllToAll, axes, next);
  }

  // 3. Axes that move from one dim to another: all-to-all, one per (source, target) pair.
  std::map<std::pair<int, int>, std::vector<std::string>> moves;
  for (size_t d = 0; d < cur.size(); ++d)
    for (const std::string& axis : cur[d]) {
      const int target = DimOf(to, axis);
      if (target >= 0 && target != static_cast<int>(d))
        moves[{static_cast<int>(d), target}].push_back(axis);
    }
  for (auto& [dims, axes] : moves) {
    Entries next = cur;
    for (const std::string& a : axes) {
      auto& src = next[dims.first];
      src.erase(std::find(src.begin(), src.end(), a));
      InsertOrdered(next[dims.second], a, to[dims.second]);
    }
    emit(CollectiveKind::kAllToAll, axes, next);
  }

  // 4. Axes the target drops: all-gather, one per dim.
  for (size_t d = 0; d < cur.size(); ++d) {
    std::vector<std::string> axes;
    for (const std::string& axis : cur[d])
      if (DimOf(to, axis) < 0) axes.push_back(axis);
    if (axes.empty()) continue;
    Entries next = cur;
    for (const std::string& a : axes) next[d].erase(std::find(next[d].begin(), next[d].end(), a));
    emit(CollectiveKind::kAllGather, axes, next);
  }

  // 5. Same axes in a different order within a dim: blocks change owners.
  for (size_t d = 0; d < cur.size(); ++d)
    if (cur[d] != to[d]) {
      Entries next = cur;
      next[d] = to[d];
      emit(CollectiveKind::kAllToAll, to[d], next);
    }
  return out;
}

}  // namespace shardtrace
