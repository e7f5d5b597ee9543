// Graphviz output of a trace: the DOT source carries the scopes as clusters, the einsums and
// collectives as labelled edges and the constraints as double borders; SVG renders in-process.
#include "emit/dot_graph.h"

#include <catch2/catch.hpp>

#include "paths/moe_block.h"
#include "run/run.h"
#include "test_support.h"

namespace shardtrace {
namespace {

Trace SmallSparseTrace() {
  return testing::SymbolicTrace(
      {"base_emb_dim=16", "base_mlp_dim=32", "base_moe_mlp_dim=32", "num_experts=4",
       "num_experts_per_tok=2", "max_target_length=4", "per_device_batch_size=1",
       "decoder_block=mixtral", "ici_expert_parallelism=2"},
      2);
}

}  // namespace

TEST_CASE("The DOT graph of a trace has scope clusters, einsum and collective edges", "[dot]") {
  const Trace trace = SmallSparseTrace();
  const std::string dot = TraceToDot(trace);
  CHECK(dot.rfind("digraph shardtrace {", 0) == 0);
  CHECK_THAT(dot, Catch::Contains("label=\"RoutedMoE\"") && Catch::Contains("label=\"wrapper\""));
  CHECK_THAT(dot, Catch::Contains("einsum BSM,ME->BSE"));
  CHECK_THAT(dot, Catch::Contains("ragged_all_to_all over expert"));
  CHECK_THAT(dot, Catch::Contains("color=red"));
  CHECK_THAT(dot, Catch::Contains("P('expert', None, None)"));
  CHECK_THAT(dot, Catch::Contains("peripheries=2"));
  // One node per tensor record.
  size_t nodes = 0;
  for (const TensorRecord& t : trace.tensors)
    nodes += dot.find(" t" + std::to_string(t.id) + " [") != std::string::npos;
  CHECK(nodes == trace.tensors.size());
  CHECK(TraceToDot(trace) == dot);  // deterministic
}

TEST_CASE("A trace renders to SVG in-process", "[dot]") {
  const std::string svg = TraceToSvg(SmallSparseTrace());
  CHECK(svg.rfind("<?xml", 0) == 0);
  CHECK_THAT(svg, Catch::Contains("<svg") && Catch::Contains("gate_logits"));
}

}  // namespace shardtrace
