// Tape: reverse-mode differentiation of what a numeric run computed. While a block runs
// forward, every differentiable op is recorded as (input ids, output ids, backward rule); the
// backward rule closes over the primal arrays it needs (shared buffers, so recording costs no
// copy) and maps the cotangents of the op's outputs to the cotangents of its inputs
// (numeric/vjp.h has the rules of the single ops). Backward then walks the records in reverse
// from seed cotangents and accumulates a cotangent per id, as jax.vjp's backward pass does.
// A value is `Shards`: one global array, or one array per simulated device inside shard_map,
// so a collective's rule can move cotangents between devices. The ids are the caller's (the
// tracer uses the Trace's tensor ids); the tape holds no other notion of the program.
// Convention: an Array that is not numeric() stands for a zero cotangent (none flows), so
// rules return `Array{}` for inputs that carry no gradient (indices, masks, counts).
#pragma once

#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "numeric/array.h"

namespace shardtrace {

// A value as the simulator holds it: one global array, or one per simulated device.
using Shards = std::vector<Array>;

class Tape {
 public:
  // The backward rule of one recorded op: one entry per output (an empty Shards where no
  // cotangent reached that output) in, one entry per input out (empty: none flows to it).
  using Rule = std::function<std::vector<Shards>(const std::vector<Shards>& output_cotangents)>;

  // Marks `id` as a variable gradients are taken with respect to (a parameter, the input).
  void AddLeaf(int id) { tracked_.insert(id); }
  // True when `id` depends on a leaf through recorded ops: only ops reading such a value
  // need recording, so routing indices and masks cost nothing.
  bool Tracks(int id) const { return tracked_.contains(id); }
  // Records an op whose inputs include a tracked id; its outputs become tracked. A null
  // `rule` marks an op with no derivative rule: a nonzero cotangent reaching it is an
  // internal error naming `what`, never a silent zero.
  void Record(std::vector<int> inputs, std::vector<int> outputs, Rule rule, std::string what);

  // The reverse pass: starts from `seeds` (id -> cotangent), runs every record in reverse
  // order whose outputs received a cotangent, adds the cotangents an id receives from
  // several readers, and returns the cotangents of the ids in `wanted` (absent when none
  // reached them).
  std::map<int, Shards> Backward(std::map<int, Shards> seeds, const std::vector<int>& wanted) const;

  size_t size() const { return records_.size(); }

 private:
  struct Entry {
    std::vector<int> inputs;
    std::vector<int> outputs;
    Rule rule;
    std::string what;
  };
  std::vector<Entry> records_;
  std::set<int> tracked_;
};

// a + b per shard in `a`'s dtype (rounded once), treating a non-numeric array as zero: how
// cotangents of one value from several readers add up (jax's add_any).
Shards AddCotangents(const Shards& a, const Shards& b);

}  // namespace shardtrace
