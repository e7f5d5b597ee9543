#include "model/unmodelled.h"

#include <array>

namespace shardtrace {
namespace {

struct Texts {
  Unmodelled kind;
  std::string_view json, label, explanation;
};

// One row per kind: its JSON spelling, a table cell's words, and the sentence shown beside a
// verdict.
constexpr std::array<Texts, 3> kTexts = {{
    {Unmodelled::kOffloadStaging, "offload_staging", "offloads several names",
     "the policy offloads several names, whose stacks TPU's compiler has staged whole in HBM to "
     "change their layout (Mixtral 8x7B dropping on v6e-256 ran out of HBM where fit says it "
     "fits): not modelled, compile to be sure"},
    {Unmodelled::kRaggedDotVmem, "ragged_dot_vmem", "megablox=false",
     "megablox=false runs the grouped matmuls as jax.lax.ragged_dot, whose TPU kernel ran out of "
     "VMEM compiling Mixtral 8x7B's weight gradient (bf16[8,4096,14336]) on v5p-8 where fit says "
     "it fits: not modelled, compile to be sure"},
    {Unmodelled::kDenseDispatchWindows, "dense_dispatch_windows", "sparse_matmul=false",
     "sparse_matmul=false with the expert kernels gathered over 8 or 16 devices: TPU's compiler "
     "runs the dense dispatch's backward over whole kernels or in windowed einsums, by a rule "
     "read on twelve compiles only (fit's temp from 24.1% under the compiler's, Qwen3-Next on "
     "v5p-32, to 16.9% over, qwen3-30b on v5p-16): compile to be sure"},
}};

const Texts& Of(Unmodelled u) {
  for (const Texts& t : kTexts)
    if (t.kind == u) return t;
  return kTexts.front();
}

}  // namespace

std::string_view ToString(Unmodelled u) { return Of(u).json; }
std::string_view ShortLabel(Unmodelled u) { return Of(u).label; }
std::string_view Explanation(Unmodelled u) { return Of(u).explanation; }

}  // namespace shardtrace
