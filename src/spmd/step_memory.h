// The training step's memory per device, as a liveness schedule over one layer: the forward
// in program order, then the backward in reverse, each op's VJP in turn. Every buffer lives
// from the op that writes it to the last op that reads it: a residual the remat policy keeps
// from its forward producer to the VJP of its first forward reader; a residual it does not
// keep is recomputed just before its first VJP reader and freed after its last; a cotangent
// from the VJP of its value's last reader to the VJP of its producer; a weight's gradient the
// forward all-gathered exists whole until its reduce-scatter. Internal to the spmd room: the
// analysis (step_model.cc) hands over the trace's use-def graph as a StepGraph.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <vector>

#include "config/remat_policy.h"
#include "ir/trace.h"
#include "shard/mesh.h"
#include "spmd/spmd_result.h"
#include "spmd/step_model.h"

namespace shardtrace {

// The forward's use-def graph as the step model reads it.
struct StepGraph {
  StepGraph(const Mesh& m, const Trace& t, const SpmdResult& s) : mesh(m), trace(t), spmd(s) {}
  const Mesh& mesh;
  const Trace& trace;
  const SpmdResult& spmd;
  std::vector<int> producer, last_reader, root;  // root: the buffer an alias shares
  std::vector<std::vector<int>> consumers;
  std::vector<bool> need;  // differentiable on both sides: carries a cotangent

  const TensorRecord& T(int id) const { return trace.tensors[static_cast<size_t>(id)]; }
  // Some output of `op` carries a cotangent (its VJP runs).
  bool Live(const OpRecord& op) const;
  // The weight `id` is a cast copy of, or `id`.
  int CastSource(int id) const;
  // A parameter or the input (or an alias of one): not a temporary.
  bool IsArgument(int id) const;
  // What the VJP of `op` reads of the forward.
  std::vector<int> ResidualsOf(const OpRecord& op) const;
  // Bytes of `id` as `op` reads it: an einsum operand the forward gathered is read as the
  // gathered copy (what JAX keeps, or XLA gathers again).
  int64_t ReadBytes(const OpRecord& op, int id) const;
};

// What the schedule decided, for the collectives remat runs again.
struct StepMemoryPlan {
  std::set<int> kept;      // residual roots the policy keeps (device or host)
  std::set<int> gathered;  // ops whose VJP reads a gathered operand
  // By forward op, under a wrapping policy: the backward runs it again, since it produces a
  // residual the policy does not keep (walking back to kept values, parameters and the
  // input), or gathers the weight operand its VJP reads gathered.
  std::vector<bool> run_again;
};

// Fills `m`'s residual, kept and temporary figures (parameters and gradients are set).
// `moved[i]`: bytes of the copies the VJP of op i reshards its operands into (a cotangent
// computed in another sharding than its value's, spmd/step_cotangent.h), live while it runs.
StepMemoryPlan PlanStepMemory(const StepGraph& g, const RematPolicy& policy, StepMemory& m,
                              const std::map<int, int64_t>& moved = {});

}  // namespace shardtrace
